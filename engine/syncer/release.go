package syncer

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/ownership"
)

// providerCopy reads, from the provider directly (a drain runs without
// the Syncer's informers), the copy of the consumer object key at its
// mapped provider key. An object that cannot be placed under the
// isolation has no copy.
func (s *Syncer) providerCopy(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, bool, error) {
	pkey, err := s.target.Isolation.Object(key)
	if err != nil {
		return nil, false, nil
	}
	pobj := s.newObject()
	if err := s.session.Client.Get(ctx, pkey, pobj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		// Never taken as absence: the drain waits and retries.
		return nil, false, fmt.Errorf("reading the provider copy %s of %s: %w", pkey, key, err)
	}
	return pobj, true, nil
}

// releaseOrphaned lets the related copier release the related copies of an
// object deleted with the Orphan policy before its finalizer goes (they
// stay, no longer kbind's); done is false while it must wait.
func (s *Syncer) releaseOrphaned(ctx context.Context, cobj *unstructured.Unstructured, policy Policy) (bool, error) {
	if s.orphaned == nil || len(policy.References) == 0 ||
		cobj.GetAnnotations()[kbindv1alpha1.DeletionPolicyAnnotation] != kbindv1alpha1.DeletionPolicyOrphan ||
		!controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) {
		return true, nil
	}
	done, err := s.orphaned(ctx, s.session, s.target, cobj)
	if err != nil {
		return false, fmt.Errorf("releasing the related copies of an orphaned object: %w", err)
	}
	return done, nil
}

// release handles a deleting consumer object, or (drain) one leaving
// scope: the owned provider copy is deleted and the finalizer released only
// once it is gone (SYNC-D). Orphan releases at once and keeps the copy; a
// foreign or absent copy releases.
func (s *Syncer) release(ctx context.Context, cobj, pobj *unstructured.Unstructured, exists bool) (bool, error) {
	if !controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) {
		s.results.forget(s.target, client.ObjectKeyFromObject(cobj))
		return false, nil
	}
	orphan := cobj.GetAnnotations()[kbindv1alpha1.DeletionPolicyAnnotation] == kbindv1alpha1.DeletionPolicyOrphan
	owned := ownership.Classify(exists, annotationsOf(pobj), s.target.ClusterUID, string(cobj.GetUID())) == ownership.Ours
	if owned && !orphan {
		// Before the DELETE, so that the informer's report cannot come
		// first.
		s.deletions.expect(client.ObjectKeyFromObject(cobj), pobj.GetUID())
		if pobj.GetDeletionTimestamp().IsZero() {
			uid := pobj.GetUID()
			if err := s.session.Client.Delete(ctx, pobj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				if apierrors.IsForbidden(err) {
					_, ferr := s.failed(cobj, err, "delete", s.target.GVK.Kind+" "+client.ObjectKeyFromObject(pobj).String())
					return true, ferr
				}
				return false, fmt.Errorf("deleting the provider copy: %w", err)
			}
			log.FromContext(ctx).V(1).Info("Deleted the provider copy; waiting for it to be gone")
		}
		// Held until the copy is gone; provider finalizers hold it longer.
		s.results.set(s.target, client.ObjectKeyFromObject(cobj), Result{State: StatePending})
		return false, nil
	}
	if err := patch.RemoveFinalizer(ctx, s.consumer, cobj, kbindv1alpha1.SyncerFinalizer); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	s.deletions.forget(client.ObjectKeyFromObject(cobj))
	s.results.forget(s.target, client.ObjectKeyFromObject(cobj))
	return false, nil
}

// deletions remembers, per consumer object, the provider copy (by UID)
// whose deletion release waits for, and whether the provider informer has
// reported that very copy deleted. A deleting object whose copy the cache
// no longer holds needs no confirming GET from the provider (SYNC-D) when
// the informer reported the deletion of the copy kbind deleted: no other
// copy can have appeared at that key since, for the Syncer applies nothing
// for a deleting object and forgets the entry whenever it applies. Without
// this, every deletion cost two provider requests (the DELETE and a GET
// answering 404), and a bulk delete ran at half the provider's rate limit.
type deletions struct {
	m sync.Map // types.NamespacedName → deletion
}

type deletion struct {
	uid  types.UID
	seen bool
}

// expect records that release is waiting for the copy uid of key to go.
// It is called before the DELETE is sent, so that the informer's report
// cannot come first.
func (d *deletions) expect(key types.NamespacedName, uid types.UID) {
	if v, ok := d.m.Load(key); ok && v.(deletion).uid == uid {
		return // already expected, maybe seen
	}
	d.m.Store(key, deletion{uid: uid})
}

// observed records the provider informer's report that the copy uid of key
// was deleted; a copy release does not wait for is ignored.
func (d *deletions) observed(key types.NamespacedName, uid types.UID) {
	d.m.CompareAndSwap(key, deletion{uid: uid}, deletion{uid: uid, seen: true})
}

// seen reports whether the copy release waits for was reported deleted.
func (d *deletions) seen(key types.NamespacedName) bool {
	v, ok := d.m.Load(key)
	return ok && v.(deletion).seen
}

// forget drops key: its finalizer is released, the object is gone, or the
// Syncer applies a copy of it again.
func (d *deletions) forget(key types.NamespacedName) { d.m.Delete(key) }

// confirmAbsence decides whether a deleting consumer object whose provider
// copy the cache does not hold must ask the provider itself before its
// finalizer goes (SYNC-D): the cache may lag the provider (a copy applied a
// moment ago; a watch re-listing after an outage or a compaction), except
// when the informer reported the deletion of the copy kbind deleted.
func confirmAbsence(cached, hasFinalizer, deletionSeen bool) bool {
	return !cached && hasFinalizer && !deletionSeen
}
