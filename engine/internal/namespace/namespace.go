// Package namespace creates the namespaces kbind needs on either cluster
// (a provider namespace for copies, a target namespace for related copies,
// the heartbeat Lease namespace), always with kbind's markers, so that the
// backend reaper recognises them.
package namespace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Ensure makes sure the namespace name exists: read through r (a cache, or
// the client itself), created through c when it is missing. The API error
// is returned as it is, so that callers can tell a refusal; they wrap it.
func Ensure(ctx context.Context, r client.Reader, c client.Client, name, consumerClusterUID string) error {
	err := r.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	return Create(ctx, c, name, consumerClusterUID)
}

// Create creates the namespace name, marked as created by kbind for the
// consumer cluster; one that exists already is left as it is. Create
// always writes: Ensure reads first.
func Create(ctx context.Context, c client.Client, name, consumerClusterUID string) error {
	if err := CreateMarked(ctx, c, name, kbindv1alpha1.NamespaceMarkers(consumerClusterUID)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// CreateMarked creates the namespace name with the given markers. Unlike
// Create it returns AlreadyExists: a caller that must not use a namespace
// it did not create checks the existing one first.
func CreateMarked(ctx context.Context, c client.Client, name string, markers kbindv1alpha1.Markers) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	markers.Stamp(ns)
	return c.Create(ctx, ns)
}
