// This file holds status down (SYNC-2): the provider copy's status copied
// to the consumer object, and the best-effort Synced condition on it.

package syncer

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/metrics"
)

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

// syncedCondition is the best-effort Synced condition written on a bound
// object.
func syncedCondition(status metav1.ConditionStatus, reason kbindv1alpha1.Reason, msg string, generation int64) metav1.Condition {
	return metav1.Condition{Type: string(kbindv1alpha1.ConditionSynced), Status: status, Reason: string(reason), Message: msg,
		ObservedGeneration: generation, LastTransitionTime: metav1.Now()}
}
