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

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// reconcileAutoBind maintains the ClusterBinding named after the
// Connection while autoBind is on (CONN-6): every exported API, Fail,
// controlled by the Connection, protected from deletion when the
// Connection is (spec.deletionProtection, kept equal on every reconcile —
// also while the Connection is not ready, and on a ClusterBinding being
// deleted, whose held deletion proceeds once the Connection's protection
// is off). Only a ready Connection creates it or adds APIs to it. It only
// ever adds APIs: an API that stops being exported stays listed (the
// binding reports APINotExported, like an explicit one) and the
// ClusterBinding stays when nothing is exported — removing an API would drain its provider copies and delete the consumer
// CRD with every object of it, on a provider's label change or CRD
// re-creation. Unbinding is the user's explicit act. Turning autoBind off
// leaves it.
func (r *Reconciler) reconcileAutoBind(ctx context.Context, conn *kbindv1alpha1.Connection, ready bool) error {
	if !conn.Spec.AutoBind {
		return nil
	}
	cb := &kbindv1alpha1.ClusterBinding{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: conn.Name}, cb)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	if exists && !metav1.IsControlledBy(cb, conn) {
		log.FromContext(ctx).Info("Not managing autoBind ClusterBinding: an object of that name exists and is not controlled by this Connection", "clusterBinding", conn.Name)
		return nil
	}
	if !exists {
		if !ready || len(conn.Status.ExportedAPIs) == 0 {
			return nil // nothing to bind yet
		}
		desired := desiredAutoBinding(conn, nil)
		if err := controllerutil.SetControllerReference(conn, desired, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating autoBind ClusterBinding %s: %w", conn.Name, err)
		}
		return nil
	}
	if !ready || !cb.DeletionTimestamp.IsZero() {
		return r.carryProtection(ctx, conn, cb)
	}
	desired := desiredAutoBinding(conn, cb.Spec.APIs)
	if equality.Semantic.DeepEqual(cb.Spec, desired.Spec) && cb.Labels[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue {
		return nil
	}
	base := client.MergeFrom(cb.DeepCopy())
	cb.Spec = desired.Spec
	if cb.Labels == nil {
		cb.Labels = map[string]string{}
	}
	cb.Labels[kbindv1alpha1.ManagedLabel] = kbindv1alpha1.ManagedLabelValue
	if err := r.Client.Patch(ctx, cb, base); err != nil {
		return fmt.Errorf("updating autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	return nil
}

// desiredAutoBinding is the autoBind ClusterBinding of a Connection that
// lists the APIs listed already (nil for a new one): those, as they are,
// plus every exported API not among them (CONN-6: autoBind only ever adds
// APIs; see autoBindAPIs).
func desiredAutoBinding(conn *kbindv1alpha1.Connection, listed []kbindv1alpha1.APIReference) *kbindv1alpha1.ClusterBinding {
	return &kbindv1alpha1.ClusterBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:   conn.Name,
			Labels: map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue},
		},
		Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef:      kbindv1alpha1.ConnectionReference{Name: conn.Name},
			APIs:               autoBindAPIs(listed, conn.Status.ExportedAPIs),
			ConflictPolicy:     kbindv1alpha1.ConflictPolicyFail,
			DeletionProtection: conn.Spec.DeletionProtection,
		},
	}
}

// autoBindAPIs is what the autoBind ClusterBinding lists: every API listed
// already, kept as it is and where it is, then every exported API not
// listed, in the exports' order (by name). It never removes one.
func autoBindAPIs(listed []kbindv1alpha1.APIReference, exported []kbindv1alpha1.ExportedAPI) []kbindv1alpha1.APIReference {
	apis := make([]kbindv1alpha1.APIReference, 0, len(listed)+len(exported))
	have := map[string]bool{}
	for _, a := range listed {
		have[a.Name] = true
		apis = append(apis, *a.DeepCopy())
	}
	for _, e := range exported {
		if !have[e.Name] {
			have[e.Name] = true
			apis = append(apis, kbindv1alpha1.APIReference{Name: e.Name})
		}
	}
	return apis
}

// carryProtection gives the autoBind ClusterBinding cb its Connection's
// spec.deletionProtection, when it differs.
func (r *Reconciler) carryProtection(ctx context.Context, conn *kbindv1alpha1.Connection, cb *kbindv1alpha1.ClusterBinding) error {
	if cb.Spec.DeletionProtection == conn.Spec.DeletionProtection {
		return nil
	}
	base := client.MergeFrom(cb.DeepCopy())
	cb.Spec.DeletionProtection = conn.Spec.DeletionProtection
	if err := r.Client.Patch(ctx, cb, base); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("carrying deletionProtection %t to autoBind ClusterBinding %s: %w", conn.Spec.DeletionProtection, conn.Name, err)
	}
	return nil
}

// deleteAutoBinding deletes the autoBind ClusterBinding of a deleting
// Connection whose deletion is not held (CONN-7), first giving it the
// Connection's protection (off): it drains like any other binding.
func (r *Reconciler) deleteAutoBinding(ctx context.Context, conn *kbindv1alpha1.Connection) error {
	if !conn.Spec.AutoBind {
		return nil
	}
	cb := &kbindv1alpha1.ClusterBinding{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: conn.Name}, cb); err != nil || !metav1.IsControlledBy(cb, conn) {
		return client.IgnoreNotFound(err)
	}
	if err := r.carryProtection(ctx, conn, cb); err != nil || !cb.DeletionTimestamp.IsZero() {
		return err
	}
	if err := r.Client.Delete(ctx, cb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	return nil
}
