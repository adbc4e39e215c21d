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

// Deletion in the engine goes through one door: this file, whose one type,
// the releaser, makes every deletion of a provider copy of a bound object,
// every deletion of a consumer instance (an imported copy) and every
// removal of the core.kbind.io/syncer finalizer (issue #51). The other
// files of the syncer decide — sync.go (deselected, deleting), move.go
// (DecideMove), doubt.go (lateCopy), importing.go (DecideImport),
// handover.go (DecideHandOver), registry.go (Drain) — and call it. Every
// other delete or finalizer removal in the engine (Leases, related copies,
// the renewed-token Secret, the cleanup finalizer, consumer CRDs, the
// autoBind ClusterBinding) is listed below with the read that justifies
// it, one row per call; TestOneDoorForDeletes (door_test.go) reads the
// engine with go/types and fails on any delete or finalizer removal that
// is neither in this file nor in the map, on a map row that no longer
// names a call, and on a docs/sync.md copy of the map that differs.
//
// Guards the paths share: a failed read is never taken as absence (the
// path waits and retries); kbind deletes only what its markers or its
// controller reference say is its; on the provider it deletes only the
// very object it read (a UID precondition), so one replaced meanwhile is
// never hit; an unreachable provider is waited for, never guessed.
//
//	BEGIN deletion map (TestOneDoorForDeletes holds engine/syncer/release.go and docs/sync.md equal to the code)
//
//	door (engine/syncer/release.go)       deletes / releases                  guarded by
//	------------------------------------  ----------------------------------  ----------------------------------------------
//	syncer.releaser.release               the syncer finalizer of a deleting  the finalizer goes only once the copy is gone:
//	                                      (or drained, deselected) object,    ownership markers (ownership.Ours: cluster and
//	                                      once its provider copy is gone;     object UID); the deletion policy (annotation,
//	                                      via deleteCopy the copy             else the binding's): Orphan keeps the copy
//	                                                                          with its markers, labelled core.kbind.io/kept:
//	                                                                          Orphan first (the backend reaper never deletes
//	                                                                          it; a sync removes the label), Foreground
//	                                                                          deletes in the foreground, a value naming no
//	                                                                          policy keeps both; under a live binding whose
//	                                                                          spec.deletionProtection is true
//	                                                                          (KeptByProtection) an object not deleting
//	                                                                          itself (deselected, drained out of spec.apis)
//	                                                                          keeps its owned copy whatever the policy:
//	                                                                          labelled core.kbind.io/kept:
//	                                                                          DeletionProtection and annotated
//	                                                                          core.kbind.io/kept-by first, markers kept
//	                                                                          (keepProtected), nothing deleted; a foreign or
//	                                                                          absent copy releases at once. Absence is the
//	                                                                          provider's own answer (releaseDeleted's
//	                                                                          confirmAbsence: a GET unless the informer
//	                                                                          reported that very copy (UID) deleted; a drain
//	                                                                          reads the provider itself); a failed read is
//	                                                                          an error, never absence. A deselected object
//	                                                                          only once its deselection persisted for the
//	                                                                          grace on claims computed after it was seen
//	                                                                          (DecideSelection); a move meanwhile wins.
//	                                                                          Never an object another route syncs
//	                                                                          (routedElsewhere: its core.kbind.io/connection
//	                                                                          names another Connection). No copy is deleted
//	                                                                          while another konnector may renew the Lease
//	                                                                          with this consumer's identity (deletesHeld:
//	                                                                          heartbeat.Judge not Alone, a restored clone):
//	                                                                          the object waits
//	syncer.releaser.deleteCopy            the owned provider copy of a        ownership Ours (release), UID precondition,
//	                                      deleting or drained object          background or foreground propagation; a
//	                                                                          refusal is reported, the finalizer stays; never
//	                                                                          while deletesHeld (release)
//	syncer.releaser.abandon               the syncer finalizer only (no       waits while the Connection exists (an
//	                                      session), provider copies left      unreachable provider is never guessed);
//	                                      behind                              releases once it is gone, an Event names the
//	                                                                          copies for the backend reaper; Orphan releases
//	                                                                          at once; never an object another route syncs
//	                                                                          (routedElsewhere)
//	syncer.releaser.releaseMoved          the copy this route made of an      ownership Ours and not terminating
//	                                      object another Connection's         (DecideMove); deleted only when the object's
//	                                      binding claims now                  annotation says Delete or it is itself
//	                                                                          Terminating under a deleting policy (its
//	                                                                          annotation, else the binding's
//	                                                                          spec.deletionPolicy), kept (markers replaced
//	                                                                          by core.kbind.io/moved) otherwise; UID
//	                                                                          precondition; the consumer object's finalizer
//	                                                                          is the new route's and never touched; nothing
//	                                                                          while deletesHeld
//	syncer.releaser.deleteLate            a provider copy a write in doubt    decided by Syncer.lateCopy (doubt.go): this
//	                                      created after its object was        cluster's and the released object's markers,
//	                                      released                            not terminating, within DoubtHorizon of a
//	                                                                          write in doubt, released under
//	                                                                          Delete/Foreground; UID precondition; a failed
//	                                                                          cache read deletes nothing; nothing while
//	                                                                          Session.Duplicate is not Alone
//	syncer.releaser.deleteVanished        the provider copy of a consumer     decided by decideVanished (vanished.go): the
//	                                      object that vanished with the       Syncer added the finalizer to that object (its
//	                                      finalizer kbind had just added      UID) less than HoldHorizon ago and never saw it
//	                                      (the API server's race,             being deleted nor released it; this cluster's
//	                                      kubernetes/kubernetes#77988)        and that object's markers, not kept, not
//	                                                                          terminating; its deletion policy Delete or
//	                                                                          Foreground (Orphan, or a value naming none,
//	                                                                          keeps it); UID precondition; a failed cache
//	                                                                          read deletes nothing; nothing while
//	                                                                          Session.Duplicate is not Alone
//	syncer.releaser.deleteImported        an imported consumer copy           this Connection's imported copy, not being
//	                                      (core.kbind.io/owner: provider)     deleted, UID precondition. Callers:
//	                                                                          Syncer.deleteImported (DecideImport: the
//	                                                                          provider's own answer (a GET) that its object
//	                                                                          is gone or going, again once the absence
//	                                                                          window (AbsenceLasted: a binding resync) has
//	                                                                          passed, one back meanwhile keeping its copy;
//	                                                                          or the binding's valid scope no longer imports
//	                                                                          it; an unscoped or failed read deletes
//	                                                                          nothing) and Registry.dropImported (a drain:
//	                                                                          objects in no namespace a live binding of the
//	                                                                          Connection claims, one whose filters do not
//	                                                                          parse included, read from the bindings
//	                                                                          whatever the Connection's state; claims that
//	                                                                          cannot be read delete nothing)
//	syncer.toProvider                     the syncer finalizer, in memory;    a release (hand-over to the provider) decided
//	                                      written by                          by DecideHandOver: the provider copy holds the
//	                                      releaser.handOverToProvider         object's spec and the import takes it back
//	                                                                          (the objectSelector selects the copy without
//	                                                                          kbind's markers); one Update conditional on
//	                                                                          the object's resourceVersion swaps the
//	                                                                          finalizer for the owner annotation
//
//	other deletes (elsewhere)             deletes / releases                  guarded by
//	------------------------------------  ----------------------------------  ----------------------------------------------
//	binding.Reconciler.finalize           the binding's cleanup finalizer     not held by spec.deletionProtection
//	                                                                          (holdDeletion; a Binding whose namespace is
//	                                                                          deleting is not held); drain (Registry.Drain:
//	                                                                          the releaser, above) and related Cleanup done
//	                                                                          first; ClusterBinding: unbindCRDs first
//	binding.Reconciler.unbindCRD          the consumer CRD of an API a        ClusterBinding only, after the drain; no other
//	                                      ClusterBinding unbinds (finalize,   binding lists the API; created by kbind for
//	                                      unbindRemoved)                      this Connection (CreatedByKbind), pullPolicy
//	                                                                          not All nor None, not already deleting
//	                                                                          (unbindDeletesCRD); UID
//	                                                                          precondition
//	binding.Reconciler.replaceCRD         kbind's consumer CRD of another     ClusterBinding only, its entry collides with
//	                                      provider API, so that a             it (schema.DecideReplace): created by kbind
//	                                      ClusterBinding's entry installs     (schema hash) for its Connection, whose
//	                                      its own at that name (SCHEMA-7)     pullPolicy is not All; no ClusterBinding and
//	                                                                          no live Binding lists it (cache, index); 0
//	                                                                          objects counted on the consumer API server (a
//	                                                                          failed count replaces nothing); UID and
//	                                                                          resourceVersion preconditions
//	schema.Installer.deleteRefused        kbind's consumer CRD whose names    schema.RefusedNeverServed: created by kbind
//	                                      the API server refused (SCHEMA-7)   (schema hash) for this Connection,
//	                                                                          NamesAccepted=False, never Established (no
//	                                                                          object ever stored), not deleting; UID and
//	                                                                          resourceVersion preconditions (one established
//	                                                                          since is never hit)
//	connection.Reconciler.deleteAutoBinding  the autoBind ClusterBinding, on     only one the Connection controls, and only
//	                                      Connection deletion                 when the Connection's deletion is not held
//	                                                                          (its protection, off, carried first; it then
//	                                                                          drains like any binding)
//	connection.Reconciler.teardown        the Connection's cleanup finalizer  not held by spec.deletionProtection; no
//	                                                                          binding references the Connection
//	connection.Reconciler.deleteRenewed   the renewed-token Secret            controlled by this Connection, UID
//	                                                                          precondition
//	connection.SecretReconciler.Reconcile  the kubeconfig Secret's cleanup     no Connection uses the Secret
//	                                      finalizer
//	session.Manager.Retire                the heartbeat Lease                 see heartbeat.Delete; a failure never blocks
//	                                      (heartbeat.Delete) when a           (the backend reaps it); kept while another
//	                                      Connection goes                     konnector renews it with this consumer's
//	                                                                          identity (Duplicate not Alone)
//	heartbeat.Delete                      the heartbeat Lease on the          held by this consumer (holderIdentity), UID
//	                                      provider                            and resourceVersion preconditions, read again
//	                                                                          on a conflict (a renewal landing late)
//	related.deleteCopy                    a related copy (Secret, ConfigMap)  the binding's related-binding marker, claims
//	                                      no entry wants any more, of a       of other entries, an unread source keeps its
//	                                      deleting binding (Cleanup), or an   copies, both sides read before a Cleanup (a
//	                                      immutable copy replaced             failed read is an error); UID and
//	                                                                          resourceVersion preconditions
//	patch.RemoveFinalizer                 (the helper: removes one finalizer  its callers are listed here or are the door
//	                                      by a patch)
//
//	END deletion map
//
// Outside the engine, the backend reaper (backend/reaper) deletes what a
// consumer cluster that stopped heartbeating left on the provider: its
// copies, related copies, namespaces and Leases, by their markers, with UID
// preconditions, never stripping finalizers — copies and related copies
// only once the reaper's mark on every one of them survived its grace
// period (Syncer.unmark and, on related copies, the related syncer's
// unmark remove the marks while this konnector syncs), never a copy labelled
// core.kbind.io/kept (releaser.keep); and kubectl kbind revoke
// (cli) deletes what grant made for a consumer.

package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
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
	// duplicate is the verdict on the Connection's heartbeat Lease
	// (session.Session.Duplicate); nil: Alone.
	duplicate func() heartbeat.Verdict
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
	// holds are the finalizers the Syncer added (vanished.go): a release
	// accounts for them. nil for a drain.
	holds *holds
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
	if routedElsewhere(cobj, r.target.Connection) {
		r.results.forget(r.target, client.ObjectKeyFromObject(cobj))
		return done, nil // another route's (release)
	}
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
	out, err := r.release(ctx, cobj, pobj, exists, policy.Deletion, policy.KeptBy)
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
// keptBy, when set, names the live binding whose deletion protection keeps
// the copies it stops syncing (KeptByProtection, BIND-5): an object that
// is not being deleted itself keeps its owned copy, marked kept
// (keepProtected), whatever its deletion policy says (decideRelease).
func (r *releaser) release(ctx context.Context, cobj, pobj *unstructured.Unstructured, exists bool, def kbindv1alpha1.DeletionPolicy, keptBy string) (outcome, error) {
	key := client.ObjectKeyFromObject(cobj)
	if !controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) || routedElsewhere(cobj, r.target.Connection) {
		// An object another route syncs (it moved there): its finalizer
		// and its copy are that route's, never released here.
		r.results.forget(r.target, key)
		return done, nil
	}
	policy, known := deletionPolicyOf(cobj.GetAnnotations(), def)
	owned := ownership.Classify(exists, annotationsOf(pobj), r.target.ClusterUID, string(cobj.GetUID())) == ownership.Ours
	step := decideRelease(owned, !cobj.GetDeletionTimestamp().IsZero(), policy, known, keptBy,
		owned && keptFor(pobj, keptBy), owned && pobj.GetLabels()[kbindv1alpha1.KeptLabel] == kbindv1alpha1.KeptOrphan)
	switch step {
	case stepUnknownPolicy:
		return r.unknownPolicy(cobj), nil
	case stepDelete:
		if r.deletesHeld(cobj) {
			return requeue, nil
		}
		return r.deleteCopy(ctx, cobj, pobj, policy)
	case stepKeepOrphan:
		// Orphan keeps the copy with its markers, and says so before the
		// finalizer goes: the backend reaper never deletes a kept copy,
		// even while a Lease of this consumer cluster goes stale.
		return r.keep(ctx, cobj, pobj)
	case stepKeepProtected:
		// Deletion protection keeps it the same way, naming the binding;
		// it deletes nothing, so it goes on while deletesHeld too.
		return r.keepProtected(ctx, cobj, pobj, def, keptBy)
	}
	if err := patch.RemoveFinalizer(ctx, r.consumer, cobj, kbindv1alpha1.SyncerFinalizer); err != nil {
		if apierrors.IsConflict(err) {
			return requeue, nil
		}
		return done, err
	}
	r.holds.held(key)
	log.FromContext(ctx).V(1).Info("Released the syncer finalizer", "copyExists", exists, "copyOwned", owned,
		"objectUID", string(cobj.GetUID()), "resourceVersion", cobj.GetResourceVersion())
	if !known || step == stepReleaseProtected {
		// Never guessed: a late copy is kept, as Orphan keeps a copy; and
		// a copy deletion protection kept is never deleted late.
		policy = kbindv1alpha1.DeletionPolicyOrphan
	}
	if step == stepReleaseProtected {
		r.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventCopiesKept, "Release",
			"no longer synced by %s, whose spec.deletionProtection is true: its provider copy %s %s (Connection %s) was kept, labelled %s=%s; "+
				"selecting the object again makes it its copy again, and kubectl kbind kept --delete deletes it on purpose",
			keptBy, r.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), r.target.Connection,
			kbindv1alpha1.KeptLabel, kbindv1alpha1.KeptDeletionProtection)
		log.FromContext(ctx).Info("Kept the provider copy of an object its protected binding no longer syncs", "keptBy", keptBy)
	}
	r.doubts.released(key, cobj.GetUID(), policy)
	r.deletions.forget(key)
	r.results.forget(r.target, key)
	return done, nil
}

// deletesHeld reports whether provider deletes wait because another live
// konnector may renew this Connection's heartbeat Lease with this
// consumer's identity (session.Session.Duplicate: a restored clone, whose
// markers say "ours" on copies production uses). Which of the two is
// production cannot be told from here, so neither deletes: a deleting
// object keeps its finalizer and waits, with a pending result and a
// Warning Event (once per message) saying why; it is looked at again with
// backoff, and deletes once the Lease has been quiet for the window
// (heartbeat.Judge). Orphan releases go on: they delete nothing.
func (r *releaser) deletesHeld(cobj *unstructured.Unstructured) bool {
	v := r.verdict()
	if v == heartbeat.Alone {
		return false
	}
	msg := fmt.Sprintf("deleting: the provider copy is kept and the object waits: another konnector renews the heartbeat Lease of Connection %s with this consumer cluster's identity (%s), "+
		"as a consumer cluster restored from an etcd snapshot of this one does; no provider copy is deleted until it has stopped (docs/troubleshooting.md#duplicate-consumer)",
		r.target.Connection, map[heartbeat.Verdict]string{heartbeat.Suspect: "one renewal seen", heartbeat.Duplicate: string(kbindv1alpha1.ReasonDuplicateConsumer)}[v])
	if r.results.set(r.target, client.ObjectKeyFromObject(cobj), Result{State: StatePending, Message: msg, Deleting: true}) {
		r.events.Eventf(cobj, nil, corev1.EventTypeWarning, string(kbindv1alpha1.ReasonDuplicateConsumer), "Delete", "%s", msg)
	}
	return true
}

// verdict is r.duplicate's, Alone without one.
func (r *releaser) verdict() heartbeat.Verdict {
	if r.duplicate == nil {
		return heartbeat.Alone
	}
	return r.duplicate()
}

// verdictOf is the verdict function of s (nil without a session).
func verdictOf(s *session.Session) func() heartbeat.Verdict {
	if s == nil {
		return nil
	}
	return s.Duplicate
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

// keep labels the owned provider copy pobj of an object released under
// Orphan core.kbind.io/kept: Orphan (exactly that copy: its UID in the
// patch), and requeues so the finalizer goes once the label is there. A
// refusal is reported and the finalizer stays.
func (r *releaser) keep(ctx context.Context, cobj, pobj *unstructured.Unstructured) (outcome, error) {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":    string(pobj.GetUID()),
		"labels": map[string]any{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptOrphan},
	}})
	if err != nil {
		return done, err
	}
	kept := pobj.DeepCopy()
	if err := r.session.Client.Patch(ctx, kept, client.RawPatch(types.MergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return requeue, nil // gone or replaced: read again
		}
		if refusal.IsForbidden(err) {
			_, ferr := r.failed(cobj, err, "patch", r.target.ProviderGVK.Kind+" "+client.ObjectKeyFromObject(pobj).String())
			return requeue, ferr
		}
		return done, fmt.Errorf("labelling the kept provider copy: %w", err)
	}
	log.FromContext(ctx).V(1).Info("Labelled the provider copy kept under Orphan", "label", kbindv1alpha1.KeptLabel)
	return r.release(ctx, cobj, kept, true, kbindv1alpha1.DeletionPolicyOrphan, "")
}

// keepProtected marks the owned provider copy pobj of an object that the
// live binding keptBy, whose spec.deletionProtection is true, stops
// syncing without the object being deleted (BIND-5): one merge patch with
// the copy's UID adds core.kbind.io/kept: DeletionProtection and the
// kept-by annotation, kbind's markers stay; then the finalizer goes
// (release). A refusal is reported and the finalizer stays.
func (r *releaser) keepProtected(ctx context.Context, cobj, pobj *unstructured.Unstructured, def kbindv1alpha1.DeletionPolicy, keptBy string) (outcome, error) {
	data, err := keepPatch(pobj, keptBy)
	if err != nil {
		return done, err
	}
	kept := pobj.DeepCopy()
	if err := r.session.Client.Patch(ctx, kept, client.RawPatch(types.MergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return requeue, nil // gone or replaced: read again
		}
		if refusal.IsForbidden(err) {
			_, ferr := r.failed(cobj, err, "patch", r.target.ProviderGVK.Kind+" "+client.ObjectKeyFromObject(pobj).String())
			return requeue, ferr
		}
		return done, fmt.Errorf("marking the provider copy kept by deletion protection: %w", err)
	}
	log.FromContext(ctx).V(1).Info("Marked the provider copy kept by deletion protection", "label", kbindv1alpha1.KeptLabel, "keptBy", keptBy)
	return r.release(ctx, cobj, kept, true, def, keptBy)
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
// objects still wait. An object another route syncs is that route's
// (routedElsewhere): skipped.
func (r *releaser) drain(ctx context.Context, objs []*unstructured.Unstructured, def kbindv1alpha1.DeletionPolicy, keptBy string) (int, error) {
	remaining := 0
	for _, obj := range objs {
		if routedElsewhere(obj, r.target.Connection) {
			continue
		}
		pobj, exists, err := r.providerCopy(ctx, client.ObjectKeyFromObject(obj))
		if err != nil {
			return 0, err
		}
		if _, err := r.release(ctx, obj, pobj, exists, def, keptBy); err != nil {
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
		if routedElsewhere(obj, r.target.Connection) {
			continue // another route's (drain)
		}
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

// routedElsewhere reports whether the consumer object cobj is synced
// through another Connection than conn: its core.kbind.io/connection
// annotation, which the route that holds the syncer finalizer writes with
// it (holdFinalizer) and the new route rewrites after a move, names
// another. Such an object's finalizer and copy are that route's
// (docs/shaping.md#filters): a route that no longer claims it — its
// binding drained, or its filters no longer selecting it — never releases
// it, or the other route's copy would be left with nothing to delete it.
// An object without the annotation (synced before it existed) is the
// route's that covers it, as before.
func routedElsewhere(cobj *unstructured.Unstructured, conn string) bool {
	route, annotated := cobj.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation]
	return annotated && route != conn
}

// confirmAbsence decides whether a deleting consumer object whose provider
// copy the cache does not hold must ask the provider itself before its
// finalizer goes (SYNC-D): the cache may lag the provider (a copy applied a
// moment ago; a watch re-listing after an outage or a compaction), except
// when the informer reported the deletion of the copy kbind deleted.
func confirmAbsence(cached, hasFinalizer, deletionSeen bool) bool {
	return !cached && hasFinalizer && !deletionSeen
}

// releaseMoved releases the copy this route made of cobj, which moved to
// Connection to (DecideMove; def is the spec.deletionPolicy of the binding
// that made the copy, which only a Terminating object follows). The
// consumer object's syncer finalizer is the new route's and is never
// touched here. An Event on the object says what became of the copy.
func (r *releaser) releaseMoved(ctx context.Context, cobj, pobj *unstructured.Unstructured, exists bool, to string, def kbindv1alpha1.DeletionPolicy) (outcome, error) {
	owned := ownership.Classify(exists, annotationsOf(pobj), r.target.ClusterUID, string(cobj.GetUID()))
	deleting := pobj != nil && !pobj.GetDeletionTimestamp().IsZero()
	action := DecideMove(owned, deleting, cobj.GetAnnotations(), def, !cobj.GetDeletionTimestamp().IsZero())
	if action == MoveNothing {
		return done, nil
	}
	if r.deletesHeld(cobj) {
		// Deleting the old copy or replacing its markers both change
		// what may be another consumer's copy.
		return requeue, nil
	}
	where := fmt.Sprintf("%s %s on the provider of Connection %q", r.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), r.target.Connection)
	switch action {
	case MoveDelete:
		uid := pobj.GetUID()
		if err := r.session.Client.Delete(ctx, pobj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			if refusal.IsForbidden(err) {
				return r.failed(cobj, err, "delete", where)
			}
			return done, fmt.Errorf("deleting the copy a moved object left, %s: %w", where, err)
		}
		r.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventMoved, "Move",
			"moved to Connection %q: its copy %s was deleted", to, where)
	default:
		if err := r.keepMoved(ctx, cobj, pobj, to); err != nil {
			if apierrors.IsConflict(err) {
				return requeue, nil
			}
			if refusal.IsForbidden(err) {
				return r.failed(cobj, err, "patch", where)
			}
			return done, fmt.Errorf("releasing the copy a moved object left, %s: %w", where, err)
		}
		r.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventMoved, "Move",
			"moved to Connection %q: its copy %s was kept, no longer synced and no longer kbind's (annotation %s); "+
				"annotate the object %s=%s to delete the old copy on a move", to, where, kbindv1alpha1.MovedAnnotation,
			kbindv1alpha1.DeletionPolicyAnnotation, kbindv1alpha1.DeletionPolicyDelete)
	}
	log.FromContext(ctx).Info("Released the copy of an object that moved to another provider", "to", to, "action", string(action))
	return done, nil
}

// keepMoved replaces kbind's markers on pobj — the copy kbind read — by
// the moved annotation, conditional on that very copy (resourceVersion):
// it stays on the provider, no longer kbind's, so that no sync, drain or
// reaper touches it again.
func (r *releaser) keepMoved(ctx context.Context, cobj, pobj *unstructured.Unstructured, to string) error {
	base := client.MergeFromWithOptions(pobj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	unmark(pobj)
	ann := pobj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[kbindv1alpha1.MovedAnnotation] = fmt.Sprintf("to Connection %s: consumer object %s (UID %s) of consumer cluster %s",
		to, client.ObjectKeyFromObject(cobj), cobj.GetUID(), r.target.ClusterUID)
	pobj.SetAnnotations(ann)
	err := r.session.Client.Patch(ctx, pobj, base)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// releaseMovedAll releases, for a drain, the copies this route made of
// objects another Connection's binding claims now (to: by object key),
// each read from the provider itself; def is the draining binding's
// spec.deletionPolicy (DecideMove: for Terminating objects only).
func (r *releaser) releaseMovedAll(ctx context.Context, objs []*unstructured.Unstructured, to map[client.ObjectKey]string, def kbindv1alpha1.DeletionPolicy) error {
	for _, obj := range objs {
		key := client.ObjectKeyFromObject(obj)
		pobj, exists, err := r.providerCopy(ctx, key)
		if err != nil {
			return err
		}
		if _, err := r.releaseMoved(ctx, obj, pobj, exists, to[key], def); err != nil {
			return err
		}
	}
	return nil
}

// deleteLate deletes pobj, a provider copy that a write in doubt created
// after its consumer object was released (doubt.go decides: this
// cluster's and that released object's markers, not terminating, within
// DoubtHorizon of the write): exactly that copy (UID precondition), under
// the policy its object was released with.
func (r *releaser) deleteLate(ctx context.Context, pobj *unstructured.Unstructured, policy kbindv1alpha1.DeletionPolicy) error {
	if v := r.verdict(); v != heartbeat.Alone {
		return fmt.Errorf("not deleting the provider copy %s that a write in doubt created after its consumer object was released: another konnector renews this Connection's heartbeat Lease with this consumer cluster's identity (%s)",
			client.ObjectKeyFromObject(pobj), v)
	}
	uid := pobj.GetUID()
	if err := r.session.Client.Delete(ctx, pobj, client.Preconditions{UID: &uid}, client.PropagationPolicy(propagationOf(policy))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the provider copy %s that a write in doubt created after its consumer object was released: %w",
			client.ObjectKeyFromObject(pobj), err)
	}
	log.FromContext(ctx).Info("Deleted a provider copy that a write in doubt created after its consumer object was released",
		"copy", client.ObjectKeyFromObject(pobj).String(), "objectUID", pobj.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation], "deletionPolicy", policy)
	return nil
}

// deleteVanished deletes pobj, the provider copy of a consumer object that
// vanished with the finalizer the Syncer had just added (vanished.go
// decides: this cluster's and that object's markers, not kept, not
// terminating, within HoldHorizon of the finalizer, under a deleting
// policy): exactly that copy (UID precondition), under the object's
// policy; nothing while another konnector may renew the Lease with this
// consumer's identity.
func (r *releaser) deleteVanished(ctx context.Context, pobj *unstructured.Unstructured, policy kbindv1alpha1.DeletionPolicy) error {
	if v := r.verdict(); v != heartbeat.Alone {
		return fmt.Errorf("not deleting the provider copy %s of a consumer object that vanished with kbind's finalizer on it: another konnector renews this Connection's heartbeat Lease with this consumer cluster's identity (%s)",
			client.ObjectKeyFromObject(pobj), v)
	}
	uid := pobj.GetUID()
	if err := r.session.Client.Delete(ctx, pobj, client.Preconditions{UID: &uid}, client.PropagationPolicy(propagationOf(policy))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the provider copy %s of a consumer object that vanished with kbind's finalizer on it: %w",
			client.ObjectKeyFromObject(pobj), err)
	}
	log.FromContext(ctx).Info("Deleted the provider copy of a consumer object that vanished with kbind's finalizer on it (the API server's race between a DELETE and the finalizer, kubernetes/kubernetes#77988)",
		"copy", client.ObjectKeyFromObject(pobj).String(), "objectUID", pobj.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation], "deletionPolicy", policy)
	return nil
}

// deleteImported deletes cobj, an imported copy (core.kbind.io/owner:
// provider) of Connection connection, exactly that object (UID
// precondition): its provider object is gone (confirmed by the provider
// itself), the binding no longer imports it, or a drain of the binding
// that imported it. Anything else — a user's object, another
// Connection's copy, one being deleted — is never deleted here; deleted
// reports whether this call deleted it (false: already gone).
func (r *releaser) deleteImported(ctx context.Context, cobj *unstructured.Unstructured, connection string) (deleted bool, err error) {
	if !isImported(cobj) || cobj.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation] != connection || !cobj.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	uid := cobj.GetUID()
	if err := r.consumer.Delete(ctx, cobj, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("deleting imported object %s: %w", client.ObjectKeyFromObject(cobj), err)
	}
	return true, nil
}

// handOverToProvider makes the consumer-owned cobj the provider's (a
// release, docs/import.md#hand-over, step 1): in one write conditional on
// that very object (its resourceVersion), the syncer finalizer and the
// request go and the owner annotation comes (toProvider). handover.go
// decides when (DecideHandOver: the provider copy holds its spec, the
// import takes it back).
func (r *releaser) handOverToProvider(ctx context.Context, cobj *unstructured.Unstructured) error {
	if err := r.consumer.Update(ctx, toProvider(cobj, r.target.Connection)); err != nil {
		return err
	}
	r.holds.held(client.ObjectKeyFromObject(cobj))
	return nil
}

// toProvider is the consumer-owned cobj made the provider's: the syncer
// finalizer and the request go, the owner annotation comes (with no
// provider resourceVersion yet: the next sync writes the provider's spec
// over it, without calling that an edit) — one write.
func toProvider(cobj *unstructured.Unstructured, connection string) *unstructured.Unstructured {
	u := cobj.DeepCopy()
	ann := u.GetAnnotations()
	delete(ann, kbindv1alpha1.HandOverAnnotation)
	delete(ann, kbindv1alpha1.ConflictAnnotation)
	ann[kbindv1alpha1.OwnerAnnotation] = kbindv1alpha1.OwnerProvider
	ann[kbindv1alpha1.ConnectionAnnotation] = connection
	ann[ProviderResourceVersionAnnotation] = ""
	u.SetAnnotations(ann)
	controllerutil.RemoveFinalizer(u, kbindv1alpha1.SyncerFinalizer)
	return u
}
