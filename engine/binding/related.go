package binding

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/related"
	"github.com/kbind/kbind/engine/session"
)

// reconcileRelated copies the binding's related resources (SYNC-R).
func (r *Reconciler) reconcileRelated(ctx context.Context, b binding, before *kbindv1alpha1.BindingStatus, o *observation) error {
	if len(b.spec.RelatedResources) == 0 {
		b.status.RelatedResources = nil
		if before.RelatedResources == nil {
			return nil // never copied anything: nothing to clean up
		}
		return r.cleanupRelated(ctx, b)
	}
	if o.connProblem != "" || o.session == nil {
		return nil
	}
	res, err := r.Related.Sync(ctx, r.relatedBinding(b, o.clusterUID), o.session)
	if err != nil {
		return fmt.Errorf("copying related resources: %w", err)
	}
	b.status.RelatedResources = &res.Status
	o.instanceForbidden = append(o.instanceForbidden, res.Forbidden...)
	return nil
}

func (r *Reconciler) relatedBinding(b binding, clusterUID string) related.Binding {
	ns := ""
	if r.Namespaced {
		ns = b.obj.GetNamespace()
	}
	return related.Binding{Object: b.obj, UID: string(b.obj.GetUID()), Namespace: ns, Connection: b.spec.ConnectionRef.Name,
		Entries: b.spec.RelatedResources, ClusterUID: clusterUID}
}

// cleanupRelated deletes every related copy of the binding (entries
// removed, or the binding deleting).
func (r *Reconciler) cleanupRelated(ctx context.Context, b binding) error {
	conn := &kbindv1alpha1.Connection{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: b.spec.ConnectionRef.Name}, conn); err != nil || conn.Status.LocalClusterUID == "" {
		return client.IgnoreNotFound(err)
	}
	var sess *session.Session
	if s, ok := r.Sessions.Get(conn.Name); ok {
		sess = s
	}
	if _, err := r.Related.Cleanup(ctx, r.relatedBinding(b, conn.Status.LocalClusterUID), sess); err != nil {
		return err
	}
	r.Related.Forget(string(b.obj.GetUID()))
	return nil
}
