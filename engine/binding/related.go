package binding

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
	r.watchRelatedSources(o.session, b.spec.RelatedResources)
	r.watchConsumerSources(ctx, o.connection, b.spec.RelatedResources)
	res, err := r.Related.Sync(ctx, r.relatedBinding(b, o.clusterUID), related.Sides{Consumer: r.Direct, Provider: o.session.Client})
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
	return related.Binding{Object: b.obj, UID: string(b.obj.GetUID()), Namespace: ns, Entries: b.spec.RelatedResources, ClusterUID: clusterUID}
}

// cleanupRelated deletes every related copy of the binding (entries
// removed, or the binding deleting).
func (r *Reconciler) cleanupRelated(ctx context.Context, b binding) error {
	conn := &kbindv1alpha1.Connection{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: b.spec.ConnectionRef.Name}, conn); err != nil || conn.Status.LocalClusterUID == "" {
		return client.IgnoreNotFound(err)
	}
	sides := related.Sides{Consumer: r.Direct}
	if sess, ok := r.Sessions.Get(conn.Name); ok {
		sides.Provider = sess.Client
	}
	return r.Related.Cleanup(ctx, r.relatedBinding(b, conn.Status.LocalClusterUID), sides)
}

// watchRelatedSources registers, once per provider session, watches on the
// provider Secrets and ConfigMaps so that a changed FromProvider source is
// copied within seconds (SYNC-R2), not only at the resync.
func (r *Reconciler) watchRelatedSources(sess *session.Session, entries []kbindv1alpha1.RelatedResource) {
	fromProvider := false
	for _, e := range entries {
		fromProvider = fromProvider || e.Direction == kbindv1alpha1.FromProvider
	}
	if !fromProvider || r.Trigger == nil {
		return
	}
	r.watchMu.Lock()
	if r.watching == nil {
		r.watching = map[*session.Session]bool{}
	}
	if r.watching[sess] {
		r.watchMu.Unlock()
		return
	}
	r.watching[sess] = true
	r.watchMu.Unlock()
	connection := sess.Connection
	sess.Go(func(ctx context.Context) {
		defer func() {
			r.watchMu.Lock()
			delete(r.watching, sess)
			r.watchMu.Unlock()
		}()
		for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
			inf, err := sess.Cache().GetInformer(ctx, obj)
			if err != nil {
				log.FromContext(ctx).Info("No provider watch for related resources; the binding resync copies them", "error", err.Error())
				continue
			}
			_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { r.Trigger(connection) },
				UpdateFunc: func(any, any) { r.Trigger(connection) },
				DeleteFunc: func(any) { r.Trigger(connection) },
			})
		}
		<-ctx.Done()
	})
}

// watchConsumerSources starts, once, a metadata-only watch on consumer
// Secrets and ConfigMaps (payloads are never cached) that re-queues the
// bindings of Connections with FromConsumer entries, so that a changed
// consumer source is copied within seconds (SYNC-R2).
func (r *Reconciler) watchConsumerSources(ctx context.Context, connection string, entries []kbindv1alpha1.RelatedResource) {
	fromConsumer := false
	for _, e := range entries {
		fromConsumer = fromConsumer || e.Direction == kbindv1alpha1.FromConsumer
	}
	if !fromConsumer || r.Trigger == nil || r.ConsumerMetadata == nil {
		return
	}
	r.watchMu.Lock()
	if r.fromConsumerConn == nil {
		r.fromConsumerConn = map[string]bool{}
	}
	r.fromConsumerConn[connection] = true
	r.watchMu.Unlock()
	r.consumerWatch.Do(func() {
		factory := metadatainformer.NewSharedInformerFactory(r.ConsumerMetadata, 0)
		handler := toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { r.triggerFromConsumer() },
			UpdateFunc: func(any, any) { r.triggerFromConsumer() },
			DeleteFunc: func(any) { r.triggerFromConsumer() },
		}
		for _, gvr := range []schema.GroupVersionResource{{Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "configmaps"}} {
			_, _ = factory.ForResource(gvr).Informer().AddEventHandler(handler)
		}
		factory.Start(r.Stop)
	})
}

func (r *Reconciler) triggerFromConsumer() {
	r.watchMu.Lock()
	conns := make([]string, 0, len(r.fromConsumerConn))
	for c := range r.fromConsumerConn {
		conns = append(conns, c)
	}
	r.watchMu.Unlock()
	for _, c := range conns {
		r.Trigger(c)
	}
}
