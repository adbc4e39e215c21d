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

package connection

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/metrics"
)

// SetupWithManager wires the reconciler: Connections (spec and deletion
// changes, not our own status writes), the kubeconfig Secrets they
// reference, the bindings that hold a deleting Connection, and the
// session layer's wake-ups (session.Manager.HealthChanges: heartbeat
// results, export changes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.validate(); err != nil {
		return err
	}
	r.backoff = probeBackoff()
	metrics.AddHeartbeatSource(r.Sessions)
	deleting := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("connection").
		// Several workers: a provider that is slow to answer holds up its
		// own Connection only, never the others (every provider request
		// also carries the request timeout).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&kbindv1alpha1.Connection{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.connectionsForSecret)).
		Watches(&kbindv1alpha1.ClusterBinding{}, handler.EnqueueRequestsFromMapFunc(connectionOfBinding),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kbindv1alpha1.Binding{}, handler.EnqueueRequestsFromMapFunc(connectionOfBinding),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Sessions.HealthChanges(), &handler.TypedEnqueueRequestForObject[*kbindv1alpha1.Connection]{})).
		Complete(r)
}

func (r *Reconciler) connectionsForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	conns, err := r.connectionsOfSecret(ctx, kbindv1alpha1.SecretKeyReference{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Mapping Secret to Connections")
		return nil
	}
	names := make([]string, 0, len(conns))
	for _, c := range conns {
		names = append(names, c.Name)
	}
	return requestsFor(names...)
}

func connectionOfBinding(_ context.Context, obj client.Object) []reconcile.Request {
	if b, ok := obj.(kbindv1alpha1.BindingObject); ok {
		return requestsFor(b.BindingSpec().ConnectionRef.Name)
	}
	return nil
}
