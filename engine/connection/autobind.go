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
// controlled by the Connection; deleted when nothing is exported. Turning
// autoBind off leaves it.
func (r *Reconciler) reconcileAutoBind(ctx context.Context, conn *kbindv1alpha1.Connection) error {
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
	if len(conn.Status.ExportedAPIs) == 0 {
		if exists && cb.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, cb); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting autoBind ClusterBinding %s: %w", conn.Name, err)
			}
		}
		return nil
	}
	desired := desiredAutoBinding(conn)
	if !exists {
		if err := controllerutil.SetControllerReference(conn, desired, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating autoBind ClusterBinding %s: %w", conn.Name, err)
		}
		return nil
	}
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

// desiredAutoBinding is the autoBind ClusterBinding of a Connection.
func desiredAutoBinding(conn *kbindv1alpha1.Connection) *kbindv1alpha1.ClusterBinding {
	apis := make([]kbindv1alpha1.APIReference, 0, len(conn.Status.ExportedAPIs))
	for _, e := range conn.Status.ExportedAPIs {
		apis = append(apis, kbindv1alpha1.APIReference{Name: e.Name})
	}
	return &kbindv1alpha1.ClusterBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:   conn.Name,
			Labels: map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue},
		},
		Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef:  kbindv1alpha1.ConnectionReference{Name: conn.Name},
			APIs:           apis,
			ConflictPolicy: kbindv1alpha1.ConflictPolicyFail,
		},
	}
}

// deleteAutoBinding deletes the autoBind ClusterBinding of a deleting
// Connection (CONN-7); it drains like any other binding.
func (r *Reconciler) deleteAutoBinding(ctx context.Context, conn *kbindv1alpha1.Connection) error {
	if !conn.Spec.AutoBind {
		return nil
	}
	cb := &kbindv1alpha1.ClusterBinding{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: conn.Name}, cb); err != nil || !metav1.IsControlledBy(cb, conn) || !cb.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, cb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	return nil
}
