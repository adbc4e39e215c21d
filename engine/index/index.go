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

// Package index owns the cache field indexes the engine reads through, so
// that finding the bindings of a Connection, the Connections of a Secret or
// the CRDs of a group never costs an API LIST.
package index

import (
	"context"
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

const (
	// BindingConnection indexes ClusterBindings and Bindings by
	// spec.connectionRef.name.
	BindingConnection = "spec.connectionRef.name"
	// BindingAPI indexes ClusterBindings and Bindings by the consumer API
	// of each spec.apis[] entry (its name, or its projection's:
	// APIReference.ConsumerName).
	BindingAPI = "spec.apis.name"
	// ConnectionSecret indexes Connections by "<namespace>/<name>" of their
	// kubeconfig Secret.
	ConnectionSecret = "spec.kubeconfigSecretRef"
	// CRDGroup indexes CustomResourceDefinitions by spec.group: the names
	// a new consumer CRD may take depend on the other CRDs of its group.
	CRDGroup = "spec.group"
)

// SecretKey is the ConnectionSecret index value of a Secret.
func SecretKey(namespace, name string) string { return namespace + "/" + name }

// Setup registers every index with the indexer (the manager's field indexer).
func Setup(ctx context.Context, indexer client.FieldIndexer) error {
	byConnection := func(obj client.Object) []string {
		if b, ok := obj.(kbindv1alpha1.BindingObject); ok {
			return []string{b.BindingSpec().ConnectionRef.Name}
		}
		return nil
	}
	byAPI := func(obj client.Object) []string {
		b, ok := obj.(kbindv1alpha1.BindingObject)
		if !ok {
			return nil
		}
		return b.BindingSpec().ConsumerNames()
	}
	for _, obj := range []client.Object{&kbindv1alpha1.ClusterBinding{}, &kbindv1alpha1.Binding{}} {
		if err := indexer.IndexField(ctx, obj, BindingConnection, byConnection); err != nil {
			return fmt.Errorf("indexing %T by connection: %w", obj, err)
		}
		if err := indexer.IndexField(ctx, obj, BindingAPI, byAPI); err != nil {
			return fmt.Errorf("indexing %T by API: %w", obj, err)
		}
	}
	if err := indexer.IndexField(ctx, &kbindv1alpha1.Connection{}, ConnectionSecret, func(obj client.Object) []string {
		ref := obj.(*kbindv1alpha1.Connection).Spec.KubeconfigSecretRef
		return []string{SecretKey(ref.Namespace, ref.Name)}
	}); err != nil {
		return fmt.Errorf("indexing connections by secret: %w", err)
	}
	if err := indexer.IndexField(ctx, &apiextensionsv1.CustomResourceDefinition{}, CRDGroup, func(obj client.Object) []string {
		return []string{obj.(*apiextensionsv1.CustomResourceDefinition).Spec.Group}
	}); err != nil {
		return fmt.Errorf("indexing CRDs by group: %w", err)
	}
	return nil
}

// Kinds selects the kinds of binding ListBindings reads.
type Kinds uint8

const (
	// ClusterBindings selects ClusterBindings.
	ClusterBindings Kinds = 1 << iota
	// Bindings selects (namespaced) Bindings.
	Bindings
	// AllBindings selects both kinds.
	AllBindings = ClusterBindings | Bindings
)

// ListBindings is the one lister of bindings of either kind: those of kinds
// that match opts (an index field of this package, a namespace), read
// through r (the manager's cache). ClusterBindings come first; each kind is
// sorted by namespace and name, so that callers that pick the first match
// decide the same way on every reconcile.
func ListBindings(ctx context.Context, r client.Reader, kinds Kinds, opts ...client.ListOption) ([]kbindv1alpha1.BindingObject, error) {
	var out []kbindv1alpha1.BindingObject
	if kinds&ClusterBindings != 0 {
		var list kbindv1alpha1.ClusterBindingList
		if err := r.List(ctx, &list, opts...); err != nil {
			return nil, fmt.Errorf("listing clusterbindings: %w", err)
		}
		out = appendSorted(out, list.Items)
	}
	if kinds&Bindings != 0 {
		var list kbindv1alpha1.BindingList
		if err := r.List(ctx, &list, opts...); err != nil {
			return nil, fmt.Errorf("listing bindings: %w", err)
		}
		out = appendSorted(out, list.Items)
	}
	return out, nil
}

// appendSorted appends pointers to items, sorted by namespace and name.
func appendSorted[T any, P interface {
	*T
	kbindv1alpha1.BindingObject
}](out []kbindv1alpha1.BindingObject, items []T) []kbindv1alpha1.BindingObject {
	start := len(out)
	for i := range items {
		out = append(out, P(&items[i]))
	}
	added := out[start:]
	sort.Slice(added, func(i, j int) bool {
		if added[i].GetNamespace() != added[j].GetNamespace() {
			return added[i].GetNamespace() < added[j].GetNamespace()
		}
		return added[i].GetName() < added[j].GetName()
	})
	return out
}
