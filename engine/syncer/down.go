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

// This file holds what goes down to the consumer: the provider copy's
// status (SYNC-2), the best-effort Synced condition, and the provider's
// Events re-emitted on the consumer objects (the forwarder of
// engine/providerevents, run while a binding asks for it).

package syncer

import (
	"context"
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
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/mutation"
	"github.com/kbind/kbind/engine/ownership"
	"github.com/kbind/kbind/engine/providerevents"
)

// statusDown copies the provider status to the consumer when it differs
// (SYNC-2). An absent provider status does not clear the consumer's. An
// API without the status subresource keeps its status in the object
// itself: it is written by a patch of status alone, guarded by the
// resourceVersion, so a consumer edit made meanwhile is never overwritten
// (the conflict is retried).
func (s *Syncer) statusDown(ctx context.Context, cobj, pobj *unstructured.Unstructured, down *mutation.Program, seen *changes) error {
	pstatus, ok := pobj.Object["status"]
	if !ok {
		return nil
	}
	if down != nil {
		// The down rules shape the status going down; their paths are
		// confined to .status. A rule failing on this object writes
		// nothing.
		shaped := map[string]any{"status": pstatus}
		if err := down.Apply(shaped, pobj.Object, cobj.Object); err != nil {
			s.mutationFailed(cobj, err)
			return nil
		}
		pstatus = shaped["status"]
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
	writeSyncedCondition(ctx, s.consumer, cobj, status, reason, msg)
}

// writeSyncedCondition writes the best-effort Synced condition into cobj's
// status.conditions through c, unless it already says the same; a failed
// write is logged, never returned.
func writeSyncedCondition(ctx context.Context, c client.Client, cobj *unstructured.Unstructured, status metav1.ConditionStatus, reason kbindv1alpha1.Reason, msg string) {
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
	if err := c.Status().Update(ctx, updated); err != nil {
		log.FromContext(ctx).V(1).Info("Could not write the Synced condition (best effort)", "error", err.Error())
	}
}

// syncedCondition is the best-effort Synced condition written on a bound
// object.
func syncedCondition(status metav1.ConditionStatus, reason kbindv1alpha1.Reason, msg string, generation int64) metav1.Condition {
	return metav1.Condition{Type: string(kbindv1alpha1.ConditionSynced), Status: status, Reason: string(reason), Message: msg,
		ObservedGeneration: generation, LastTransitionTime: metav1.Now()}
}

// runningForwarder is a running provider Events forwarder.
type runningForwarder struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// runForwarder starts the Syncer's provider Events forwarder when want
// and it does not run, or stops it when it runs and !want: it runs only
// while a binding of the scope forwards Events, so credentials that may
// not watch Events cost nothing once the bindings say Ignore.
func (s *Syncer) runForwarder(want bool) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	switch {
	case want && s.forwarder == nil && s.ctx.Err() == nil:
		f, err := providerevents.New(providerevents.Options{
			Connection: s.target.Connection, GroupKind: s.target.ProviderGVK.GroupKind(),
			Provider: s.session.Config, ProviderHTTPClient: s.session.HTTPClient, Namespace: s.session.ConfinedTo,
			Consumer: s.consumer, ConsumerCache: s.ccache,
			Resolve: s.resolveEvent, Limiter: s.limiter,
			Refused: func(refusal string) { s.results.setRefusal(s.target, refusal) },
		})
		if err != nil {
			log.FromContext(s.ctx).Error(err, "Provider Events are not forwarded")
			return
		}
		ctx, cancel := context.WithCancel(s.ctx)
		running := &runningForwarder{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(running.done)
			f.Run(ctx)
		}()
		s.forwarder = running
	case !want && s.forwarder != nil:
		s.forwarder.cancel()
		<-s.forwarder.done
		s.forwarder = nil
		s.results.setRefusal(s.target, "")
	}
}

// resolveEvent maps a provider Event to the consumer object whose copy it
// is about: the copy must be in the provider cache with this consumer's
// ownership markers (and, when the Event names one, the same UID), its
// consumer object in the consumer cache, and a binding that forwards
// Events must cover it.
func (s *Syncer) resolveEvent(ctx context.Context, e *corev1.Event) (corev1.ObjectReference, providerevents.Verdict) {
	pkey := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
	if !s.target.Namespaced {
		pkey.Namespace = ""
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	switch {
	case err != nil || !exists:
		// Not in the cache yet, or gone (then the retries run out).
		return corev1.ObjectReference{}, providerevents.Retry
	case e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pobj.GetUID():
		return corev1.ObjectReference{}, providerevents.Skip // about an earlier object of that name
	}
	key, ok := s.consumerKey(pobj)
	if !ok {
		return corev1.ObjectReference{}, providerevents.Skip
	}
	if policy, covered := s.currentScope().covers(key.Namespace); !covered || !policy.ForwardEvents {
		return corev1.ObjectReference{}, providerevents.Skip
	}
	cobj := s.newObject()
	if err := s.ccache.Get(ctx, key, cobj); err != nil {
		if apierrors.IsNotFound(err) {
			return corev1.ObjectReference{}, providerevents.Skip
		}
		return corev1.ObjectReference{}, providerevents.Retry
	}
	if ownership.Classify(true, pobj.GetAnnotations(), s.target.ClusterUID, string(cobj.GetUID())) != ownership.Ours {
		return corev1.ObjectReference{}, providerevents.Skip
	}
	return corev1.ObjectReference{
		APIVersion: s.target.GVK.GroupVersion().String(), Kind: s.target.GVK.Kind,
		Namespace: key.Namespace, Name: key.Name, UID: cobj.GetUID(),
	}, providerevents.Forward
}
