/*
Copyright The kbind Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package namespace creates the namespaces kbind needs on either cluster
// (a provider namespace for copies, a target namespace for related copies,
// the heartbeat Lease namespace), always with kbind's markers, so that the
// backend reaper recognises them.
package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/ownership"
)

// Policy says how Ensure makes a missing namespace and whether an
// existing one may be written into.
type Policy struct {
	// Markers are stamped on the namespace when Ensure creates it.
	Markers kbindv1alpha1.Markers
	// Owned: an existing namespace is used only when kbind created it for
	// ConsumerClusterUID (its ConsumerClusterUIDAnnotation); any other is a
	// conflict, never adopted. This is a provider namespace under Prefixed
	// isolation, whose name a consumer namespace maps to. Without Owned an
	// existing namespace is used as it is: without isolation providers share
	// their namespaces with consumers by design, and a consumer's namespaces
	// are its own.
	Owned bool
	// ConsumerClusterUID is this consumer cluster's identity (Owned).
	ConsumerClusterUID string
}

// Ensure makes sure the namespace name exists: read through r (a cache, or
// the client itself), created through c with p.Markers when missing. It
// returns, when p.Owned, the ownership conflict of an existing namespace (see
// ownership.Namespace; "" when it may be used). A namespace created by
// someone else between the read and the create is used when p.Owned is
// false, and under p.Owned is an error: retried, and classified once r
// sees it. Other API errors are returned as they are, so that callers can
// tell a refusal; they wrap them.
func Ensure(ctx context.Context, r client.Reader, c client.Client, name string, p Policy) (kbindv1alpha1.Reason, error) {
	existing := &corev1.Namespace{}
	err := r.Get(ctx, client.ObjectKey{Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		err := CreateMarked(ctx, c, name, p.Markers)
		if apierrors.IsAlreadyExists(err) {
			if !p.Owned {
				return "", nil
			}
			return "", fmt.Errorf("namespace %s was created by someone else since it was read; it is checked once it can be read: %w", name, err)
		}
		return "", err
	case err != nil:
		return "", err
	case !p.Owned:
		return "", nil
	}
	return ownership.Namespace(existing.GetAnnotations(), p.ConsumerClusterUID), nil
}

// CreateMarked creates the namespace name with the given markers; it
// returns AlreadyExists when the namespace exists.
func CreateMarked(ctx context.Context, c client.Client, name string, markers kbindv1alpha1.Markers) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	markers.Stamp(ns)
	return c.Create(ctx, ns)
}
