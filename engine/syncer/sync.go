package syncer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/internal/namespace"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/internal/storage"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/ownership"
)

// Event reasons on consumer objects (beyond the condition reasons).
const (
	eventProviderRejected = "ProviderRejected"
	eventSynced           = "Synced"
)

// sync reconciles one consumer object with its provider copy; seen are
// when the changes it handles were observed (the writes it makes observe
// their end-to-end latency). It returns requeue=true to retry with backoff
// without logging an error.
func (s *Syncer) sync(ctx context.Context, key types.NamespacedName, seen *changes) (bool, error) {
	cobj := s.newObject()
	if err := s.ccache.Get(ctx, key, cobj); err != nil {
		if apierrors.IsNotFound(err) {
			s.results.forget(s.target, key)
			s.deletions.forget(key)
			return false, nil
		}
		return false, fmt.Errorf("reading consumer object: %w", err)
	}
	policy, inScope := s.currentScope().covers(key.Namespace)
	if !inScope {
		s.results.forget(s.target, key)
		return false, nil
	}
	pkey, err := s.target.Isolation.Object(key)
	if err != nil {
		// Never written somewhere surprising: the binding says the same.
		s.unplaceable(cobj, err)
		return false, nil
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	if err != nil {
		return false, err
	}
	if !cobj.GetDeletionTimestamp().IsZero() {
		if done, err := s.releaseOrphaned(ctx, cobj, policy); err != nil || !done {
			return !done && err == nil, err
		}
		cached := exists
		if confirmAbsence(exists, controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer), s.deletions.seen(key)) {
			// SYNC-D: the cache may lag the provider (a copy applied a
			// moment ago; a watch re-listing after an outage or a
			// compaction): the finalizer goes only once the provider
			// itself has no copy.
			if pobj, exists, err = s.providerCopy(ctx, key); err != nil {
				return false, err
			}
		}
		requeue, err := s.release(ctx, cobj, pobj, exists)
		// A copy the cache has not seen may go without an event: look again.
		return requeue || (exists && !cached && err == nil), err
	}
	if !controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) {
		// Before the first provider write (SYNC-D); the update event brings
		// the object back.
		if err := patch.AddFinalizer(ctx, s.consumer, cobj, kbindv1alpha1.SyncerFinalizer); err != nil {
			if isConflictOrGone(err) {
				return true, nil
			}
			return false, err
		}
		// Go on with the patched object: no round trip through the informer
		// before the first provider write.
	}

	if exists && !pobj.GetDeletionTimestamp().IsZero() {
		// SYNC-5: a terminating copy is waited for, not raced; its deletion
		// event brings the object back.
		s.results.set(s.target, key, Result{State: StatePending})
		return false, nil
	}
	verdict := ownership.Decide(ownership.Classify(exists, annotationsOf(pobj), s.target.ClusterUID, string(cobj.GetUID())), policy.Conflict)
	if !verdict.Write {
		return false, s.reportConflict(ctx, cobj, verdict.Conflict, "")
	}

	if s.target.Namespaced && s.target.Isolation.CreatesNamespaces() {
		// A missing provider namespace is created, marked as kbind's (SYNC-3).
		conflict, err := s.ensureNamespace(ctx, key.Namespace, pkey.Namespace)
		if err != nil {
			return s.failed(cobj, err, "create", "namespaces/"+pkey.Namespace)
		}
		if conflict != "" {
			return false, s.reportConflict(ctx, cobj, conflict, namespaceConflictMessage(pkey.Namespace, conflict))
		}
	}
	desired := s.desiredCopy(cobj, pkey, policy)
	if !exists || !upToDate(pobj, desired) {
		// The digest only now: most reconciles find the copy up to date.
		digest := digestOf(desired)
		if last, ok := s.applied.Load(key); ok && last == digest {
			if !exists {
				// Applied a moment ago; the provider informer has not
				// reported it yet. Its event brings the object back.
				s.results.set(s.target, key, Result{State: StatePending})
				return false, nil
			}
		} else {
			applied, requeue, err := s.apply(ctx, cobj, desired, pkey, exists, seen)
			if applied == nil {
				return requeue, err
			}
			s.applied.Store(key, digest)
			if verdict.Adopt {
				log.FromContext(ctx).Info("Adopted an unmarked provider object (conflictPolicy Adopt)")
			}
			pobj = applied
		}
	}
	if err := s.statusDown(ctx, cobj, pobj, seen); err != nil {
		if isConflictOrGone(err) {
			return true, nil
		}
		return false, err
	}
	if err := s.clearConflict(ctx, cobj); err != nil {
		if isConflictOrGone(err) {
			return true, nil
		}
		return false, err
	}
	s.results.set(s.target, key, Result{State: StateSynced})
	return false, nil
}

// apply writes the desired provider copy (SYNC-1) and returns it; on
// failure it returns nil and what sync returns.
func (s *Syncer) apply(ctx context.Context, cobj, desired *unstructured.Unstructured, pkey types.NamespacedName, exists bool, seen *changes) (*unstructured.Unstructured, bool, error) {
	applied := desired.DeepCopy()
	// A copy applied again is not the one a deletion waited for.
	s.deletions.forget(client.ObjectKeyFromObject(cobj))
	start := time.Now()
	opts := []client.ApplyOption{client.FieldOwner(kbindv1alpha1.FieldManager)}
	if exists {
		// Ours or adopted (classified before): take every field back.
		opts = append(opts, client.ForceOwnership)
	}
	// Without force, a provider object the cache has not seen yet (created
	// a moment ago by someone else) makes the apply fail with a field
	// conflict instead of being overwritten; the retry then classifies it.
	if err := s.session.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), opts...); err != nil {
		if !exists && apierrors.IsConflict(err) {
			return nil, false, fmt.Errorf("the provider copy exists but is not in the cache yet: %w", err)
		}
		requeue, err := s.failed(cobj, err, "apply", s.target.GVK.Kind+" "+pkey.String())
		return nil, requeue, err
	}
	now := time.Now()
	metrics.SyncDuration.WithLabelValues(metrics.DirectionUp).Observe(now.Sub(start).Seconds())
	seen.acknowledged(s.target.Connection, metrics.DirectionUp, now)
	return applied, false, nil
}

// providerGet reads the provider copy from the session cache.
func (s *Syncer) providerGet(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, bool, error) {
	pobj := s.newObject()
	if err := s.session.Cache().Get(ctx, key, pobj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		// Never taken as absence: retried.
		return nil, false, fmt.Errorf("reading the provider copy: %w", err)
	}
	return pobj, true, nil
}

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

func annotationsOf(obj *unstructured.Unstructured) map[string]string {
	if obj == nil {
		return nil
	}
	return obj.GetAnnotations()
}

// desiredCopy is what kbind applies (SYNC-1): identity (the provider key
// pkey), the managed label, the ownership markers (and, under isolation,
// the origin markers), the labels and annotations the binding selects, and
// spec — nothing else.
func (s *Syncer) desiredCopy(cobj *unstructured.Unstructured, pkey types.NamespacedName, policy Policy) *unstructured.Unstructured {
	u := s.newObject()
	u.SetNamespace(pkey.Namespace)
	u.SetName(pkey.Name)
	policy.Metadata.Stamp(u, cobj)
	s.target.Isolation.Markers(s.target.ClusterUID, client.ObjectKeyFromObject(cobj), string(cobj.GetUID())).Stamp(u)
	if spec, ok := cobj.Object["spec"]; ok {
		u.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	mapReferences(u, cobj.GetNamespace(), policy.References, s.target.Isolation)
	return u
}

// mapReferences makes each reference field of the provider copy u name
// the related object's provider copy: under isolation a related object
// team-a/db lives at the mapped key (tenant-a/team-a.db under Namespace
// isolation), in the namespace of the copy itself. Without isolation, or
// when the name stays the same (Prefixed), nothing changes.
func mapReferences(u *unstructured.Unstructured, namespace string, refs []fieldpath.Path, iso isolation.Mapping) {
	if !iso.Isolated() || namespace == "" {
		return
	}
	for _, p := range refs {
		name, err := fieldpath.Name(u, p)
		if err != nil || name == "" {
			continue
		}
		if mapped, err := iso.Object(types.NamespacedName{Namespace: namespace, Name: name}); err == nil && mapped.Name != name {
			fieldpath.Set(u, p, mapped.Name)
		}
	}
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

// digestOf identifies a desired copy.
func digestOf(u *unstructured.Unstructured) string {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// upToDate reports whether the provider copy already carries the desired
// spec and markers (SYNC-1: skip the apply).
func upToDate(pobj, desired *unstructured.Unstructured) bool {
	if !equality.Semantic.DeepEqual(pobj.Object["spec"], desired.Object["spec"]) {
		return false
	}
	labels, annotations := pobj.GetLabels(), pobj.GetAnnotations()
	// The keys copied last time differ: some must go (a missing
	// annotation reads as "").
	if annotations[kbindv1alpha1.SyncedMetadataAnnotation] != desired.GetAnnotations()[kbindv1alpha1.SyncedMetadataAnnotation] {
		return false
	}
	for k, v := range desired.GetLabels() {
		if labels[k] != v {
			return false
		}
	}
	for k, v := range desired.GetAnnotations() {
		if annotations[k] != v {
			return false
		}
	}
	return true
}

// failed records a provider refusal: a Warning Event on the consumer object
// with the provider's message, the failed count, and a retry with backoff
// (never a hot loop). A refusal is any refusal.Kind, NotFound included (a
// namespace or object gone under the write); anything else is returned as
// a transient error.
func (s *Syncer) failed(cobj *unstructured.Unstructured, err error, verb, resource string) (bool, error) {
	kind := refusal.Of(err)
	if kind == refusal.None {
		return false, fmt.Errorf("%s %s on the provider: %w", verb, resource, err)
	}
	res := Result{State: StateFailed, Message: fmt.Sprintf("the provider refused %s %s: %v", verb, resource, err)}
	if storage.TooLarge(err) {
		res.Message += " (the provider copy, with kbind's ownership markers, is larger than the provider stores; make the object smaller)"
	}
	if kind == refusal.Forbidden {
		res.Forbidden = s.refusal(verb, resource, s.providerNamespace(cobj))
	}
	if s.results.set(s.target, client.ObjectKeyFromObject(cobj), res) {
		s.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventProviderRejected, "Sync", "%s", res.Message)
	}
	return true, nil
}

// refusal names what the provider refused, without the object's name: the
// binding counts objects per refusal ("apply Widget in namespace team-a",
// the provider namespace), so its condition stays short however many
// objects are refused.
func (s *Syncer) refusal(verb, resource, ns string) string {
	if strings.HasPrefix(resource, "namespaces/") {
		return verb + " " + resource
	}
	if ns != "" {
		return fmt.Sprintf("%s %s in namespace %s", verb, s.target.GVK.Kind, ns)
	}
	return verb + " " + s.target.GVK.Kind
}

// reportConflict signals a conflict (SYNC-4): the annotation, a Warning
// Event, a best-effort Synced=False condition and the binding's counts. The
// provider object is left untouched. msg "" is the reason's usual message.
func (s *Syncer) reportConflict(ctx context.Context, cobj *unstructured.Unstructured, reason kbindv1alpha1.Reason, msg string) error {
	key := client.ObjectKeyFromObject(cobj)
	if msg == "" {
		msg = map[kbindv1alpha1.Reason]string{
			kbindv1alpha1.ReasonForeignObjectExists: "the provider already has an object of this name without kbind ownership markers; it was left untouched (conflictPolicy Adopt would take it over)",
			kbindv1alpha1.ReasonOwnedByAnother:      "the provider object of this name is owned by another consumer cluster or object; it was left untouched",
		}[reason]
	}
	changed := s.results.set(s.target, key, Result{State: StateConflict, Conflict: reason, Message: msg})
	if cobj.GetAnnotations()[kbindv1alpha1.ConflictAnnotation] != string(reason) {
		base := client.MergeFrom(cobj.DeepCopy())
		ann := cobj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[kbindv1alpha1.ConflictAnnotation] = string(reason)
		cobj.SetAnnotations(ann)
		if err := s.consumer.Patch(ctx, cobj, base); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if changed {
		s.events.Eventf(cobj, nil, corev1.EventTypeWarning, string(reason), "Sync", "%s", msg)
		log.FromContext(ctx).Info("Conflict: provider object left untouched", "reason", reason)
	}
	if s.target.HasStatus {
		s.setSyncedCondition(ctx, cobj, metav1.ConditionFalse, reason, msg)
	}
	return nil
}

// setSyncedCondition writes the best-effort Synced condition into the
// consumer object's status.conditions (the CRD's schema may prune it).
func (s *Syncer) setSyncedCondition(ctx context.Context, cobj *unstructured.Unstructured, status metav1.ConditionStatus, reason kbindv1alpha1.Reason, msg string) {
	raw, _, _ := unstructured.NestedSlice(cobj.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if err := fromUnstructured(m, &c); err == nil {
			conds = append(conds, c)
		}
	}
	existing := meta.FindStatusCondition(conds, string(kbindv1alpha1.ConditionSynced))
	if existing != nil && existing.Status == status && existing.Reason == string(reason) && existing.Message == msg {
		return
	}
	meta.SetStatusCondition(&conds, syncedCondition(status, reason, msg, cobj.GetGeneration()))
	out := make([]any, 0, len(conds))
	for _, c := range conds {
		m, err := toUnstructured(&c)
		if err == nil {
			out = append(out, m)
		}
	}
	updated := cobj.DeepCopy()
	if err := unstructured.SetNestedSlice(updated.Object, out, "status", "conditions"); err != nil {
		return
	}
	if err := s.consumer.Status().Update(ctx, updated); err != nil {
		log.FromContext(ctx).V(1).Info("Could not write the Synced condition (best effort)", "error", err.Error())
	}
}

// statusDown copies the provider status to the consumer when it differs
// (SYNC-2). An absent provider status does not clear the consumer's. An
// API without the status subresource keeps its status in the object
// itself: it is written by a patch of status alone, guarded by the
// resourceVersion, so a consumer edit made meanwhile is never overwritten
// (the conflict is retried).
func (s *Syncer) statusDown(ctx context.Context, cobj, pobj *unstructured.Unstructured, seen *changes) error {
	pstatus, ok := pobj.Object["status"]
	if !ok {
		return nil
	}
	if equality.Semantic.DeepEqual(cobj.Object["status"], pstatus) {
		return nil
	}
	updated := cobj.DeepCopy()
	updated.Object["status"] = runtime.DeepCopyJSONValue(pstatus)
	start := time.Now()
	var err error
	if s.target.HasStatus {
		err = s.consumer.Status().Update(ctx, updated)
	} else {
		err = s.consumer.Patch(ctx, updated, client.MergeFromWithOptions(cobj, client.MergeFromWithOptimisticLock{}))
	}
	if err != nil {
		return err
	}
	now := time.Now()
	metrics.SyncDuration.WithLabelValues(metrics.DirectionDown).Observe(now.Sub(start).Seconds())
	seen.acknowledged(s.target.Connection, metrics.DirectionDown, now)
	return nil
}

// clearConflict removes the conflict annotation once the object syncs
// cleanly.
func (s *Syncer) clearConflict(ctx context.Context, cobj *unstructured.Unstructured) error {
	if _, ok := cobj.GetAnnotations()[kbindv1alpha1.ConflictAnnotation]; !ok {
		return nil
	}
	fresh := s.newObject()
	if err := s.ccache.Get(ctx, client.ObjectKeyFromObject(cobj), fresh); err != nil {
		return err
	}
	base := client.MergeFrom(fresh.DeepCopy())
	ann := fresh.GetAnnotations()
	delete(ann, kbindv1alpha1.ConflictAnnotation)
	fresh.SetAnnotations(ann)
	if err := s.consumer.Patch(ctx, fresh, base); err != nil {
		return err
	}
	s.events.Eventf(fresh, nil, corev1.EventTypeNormal, eventSynced, "Sync", "the conflict is resolved; the object syncs")
	return nil
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

// providerNamespace is the provider namespace of a consumer object's copy
// ("" when cluster-scoped or unplaceable).
func (s *Syncer) providerNamespace(cobj *unstructured.Unstructured) string {
	pkey, err := s.target.Isolation.Object(client.ObjectKeyFromObject(cobj))
	if err != nil {
		return ""
	}
	return pkey.Namespace
}

// unplaceable records a consumer object the Connection's isolation has no
// provider place for (a cluster-scoped object under Namespace isolation):
// failed, with a Warning Event once; nothing is written anywhere.
func (s *Syncer) unplaceable(cobj *unstructured.Unstructured, err error) {
	res := Result{State: StateFailed, Message: fmt.Sprintf("not synced: %v under %s; bind this API through a Connection without Namespace isolation", err, s.target.Isolation)}
	if s.results.set(s.target, client.ObjectKeyFromObject(cobj), res) {
		s.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventProviderRejected, "Sync", "%s", res.Message)
	}
}

// ensureNamespace makes sure the provider namespace pns for consumer
// namespace ns exists (SYNC-3). Without isolation an existing namespace is
// used as it is (providers share their namespaces with consumers by
// design). Under Prefixed isolation a namespace kbind did not create for
// this consumer cluster is a conflict, never adopted: its reason is
// returned and nothing is written into it. Read from the provider cache.
func (s *Syncer) ensureNamespace(ctx context.Context, ns, pns string) (kbindv1alpha1.Reason, error) {
	return namespace.Ensure(ctx, s.session.Cache(), s.session.Client, pns, namespace.Policy{
		Markers:            s.target.Isolation.NamespaceMarkers(s.target.ClusterUID, ns),
		Owned:              s.target.Isolation.Isolated(),
		ConsumerClusterUID: s.target.ClusterUID,
	})
}

func namespaceConflictMessage(pns string, reason kbindv1alpha1.Reason) string {
	if reason == kbindv1alpha1.ReasonOwnedByAnother {
		return fmt.Sprintf("the provider namespace %s belongs to another consumer cluster; nothing was written into it", pns)
	}
	return fmt.Sprintf("the provider namespace %s exists and kbind did not create it; nothing was written into it (a provider admin who wants it used marks it with the annotation and label %s=<this cluster's localClusterUID>)", pns, kbindv1alpha1.ConsumerClusterUIDAnnotation)
}
