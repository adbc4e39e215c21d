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

// Package admission decides which namespaces' Bindings may use a
// Connection (BIND-3): the Connection's spec.namespacedBindings admits
// none (the default), all, or the namespaces whose labels match a
// selector. ClusterBindings, which only cluster admins create, are never
// limited. The binding controller reports the decision on the Binding,
// and the syncer registry leaves a Binding it refuses out of every
// syncer's scope, so that a refused Binding gets nothing: no consumer CRD,
// no sync, no provider request.
//
// Requirement ids in comments (such as BIND-3) refer to docs/requirements.md.
package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Field is the Connection field that decides, for messages.
const Field = "spec.namespacedBindings"

// Decision is whether a Connection admits the Bindings of one namespace.
type Decision struct {
	Admitted bool
	// Why says, when not admitted, which part of the Connection's
	// spec.namespacedBindings refuses the namespace.
	Why string
}

// Namespace is what the decision needs of a namespace: its labels, and
// whether it was found at all.
type Namespace struct {
	Name   string
	Labels map[string]string
	Found  bool
}

// Decide says whether policy admits the Bindings of ns. Only from: Selector
// looks at the namespace; a namespace that cannot be found, and a selector
// that does not parse, admit nothing (a refusal is always safe: the
// Binding says why, and nothing is synced).
func Decide(policy kbindv1alpha1.NamespacedBindings, ns Namespace) Decision {
	switch policy.From {
	case kbindv1alpha1.FromNamespacesAll:
		return Decision{Admitted: true}
	case kbindv1alpha1.FromNamespacesSelector:
		if policy.Selector == nil {
			return Decision{Why: Field + ".from is Selector without a selector, which admits no namespace"}
		}
		selector, err := metav1.LabelSelectorAsSelector(policy.Selector)
		if err != nil {
			return Decision{Why: fmt.Sprintf("%s.selector is invalid, which admits no namespace: %v", Field, err)}
		}
		if !ns.Found {
			return Decision{Why: fmt.Sprintf("namespace %q was not found, so %s.selector (%s) cannot match it", ns.Name, Field, selector)}
		}
		if !selector.Matches(labels.Set(ns.Labels)) {
			return Decision{Why: fmt.Sprintf("the labels of namespace %q do not match %s.selector (%s)", ns.Name, Field, selector)}
		}
		return Decision{Admitted: true}
	default:
		// None, and anything this version does not know: secure by default.
		return Decision{Why: fmt.Sprintf("%s.from is %s: only ClusterBindings may use it", Field, kbindv1alpha1.FromNamespacesNone)}
	}
}

// Admits reads what Decide needs of namespace — its labels, from r (the
// consumer cache), and only under from: Selector — and decides whether conn
// admits its Bindings.
func Admits(ctx context.Context, r client.Reader, conn *kbindv1alpha1.Connection, namespace string) (Decision, error) {
	policy := conn.Spec.NamespacedBindingsOf()
	ns := Namespace{Name: namespace}
	if policy.From == kbindv1alpha1.FromNamespacesSelector {
		meta := NamespaceMetadata()
		switch err := r.Get(ctx, client.ObjectKey{Name: namespace}, meta); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return Decision{}, fmt.Errorf("reading namespace %s: %w", namespace, err)
		default:
			ns.Labels, ns.Found = meta.Labels, true
		}
	}
	return Decide(policy, ns), nil
}

// NamespaceMetadata is the object namespaces are read and watched as: their
// metadata only (labels are all admission needs), so that the konnector
// caches no namespace spec or status.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

// Message is the Binding's Ready message for a refusal: the Connection,
// the namespace, why, and who can change it.
func Message(connection, namespace string, d Decision) string {
	return fmt.Sprintf("Connection %q does not admit Bindings in namespace %q: %s; a cluster admin can admit the namespace in the Connection's %s "+
		"(from: All, or from: Selector with a selector matching the namespace's labels) — or bind the API with a ClusterBinding",
		connection, namespace, d.Why, Field)
}
