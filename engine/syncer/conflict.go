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

// This file holds conflicts (SYNC-4): a provider object kbind may not write
// is reported — annotation, Warning Event, Synced=False, the binding's
// counts — and left untouched; the report is cleared once the object syncs.

package syncer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// conflictMessages are the usual messages of the conflict reasons of a
// provider copy.
var conflictMessages = map[kbindv1alpha1.Reason]string{
	kbindv1alpha1.ReasonForeignObjectExists: "the provider already has an object of this name without kbind ownership markers; it was left untouched (conflictPolicy Adopt would take it over)",
	kbindv1alpha1.ReasonOwnedByAnother:      "the provider object of this name is owned by another consumer cluster or object; it was left untouched",
	kbindv1alpha1.ReasonConsumerObjectExists: "the binding imports the provider's objects, and the provider has its own object where this one maps: this object, which kbind did not import, holds its name; neither is touched " +
		"(rename or delete this object to see the provider's here; conflictPolicy Adopt never takes over a provider's object the binding imports)",
}

// reportConflict signals a conflict (SYNC-4): the annotation, a Warning
// Event, a best-effort Synced=False condition and the binding's counts. The
// provider object is left untouched. msg "" is the reason's usual message.
func (s *Syncer) reportConflict(ctx context.Context, cobj *unstructured.Unstructured, reason kbindv1alpha1.Reason, msg string) error {
	key := client.ObjectKeyFromObject(cobj)
	if msg == "" {
		msg = conflictMessages[reason]
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

// namespaceConflictMessage says why kbind wrote nothing into the provider
// namespace pns.
func namespaceConflictMessage(pns string, reason kbindv1alpha1.Reason) string {
	if reason == kbindv1alpha1.ReasonOwnedByAnother {
		return fmt.Sprintf("the provider namespace %s belongs to another consumer cluster; nothing was written into it", pns)
	}
	return fmt.Sprintf("the provider namespace %s exists and kbind did not create it; nothing was written into it (a provider admin who wants it used marks it with the annotation and label %s=<this cluster's localClusterUID>)", pns, kbindv1alpha1.ConsumerClusterUIDAnnotation)
}
