// Package index owns the cache field indexes the engine reads through, so
// that finding the bindings of a Connection or the Connections of a Secret
// never costs an API LIST.
package index

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

const (
	// BindingConnection indexes ClusterBindings and Bindings by
	// spec.connectionRef.name.
	BindingConnection = "spec.connectionRef.name"
	// BindingAPI indexes ClusterBindings and Bindings by each
	// spec.apis[].name.
	BindingAPI = "spec.apis.name"
	// ConnectionSecret indexes Connections by "<namespace>/<name>" of their
	// kubeconfig Secret.
	ConnectionSecret = "spec.kubeconfigSecretRef"
)

// SecretKey is the ConnectionSecret index value of a Secret.
func SecretKey(namespace, name string) string { return namespace + "/" + name }

// Setup registers every index with the indexer (the manager's field indexer).
func Setup(ctx context.Context, indexer client.FieldIndexer) error {
	byConnection := func(obj client.Object) []string {
		switch b := obj.(type) {
		case *kbindv1alpha1.ClusterBinding:
			return []string{b.Spec.ConnectionRef.Name}
		case *kbindv1alpha1.Binding:
			return []string{b.Spec.ConnectionRef.Name}
		}
		return nil
	}
	for _, obj := range []client.Object{&kbindv1alpha1.ClusterBinding{}, &kbindv1alpha1.Binding{}} {
		if err := indexer.IndexField(ctx, obj, BindingConnection, byConnection); err != nil {
			return fmt.Errorf("indexing %T by connection: %w", obj, err)
		}
	}
	byAPI := func(obj client.Object) []string {
		var apis []kbindv1alpha1.APIReference
		switch b := obj.(type) {
		case *kbindv1alpha1.ClusterBinding:
			apis = b.Spec.APIs
		case *kbindv1alpha1.Binding:
			apis = b.Spec.APIs
		}
		names := make([]string, 0, len(apis))
		for _, a := range apis {
			names = append(names, a.Name)
		}
		return names
	}
	for _, obj := range []client.Object{&kbindv1alpha1.ClusterBinding{}, &kbindv1alpha1.Binding{}} {
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
	return nil
}
