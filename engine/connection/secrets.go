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
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/internal/patch"
)

// SecretReconciler releases the core.kbind.io/cleanup finalizer of a
// kubeconfig Secret once no Connection needs the Secret any more (CONN-7:
// reference-counted, the Secret itself is never deleted). The Connection
// reconciler adds the finalizer; this reconciler alone removes it, driven by
// the Secret's and the Connections' watches — so the last of several
// Connections sharing a Secret releases it even when each of them, finishing
// at the same moment, still saw the other in a lagging cache.
type SecretReconciler struct {
	Client client.Client
	// SecretNamespaces are the namespaces kubeconfig Secrets may live in
	// (and the only ones cached). A Connection naming a Secret elsewhere
	// is reported by the Connection reconciler; this one never looks.
	SecretNamespaces []string
}

// secretNeeded reports whether any of the Connections referencing a Secret
// still needs it: a live one, or a deleting one that has not finished (it
// holds its own finalizer and may still drain through the Secret's
// credentials).
func secretNeeded(conns []kbindv1alpha1.Connection) bool {
	for i := range conns {
		if conns[i].DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(&conns[i], kbindv1alpha1.CleanupFinalizer) {
			return true
		}
	}
	return false
}

// Reconcile implements reconcile.Reconciler.
func (r *SecretReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, req.NamespacedName, secret); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
		return ctrl.Result{}, nil
	}
	var conns kbindv1alpha1.ConnectionList
	if err := r.Client.List(ctx, &conns, client.MatchingFields{index.ConnectionSecret: index.SecretKey(secret.Namespace, secret.Name)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing connections of secret %s: %w", req, err)
	}
	if secretNeeded(conns.Items) {
		return ctrl.Result{}, nil
	}
	if err := patch.RemoveFinalizer(ctx, r.Client, secret, kbindv1alpha1.CleanupFinalizer); err != nil {
		return ctrl.Result{}, fmt.Errorf("kubeconfig Secret %s: %w", req, err)
	}
	log.FromContext(ctx).V(1).Info("Released the kubeconfig Secret: no Connection uses it any more")
	return ctrl.Result{}, nil
}

// SetupWithManager wires the reconciler: kubeconfig Secrets (the manager
// caches Secrets only in the allowed namespaces) and the Connections that
// reference them.
func (r *SecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kubeconfigsecret").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return controllerutil.ContainsFinalizer(o, kbindv1alpha1.CleanupFinalizer)
		}))).
		Watches(&kbindv1alpha1.Connection{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ref := o.(*kbindv1alpha1.Connection).Spec.KubeconfigSecretRef
			if !slices.Contains(r.SecretNamespaces, ref.Namespace) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
		})).
		Complete(r)
}
