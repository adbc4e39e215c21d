// Deletion in the engine: this file owns every deletion of a provider copy
// of a bound object and every release of the syncer finalizer; the list
// below maps every other place in the engine that deletes an object or
// releases a finalizer, with what guards it. A change to any of them
// starts here.
//
// Guards the paths share: a failed read is never taken as absence (the
// path waits and retries); kbind deletes only what its markers or its
// controller reference say is its; on the provider it deletes only the
// very object it read (a UID precondition), so one replaced meanwhile is
// never hit; an unreachable provider is waited for, never guessed.
//
//	path                           file                        deletes / releases              guarded by
//	-----------------------------  --------------------------  ------------------------------  ---------------------------------------------
//	releaser.release               syncer/release.go           the provider copy of a          ownership markers (ownership.Ours: cluster
//	  (a deleting object, from                                 consumer object; then the       and object UID), UID precondition; the
//	  sync's releaseDeleting)                                  syncer finalizer on it          finalizer goes only once the copy is gone;
//	                                                                                           the deletion policy (annotation, else the
//	                                                                                           binding's): Orphan keeps the copy,
//	                                                                                           Foreground deletes in the foreground, a
//	                                                                                           value naming no policy keeps both; a
//	                                                                                           foreign or absent copy releases at once
//	releaser.releaseDeleted        syncer/release.go           (decides, then release)         cache lag: a copy absent from the session
//	  confirmAbsence, deletions                                                                cache is confirmed absent by a provider GET,
//	                                                                                           unless the informer reported that very copy
//	                                                                                           (UID) deleted
//	  also for an object the       syncer/sync.go (readConsumer as release, for an object that   the filters are applied to what the cache
//	  binding's filters no longer    sets deselected)          still holds the finalizer       holds; a failed read of the namespace's
//	  select (docs/shaping.md)                                                                 labels is an error, never "not selected";
//	                                                                                           a selector that does not parse gives no
//	                                                                                           scope at all (nothing released)
//	Syncer.reapLate, deleteLate    syncer/doubt.go             a provider copy a write in      ownership markers (this cluster and the
//	  (a gone, deselected or                                   doubt created after its         released object's UID), not terminating,
//	  replaced object's late copy)                             object was released             UID precondition; only after a release
//	                                                                                           under Delete/Foreground of an object
//	                                                                                           whose write was in doubt (DoubtHorizon);
//	                                                                                           a failed cache read deletes nothing
//	releaser.releaseOrphaned       syncer/release.go           (Orphan policy) the related     runs before the finalizer goes; related
//	  -> related ReleaseOrphaned   related/reference.go        copies' owner markers (patch,   copies selected by owner label (and the
//	                                                           nothing deleted)                consumer-cluster label on the provider)
//	releaser.drain                 syncer/release.go,          as release, for the objects a   only objects no live binding covers; the
//	  (Registry.Drain)             syncer/registry.go          deleting binding (or an API     provider copy read from the provider itself
//	                                                           removed from it) covered        (no cache), never a failed read as absence
//	releaser.abandon               syncer/release.go           the syncer finalizer only,      with no session: waits while the Connection
//	  (Registry.Drain, no session)                             provider copies left behind     exists; releases once it is gone (Event names
//	                                                                                           the copies for the backend reaper); Orphan
//	                                                                                           releases at once
//	binding finalize               binding/reconciler.go       the binding's cleanup           drain (above) and related Cleanup done first;
//	                                                           finalizer; via unbindCRD the    unbindCRD: ClusterBinding only, no other
//	                                                           consumer CRD                    binding lists the API, created by kbind for
//	                                                                                           this Connection, pullPolicy not All, UID
//	                                                                                           precondition
//	binding unbindRemoved          binding/reconciler.go       an API removed from a binding:  same as finalize, per API; the API stays in
//	                                                           drain, then unbindCRD           status.boundAPIs until drained
//	binding replaceCRD             binding/reconciler.go       kbind's consumer CRD of         ClusterBinding only, its entry collides with
//	  (replaceCollided)                                        another provider API, so that   it (schema.DecideReplace): created by kbind
//	                                                           a ClusterBinding's entry        (schema hash) for its Connection, whose
//	                                                           installs its own at that        pullPolicy is not All; no ClusterBinding and
//	                                                           name (SCHEMA-7)                 no live Binding lists it (cache, index);
//	                                                                                           0 objects counted on the consumer API server
//	                                                                                           (a failed count replaces nothing); UID and
//	                                                                                           resourceVersion preconditions
//	Installer.deleteRefused        schema/installer.go         kbind's consumer CRD whose      schema.RefusedNeverServed: created by kbind
//	  (schema, Installer.ensure)                               names the API server refused    (schema hash) for this Connection,
//	                                                           (SCHEMA-7)                      NamesAccepted=False, never Established (no
//	                                                                                           object ever stored), not deleting; UID and
//	                                                                                           resourceVersion preconditions (one
//	                                                                                           established since is never hit)
//	connection deletionPath        connection/reconciler.go    the autoBind ClusterBinding     only one the Connection controls (it then
//	  (deleteAutoBinding)                                                                      drains like any binding)
//	connection reconcileAutoBind   connection/reconciler.go    the autoBind ClusterBinding     controlled by the Connection, nothing exported
//	connection teardown            connection/reconciler.go    the Connection's cleanup        no binding references the Connection
//	                                                           finalizer
//	connection deleteLease         connection/reconciler.go,   the heartbeat Lease on the      held by this consumer (holderIdentity), UID
//	  -> heartbeat.Delete          heartbeat/heartbeat.go      provider                        and resourceVersion preconditions, read again
//	                                                                                           on a conflict (a renewal landing late); a
//	                                                                                           failure never blocks (the backend reaps it)
//	connection deleteRenewed       connection/credentials.go   the renewed-token Secret        controlled by this Connection, UID precondition
//	SecretReconciler               connection/secrets.go       the kubeconfig Secret's         no Connection uses the Secret
//	                                                           cleanup finalizer
//	related Cleanup                related/related.go          every related copy of a         both sides read (a failed read is an error);
//	  (binding finalize)                                       deleting binding                deleteCopy: UID and resourceVersion
//	                                                                                           preconditions
//	related collect, apply         related/related.go          related copies no entry wants   the binding's related-binding marker, claims
//	  (deleteCopy)                                             any more; an immutable copy     of other entries, an unread source keeps its
//	                                                           replaced                        copies; UID and resourceVersion preconditions
//	related Abandon                related/related.go          nothing (the Connection is      an Event names the copies left for the
//	                                                           gone)                           backend reaper
//
// Outside the engine, the backend reaper (backend/reaper) deletes what a
// consumer cluster that stopped heartbeating left on the provider: its
// copies, related copies, namespaces and Leases, by their markers, with UID
// preconditions, never stripping finalizers.

package syncer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/ownership"
	"github.com/kbind/kbind/engine/session"
)

// releaser owns the deletion of the provider copies of one API's consumer
// objects and the release of their syncer finalizer (SYNC-D): for a
// deleting object (the Syncer's releaseDeleting phase) and for the objects
// a deleting binding leaves (Registry.Drain). A Syncer has one for its
// lifetime; a drain builds its own from the same parts.
type releaser struct {
	reporter
	consumer client.Client
	// session is the provider session; nil for a drain without one (it
	// can only abandon).
	session *session.Session
	// orphaned, when set, releases the related copies of an object deleted
	// with the Orphan policy before its finalizer goes.
	orphaned ReleaseOrphanedFunc
	// deletions are the provider copies release waits for, and whether the
	// provider informer reported them deleted.
	deletions deletions
	// doubts are the Syncer's writes in doubt (doubt.go): a release records
	// the policy a late copy of the object is deleted under. nil for a
	// drain.
	doubts *doubts
}

// forget drops what the releaser remembers of a consumer object: it is
// gone, or a copy of it is applied again (not the one a deletion waited
// for).
func (r *releaser) forget(key types.NamespacedName) { r.deletions.forget(key) }

// copyDeleted records the provider informer's report that the copy uid of
// the consumer object key was deleted.
func (r *releaser) copyDeleted(key types.NamespacedName, uid types.UID) {
	r.deletions.observed(key, uid)
}

// releaseDeleted releases a deleting consumer object, given its provider
// copy as the session cache holds it (cached false: absent there). The
// related copies of an Orphan object are released first. A copy absent
// from the cache is looked up on the provider itself unless the informer
// reported it deleted (confirmAbsence); one found there that way is looked
// at again (requeue), for its deletion may come without an event.
func (r *releaser) releaseDeleted(ctx context.Context, cobj *unstructured.Unstructured, policy Policy, pobj *unstructured.Unstructured, cached bool) (outcome, error) {
	if out, err := r.releaseOrphaned(ctx, cobj, policy); err != nil || out != next {
		return out, err
	}
	exists := cached
	key := client.ObjectKeyFromObject(cobj)
	if confirmAbsence(cached, controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer), r.deletions.seen(key)) {
		// SYNC-D: the cache may lag the provider (a copy applied a moment
		// ago; a watch re-listing after an outage or a compaction): the
		// finalizer goes only once the provider itself has no copy.
		var err error
		if pobj, exists, err = r.providerCopy(ctx, key); err != nil {
			return done, err
		}
	}
	out, err := r.release(ctx, cobj, pobj, exists, policy.Deletion)
	if err == nil && exists && !cached {
		// A copy the cache has not seen may go without an event: look again.
		return requeue, nil
	}
	return out, err
}

// release handles a deleting consumer object, or (drain) one leaving
// scope: the owned provider copy is deleted and the finalizer released only
// once it is gone (SYNC-D), under the object's deletion policy
// (deletionPolicyOf, its binding's default def). Orphan releases at once
// and keeps the copy; a foreign or absent copy releases; an annotation
// that names no policy keeps the copy and the object until it is fixed.
func (r *releaser) release(ctx context.Context, cobj, pobj *unstructured.Unstructured, exists bool, def kbindv1alpha1.DeletionPolicy) (outcome, error) {
	key := client.ObjectKeyFromObject(cobj)
	if !controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) {
		r.results.forget(r.target, key)
		return done, nil
	}
	policy, known := deletionPolicyOf(cobj.GetAnnotations(), def)
	owned := ownership.Classify(exists, annotationsOf(pobj), r.target.ClusterUID, string(cobj.GetUID())) == ownership.Ours
	switch {
	case owned && !known:
		return r.unknownPolicy(cobj), nil
	case owned && policy != kbindv1alpha1.DeletionPolicyOrphan:
		return r.deleteCopy(ctx, cobj, pobj, policy)
	}
	if err := patch.RemoveFinalizer(ctx, r.consumer, cobj, kbindv1alpha1.SyncerFinalizer); err != nil {
		if apierrors.IsConflict(err) {
			return requeue, nil
		}
		return done, err
	}
	if !known {
		// Never guessed: a late copy is kept, as Orphan keeps a copy.
		policy = kbindv1alpha1.DeletionPolicyOrphan
	}
	r.doubts.released(key, cobj.GetUID(), policy)
	r.deletions.forget(key)
	r.results.forget(r.target, key)
	return done, nil
}

// deleteCopy deletes the owned provider copy pobj of the consumer object
// cobj, exactly that copy (UID precondition) — with foreground propagation
// under the Foreground policy, background otherwise — and keeps the
// finalizer until the copy is gone; provider finalizers hold it longer,
// and the object says which (waitingForCopy). A provider refusal is
// reported like any other.
func (r *releaser) deleteCopy(ctx context.Context, cobj, pobj *unstructured.Unstructured, policy kbindv1alpha1.DeletionPolicy) (outcome, error) {
	key := client.ObjectKeyFromObject(cobj)
	// Before the DELETE, so that the informer's report cannot come first.
	r.deletions.expect(key, pobj.GetUID())
	if !pobj.GetDeletionTimestamp().IsZero() {
		return r.waitingForCopy(ctx, cobj, pobj), nil
	}
	uid := pobj.GetUID()
	if err := r.session.Client.Delete(ctx, pobj, client.Preconditions{UID: &uid}, client.PropagationPolicy(propagationOf(policy))); err != nil && !apierrors.IsNotFound(err) {
		if refusal.IsForbidden(err) {
			_, ferr := r.failed(cobj, err, "delete", r.target.ProviderGVK.Kind+" "+client.ObjectKeyFromObject(pobj).String())
			return requeue, ferr
		}
		return done, fmt.Errorf("deleting the provider copy: %w", err)
	}
	log.FromContext(ctx).V(1).Info("Deleted the provider copy; waiting for it to be gone", "propagation", propagationOf(policy))
	r.results.set(r.target, key, Result{State: StatePending, Deleting: true})
	return done, nil
}

// propagationOf is the propagation policy kbind deletes a provider copy
// with under deletion policy p: Foreground asks the provider's garbage
// collector to delete the copy's blocking dependents first; everything
// else is background, as the API server does for a custom resource by
// default.
func propagationOf(p kbindv1alpha1.DeletionPolicy) metav1.DeletionPropagation {
	if p == kbindv1alpha1.DeletionPolicyForeground {
		return metav1.DeletePropagationForeground
	}
	return metav1.DeletePropagationBackground
}

// deletionPolicyOf is the deletion policy in effect for a consumer object
// with annotations, whose binding's default is def (docs/sync.md#deletion):
// the core.kbind.io/deletion-policy annotation wins when it is set, then
// def, then Delete. known is false when the annotation names no policy (a
// typo such as "orphan"): the caller keeps the copy, for a typo must never
// destroy what the user meant to keep.
func deletionPolicyOf(annotations map[string]string, def kbindv1alpha1.DeletionPolicy) (policy kbindv1alpha1.DeletionPolicy, known bool) {
	v, set := annotations[kbindv1alpha1.DeletionPolicyAnnotation]
	switch {
	case !set && def == "":
		return kbindv1alpha1.DeletionPolicyDelete, true
	case !set:
		v = string(def)
	}
	switch p := kbindv1alpha1.DeletionPolicy(v); p {
	case kbindv1alpha1.DeletionPolicyDelete, kbindv1alpha1.DeletionPolicyOrphan, kbindv1alpha1.DeletionPolicyForeground:
		return p, true
	default:
		return p, false
	}
}

// unknownPolicy keeps a deleting object whose deletion-policy annotation
// names no policy, and its provider copy, with a failed result and a
// Warning Event saying what to fix; the object is looked at again when
// the annotation changes.
func (r *releaser) unknownPolicy(cobj *unstructured.Unstructured) outcome {
	msg := fmt.Sprintf("the annotation %s=%q names no deletion policy (Delete, Orphan or Foreground): the provider copy is kept and the object waits; set the annotation to one of them, or remove it for the binding's spec.deletionPolicy",
		kbindv1alpha1.DeletionPolicyAnnotation, cobj.GetAnnotations()[kbindv1alpha1.DeletionPolicyAnnotation])
	if r.results.set(r.target, client.ObjectKeyFromObject(cobj), Result{State: StateFailed, Message: msg}) {
		r.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventInvalidDeletionPolicy, "Delete", "%s", msg)
	}
	return done
}

// waitingForCopy reports a deleting object whose provider copy is being
// deleted and still exists: the finalizers on the copy keep it (under
// Foreground, foregroundDeletion until the provider's garbage collector
// has deleted the copy's dependents that block owner deletion). Each new
// set of finalizers is said once, by a Normal Event and the object's
// best-effort Synced=False condition (reason ProviderCopyDeleting); the
// copy's deletion (an informer event) brings the object back.
func (r *releaser) waitingForCopy(ctx context.Context, cobj, pobj *unstructured.Unstructured) outcome {
	msg := waitingMessage(r.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj).String(), r.target.Connection, pobj.GetFinalizers())
	if r.results.set(r.target, client.ObjectKeyFromObject(cobj), Result{State: StatePending, Message: msg, Deleting: true}) && len(pobj.GetFinalizers()) > 0 {
		r.events.Eventf(cobj, nil, corev1.EventTypeNormal, string(kbindv1alpha1.ReasonProviderCopyDeleting), "Delete", "%s", msg)
		writeSyncedCondition(ctx, r.consumer, cobj, metav1.ConditionFalse, kbindv1alpha1.ReasonProviderCopyDeleting, msg)
	}
	return done
}

// waitingMessage says why a deleting object waits for its provider copy
// (kind key on the provider of Connection conn), naming the copy's
// finalizers.
func waitingMessage(kind, key, conn string, finalizers []string) string {
	if len(finalizers) == 0 {
		return fmt.Sprintf("deleting: waiting for the provider copy %s %s (Connection %s) to be gone", kind, key, conn)
	}
	msg := fmt.Sprintf("deleting: the provider copy %s %s (Connection %s) is being deleted and its finalizers keep it: %s",
		kind, key, conn, strings.Join(finalizers, ", "))
	if slices.Contains(finalizers, metav1.FinalizerDeleteDependents) {
		msg += " (" + metav1.FinalizerDeleteDependents + ": the provider's garbage collector deletes the copy's dependents whose ownerReferences set blockOwnerDeletion first; other dependents do not hold it)"
	}
	return msg
}

// releaseOrphaned lets the related copier release the related copies of an
// object deleted with the Orphan policy before its finalizer goes (they
// stay, no longer kbind's): next once it is done (or there is nothing to
// release), requeue while it must wait.
func (r *releaser) releaseOrphaned(ctx context.Context, cobj *unstructured.Unstructured, policy Policy) (outcome, error) {
	if deletion, _ := deletionPolicyOf(cobj.GetAnnotations(), policy.Deletion); r.orphaned == nil || len(policy.References) == 0 ||
		deletion != kbindv1alpha1.DeletionPolicyOrphan ||
		!controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) {
		return next, nil
	}
	released, err := r.orphaned(ctx, r.session, r.target, cobj)
	switch {
	case err != nil:
		return done, fmt.Errorf("releasing the related copies of an orphaned object: %w", err)
	case !released:
		return requeue, nil
	default:
		return next, nil
	}
}

// providerCopy reads, from the provider directly (a drain runs without
// the Syncer's informers), the copy of the consumer object key at its
// mapped provider key. An object that cannot be placed under the
// isolation has no copy.
func (r *releaser) providerCopy(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, bool, error) {
	pkey, err := r.target.Isolation.Object(key)
	if err != nil {
		return nil, false, nil
	}
	pobj := r.newProviderObject()
	if err := r.session.Client.Get(ctx, pkey, pobj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		// Never taken as absence: the drain waits and retries.
		return nil, false, fmt.Errorf("reading the provider copy %s of %s: %w", pkey, key, err)
	}
	return pobj, true, nil
}

// leftScope returns the objects a drain releases: those that still hold
// the syncer finalizer and that no live binding of scope covers any more.
func leftScope(objs []unstructured.Unstructured, scope Scope) []*unstructured.Unstructured {
	return holdingFinalizer(uncoveredBy(objs, scope))
}

// uncoveredBy returns the objects of objs in namespaces scope does not
// cover.
func uncoveredBy(objs []unstructured.Unstructured, scope Scope) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := range objs {
		if _, covered := scope.covers(objs[i].GetNamespace()); !covered {
			out = append(out, &objs[i])
		}
	}
	return out
}

// holdingFinalizer returns the objects of objs that hold the syncer
// finalizer.
func holdingFinalizer(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if controllerutil.ContainsFinalizer(obj, kbindv1alpha1.SyncerFinalizer) {
			out = append(out, obj)
		}
	}
	return out
}

// drain releases objs (see leftScope) as their deletion would: each owned
// provider copy, read from the provider itself, is deleted and the
// finalizer released once it is gone (SYNC-D). It returns how many
// objects still wait.
func (r *releaser) drain(ctx context.Context, objs []*unstructured.Unstructured, def kbindv1alpha1.DeletionPolicy) (int, error) {
	remaining := 0
	for _, obj := range objs {
		pobj, exists, err := r.providerCopy(ctx, client.ObjectKeyFromObject(obj))
		if err != nil {
			return 0, err
		}
		if _, err := r.release(ctx, obj, pobj, exists, def); err != nil {
			return 0, err
		}
		if controllerutil.ContainsFinalizer(obj, kbindv1alpha1.SyncerFinalizer) {
			remaining++
		}
	}
	return remaining, nil
}

// abandon is the drain of objs without a provider session. While the
// Connection exists (connGone false) the provider is unreachable: the
// objects wait, never guessed about. Once it is gone they are released
// and their provider copies left behind (abandoned names them, for an
// Event: the backend reaper deletes them). An object deleted with the
// Orphan policy keeps its copy anyway: it is released at once, the
// escape hatch for a provider gone for good.
func (r *releaser) abandon(ctx context.Context, objs []*unstructured.Unstructured, connGone bool, def kbindv1alpha1.DeletionPolicy) (remaining int, abandoned []string, err error) {
	for _, obj := range objs {
		policy, _ := deletionPolicyOf(obj.GetAnnotations(), def)
		orphan := policy == kbindv1alpha1.DeletionPolicyOrphan
		if !connGone && !orphan {
			remaining++
			continue
		}
		if !orphan {
			abandoned = append(abandoned, client.ObjectKeyFromObject(obj).String())
		}
		if err := patch.RemoveFinalizer(ctx, r.consumer, obj, kbindv1alpha1.SyncerFinalizer); err != nil {
			return 0, nil, err
		}
	}
	return remaining, abandoned, nil
}

// confirmAbsence decides whether a deleting consumer object whose provider
// copy the cache does not hold must ask the provider itself before its
// finalizer goes (SYNC-D): the cache may lag the provider (a copy applied a
// moment ago; a watch re-listing after an outage or a compaction), except
// when the informer reported the deletion of the copy kbind deleted.
func confirmAbsence(cached, hasFinalizer, deletionSeen bool) bool {
	return !cached && hasFinalizer && !deletionSeen
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

// deletion is the copy (uid) a release waits for, and whether the provider
// informer reported it deleted.
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
