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

// This file holds spec up (SYNC-1, SYNC-3, SYNC-4) — the provider copy's
// ownership classified, its namespace created, the desired copy built
// and applied, an apply not repeated while the cache catches up.

package syncer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/internal/namespace"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/ownership"
)

// classify decides from the copy's ownership markers and the binding's
// conflict policy whether kbind may write the copy (SYNC-4); a conflict is
// reported and nothing is written.
func (s *Syncer) classify(ctx context.Context, o *objectSync) (outcome, error) {
	if o.policy.Import && s.importing() && o.exists && !marked(o.pobj) {
		// The provider's own object, which the binding imports: never
		// adopted, never overwritten.
		return done, s.reportConflict(ctx, o.cobj, kbindv1alpha1.ReasonConsumerObjectExists, "")
	}
	owner := ownership.Classify(o.exists, annotationsOf(o.pobj), s.target.ClusterUID, string(o.cobj.GetUID()))
	o.verdict = ownership.Decide(owner, o.policy.Conflict)
	if o.verdict.Write {
		return next, nil
	}
	if deleted, err := s.deleteLate(ctx, o.key, o.pobj); err != nil || deleted {
		// A copy of the object this one replaces, written in doubt and
		// landed after that object was released: not a conflict.
		s.results.set(s.target, o.key, Result{State: StatePending})
		return done, err
	}
	return done, s.reportConflict(ctx, o.cobj, o.verdict.Conflict, "")
}

// unmark removes from the provider copy, which kbind may write
// (classified), the backend reaper's phase-1 mark and the kept label of an
// earlier Orphan release (issue #52) or of deletion protection, with its
// kept-by annotation (BIND-5): a konnector syncing the object is
// live, whatever its heartbeat Lease says, and an object synced again is
// no longer kept. The provider informer's event on a mark brings the
// object here, so a live konnector clears a mark within seconds; the
// reaper deletes only copies whose mark survived its grace period. A
// refused patch is reported like any refused write.
func (s *Syncer) unmark(ctx context.Context, o *objectSync) (outcome, error) {
	if !o.exists {
		return next, nil
	}
	data, ok := unmarkPatch(o.pobj)
	if !ok {
		return next, nil
	}
	if err := s.session.Client.Patch(ctx, o.pobj.DeepCopy(), client.RawPatch(types.MergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return requeue, nil // gone or replaced: its event brings it back
		}
		return s.failed(o.cobj, err, "patch", s.target.ProviderGVK.Kind+" "+o.pkey.String())
	}
	log.FromContext(ctx).V(1).Info("Removed the reaper's mark or the kept label from the provider copy",
		"reapMarkedAt", o.pobj.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation], "kept", o.pobj.GetLabels()[kbindv1alpha1.KeptLabel])
	return next, nil
}

// unmarkPatch is the JSON merge patch that removes the reap mark, the
// kept label and the kept-by annotation from the provider copy pobj,
// exactly that copy (its UID: a replaced copy is refused, not patched); ok
// is false when it carries none.
func unmarkPatch(pobj *unstructured.Unstructured) (data []byte, ok bool) {
	meta := map[string]any{"uid": string(pobj.GetUID())}
	annotations := map[string]any{}
	for _, a := range []string{kbindv1alpha1.ReapMarkedAtAnnotation, kbindv1alpha1.KeptByAnnotation} {
		if _, set := pobj.GetAnnotations()[a]; set {
			annotations[a] = nil
		}
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if _, kept := pobj.GetLabels()[kbindv1alpha1.KeptLabel]; kept {
		meta["labels"] = map[string]any{kbindv1alpha1.KeptLabel: nil}
	}
	if len(meta) == 1 {
		return nil, false
	}
	data, err := json.Marshal(map[string]any{"metadata": meta})
	return data, err == nil
}

// ensureNamespace makes sure the provider namespace of the copy exists
// when the isolation creates namespaces (SYNC-3), read from the provider
// cache. Without isolation an existing namespace is used as it is
// (providers share their namespaces with consumers by design). Under
// Prefixed isolation a namespace kbind did not create for this consumer
// cluster is a conflict, never adopted: it is reported and nothing is
// written into it.
func (s *Syncer) ensureNamespace(ctx context.Context, o *objectSync) (outcome, error) {
	if !s.target.Namespaced || !s.target.Isolation.CreatesNamespaces() {
		return next, nil
	}
	pns := o.pkey.Namespace
	conflict, err := namespace.Ensure(ctx, s.session.Cache(), s.session.Client, pns, namespace.Policy{
		Markers:            s.target.Isolation.NamespaceMarkers(s.target.ClusterUID, o.key.Namespace),
		Owned:              s.target.Isolation.Isolated(),
		ConsumerClusterUID: s.target.ClusterUID,
	})
	switch {
	case err != nil:
		return s.failed(o.cobj, err, "create", "namespaces/"+pns)
	case conflict != "":
		return done, s.reportConflict(ctx, o.cobj, conflict, namespaceConflictMessage(pns, conflict))
	default:
		return next, nil
	}
}

// applySpec applies the desired copy unless the provider copy is up to
// date, or the same copy was applied a moment ago and the provider
// informer has not reported it yet (its event brings the object back).
func (s *Syncer) applySpec(ctx context.Context, o *objectSync) (outcome, error) {
	desired, err := s.desiredCopy(o.cobj, o.pkey, o.policy)
	if err != nil {
		// A rule failing on this object: nothing is written; the object's
		// next change brings it back.
		s.mutationFailed(o.cobj, err)
		return done, nil
	}
	if o.exists && upToDate(o.pobj, desired) {
		return next, nil
	}
	// The digest only now: most reconciles find the copy up to date.
	digest := digestOf(desired)
	if last, ok := s.applied.Load(o.key); ok && last == digest {
		if o.exists {
			return next, nil
		}
		// Applied a moment ago; the provider informer has not reported
		// it yet. Its event brings the object back.
		s.results.set(s.target, o.key, Result{State: StatePending})
		return done, nil
	}
	applied, out, err := s.apply(ctx, o.cobj, desired, o.pkey, o.exists, o.seen)
	if applied == nil {
		return out, err
	}
	s.applied.Store(o.key, digest)
	if o.verdict.Adopt {
		log.FromContext(ctx).Info("Adopted an unmarked provider object (conflictPolicy Adopt)")
	}
	o.pobj, o.exists = applied, true
	return next, nil
}

// apply writes the desired provider copy (SYNC-1) and returns it; on
// failure it returns nil and the outcome of the sync.
func (s *Syncer) apply(ctx context.Context, cobj, desired *unstructured.Unstructured, pkey types.NamespacedName, exists bool, seen *changes) (*unstructured.Unstructured, outcome, error) {
	applied := desired.DeepCopy()
	// A copy applied again is not the one a deletion waited for.
	s.releaser.forget(client.ObjectKeyFromObject(cobj))
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
			return nil, done, fmt.Errorf("the provider copy exists but is not in the cache yet: %w", err)
		}
		if inDoubt(err) {
			// It may land still, even after the object is released.
			s.doubts.wrote(client.ObjectKeyFromObject(cobj), cobj.GetUID())
		}
		out, err := s.failed(cobj, err, "apply", s.target.ProviderGVK.Kind+" "+pkey.String())
		return nil, out, err
	}
	s.doubts.applied(client.ObjectKeyFromObject(cobj), cobj.GetUID())
	if l := log.FromContext(ctx).V(1); l.Enabled() { // its values cost an allocation per apply
		l.Info("Applied the provider copy", "created", !exists, "objectUID", string(cobj.GetUID()),
			"objectResourceVersion", cobj.GetResourceVersion(), "finalizers", cobj.GetFinalizers())
	}
	now := time.Now()
	metrics.SyncDuration.WithLabelValues(metrics.DirectionUp).Observe(now.Sub(start).Seconds())
	seen.acknowledged(s.target.Connection, metrics.DirectionUp, now)
	return applied, next, nil
}

// desiredCopy is what kbind applies (SYNC-1): identity (the provider key
// pkey), the managed label, the ownership markers (and, under isolation,
// the origin markers), the labels and annotations the binding selects, and
// spec — nothing else — shaped by the up mutations (an error: a rule
// failed on this object).
func (s *Syncer) desiredCopy(cobj *unstructured.Unstructured, pkey types.NamespacedName, policy Policy) (*unstructured.Unstructured, error) {
	u := s.newProviderObject()
	u.SetNamespace(pkey.Namespace)
	u.SetName(pkey.Name)
	policy.Metadata.Stamp(u, cobj)
	s.target.Isolation.Markers(s.target.ClusterUID, client.ObjectKeyFromObject(cobj), string(cobj.GetUID())).Stamp(u)
	if spec, ok := cobj.Object["spec"]; ok {
		u.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	if policy.Up != nil {
		// The rules' paths are confined to .spec: markers, name and
		// namespace stay kbind's.
		if err := policy.Up.Apply(u.Object, cobj.Object, nil); err != nil {
			return nil, err
		}
	}
	// After the rules (which may not write a reference field, Mutations):
	// a reference field of the copy always names the related object at
	// its own namespace's provider place (issue #51).
	mapReferences(u, cobj.GetNamespace(), policy.References, s.target.Isolation)
	return u, nil
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
