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

package binding

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/syncer"
)

// SetupWithManager wires the reconciler: its own kind (spec and deletion
// changes — turning deletionProtection off on a held binding is a spec
// change, acted on at once), the Connection it names (any change: Ready
// and exports live in status, namespacedBindings in spec), consumer CRDs
// of the APIs it lists, for Bindings the ClusterBindings that may overlap
// them and the labels and deletion of their namespace (a Connection's
// namespace selector, BIND-3; a namespace deleted is not protected
// against), and for ClusterBindings the bindings of the same APIs (their
// spec and deletion).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Resync <= 0 {
		return errors.New("binding: Resync must be positive")
	}
	r.kept = &syncer.KeptCounter{Registry: r.Syncers}
	deleting := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(map[bool]string{true: "binding", false: "clusterbinding"}[r.Namespaced]).
		For(r.newObject(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting))).
		Watches(&kbindv1alpha1.Connection{}, handler.EnqueueRequestsFromMapFunc(r.byIndex(index.BindingConnection, func(o client.Object) []string { return []string{o.GetName()} }))).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(r.byIndex(index.BindingAPI, func(o client.Object) []string { return []string{o.GetName()} })))
	consumerNames := func(o client.Object) []string { return o.(kbindv1alpha1.BindingObject).BindingSpec().ConsumerNames() }
	if r.Namespaced {
		b = b.Watches(&kbindv1alpha1.ClusterBinding{}, handler.EnqueueRequestsFromMapFunc(r.byIndex(index.BindingAPI, consumerNames)))
	} else {
		// A Binding that goes, or stops listing an API, may free the
		// consumer CRD a ClusterBinding's entry waits to replace
		// (replaceCollided): look again at once, not at the next resync.
		b = b.Watches(&kbindv1alpha1.Binding{}, handler.EnqueueRequestsFromMapFunc(r.byIndex(index.BindingAPI, consumerNames)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
		// Another ClusterBinding that comes, goes or changes its APIs
		// changes whether unbinding this one deletes the consumer CRD
		// (status.boundAPIs[].unbindDeletesCRD): say so at once.
		b = b.Watches(&kbindv1alpha1.ClusterBinding{}, handler.EnqueueRequestsFromMapFunc(r.byIndex(index.BindingAPI, consumerNames)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if r.Namespaced {
		// Namespaces as metadata only (the informer admission.Admits
		// reads): labels are all it needs.
		// A namespace being deleted releases the deletion protection of
		// its Bindings (holdDeletion): look at them when it starts.
		nsDeleting := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		}}
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.inNamespace),
			builder.OnlyMetadata, builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, nsDeleting)))
	}
	if r.Triggers != nil {
		b = b.WatchesRawSource(source.Channel(r.Triggers, handler.EnqueueRequestsFromMapFunc(
			r.byIndex(index.BindingConnection, func(o client.Object) []string { return []string{o.GetName()} }))))
	}
	return b.Complete(r)
}

// inNamespace maps a namespace to the Bindings in it, from the cache.
func (r *Reconciler) inNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	list, err := index.ListBindings(ctx, r.Client, index.Bindings, client.InNamespace(ns.GetName()))
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Mapping a namespace to its Bindings", "namespace", ns.GetName())
		return nil
	}
	return requests(list)
}

// byIndex maps an object to the bindings of this kind whose index field
// matches any of the values keys returns.
func (r *Reconciler) byIndex(field string, keys func(client.Object) []string) handler.MapFunc {
	kind := index.ClusterBindings
	if r.Namespaced {
		kind = index.Bindings
	}
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, key := range keys(obj) {
			list, err := index.ListBindings(ctx, r.Client, kind, client.MatchingFields{field: key})
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Mapping to bindings", "field", field, "namespaced", r.Namespaced)
				continue
			}
			reqs = append(reqs, requests(list)...)
		}
		return reqs
	}
}

// requests are the reconcile requests of bindings.
func requests(list []kbindv1alpha1.BindingObject) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(list))
	for _, b := range list {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	}
	return reqs
}
