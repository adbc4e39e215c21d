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

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/internal/namespace"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/metrics"
)

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
