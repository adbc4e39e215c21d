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

package connection

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
)

// heartbeatFailing returns the Heartbeat condition decided now when it
// newly says the renewals fail — False where it was not, or False for
// another reason (Forbidden, Pending, OwnedByAnother) — so that the
// refusal is said once by a Warning Event on the Connection (issue #52).
// A failing heartbeat never changes Ready nor stops sync; the provider's
// backend may judge the consumer stale, and its reaper then marks the
// copies this konnector keeps clearing.
func heartbeatFailing(before []metav1.Condition, conds []patch.Condition) (patch.Condition, bool) {
	for _, c := range conds {
		if c.Type != kbindv1alpha1.ConditionHeartbeat || c.Status != metav1.ConditionFalse {
			continue
		}
		prev := meta.FindStatusCondition(before, string(kbindv1alpha1.ConditionHeartbeat))
		if prev != nil && prev.Status == metav1.ConditionFalse && prev.Reason == string(c.Reason) {
			return c, false
		}
		return c, true
	}
	return patch.Condition{}, false
}

// reportHeartbeat records the Warning Event of a heartbeat that newly
// fails (heartbeatFailing).
func (r *Reconciler) reportHeartbeat(before, conn *kbindv1alpha1.Connection, conds []patch.Condition) {
	c, failing := heartbeatFailing(before.Status.Conditions, conds)
	if !failing || r.Events == nil {
		return
	}
	r.Events.Eventf(conn, nil, corev1.EventTypeWarning, string(c.Reason), "Heartbeat",
		"heartbeat Lease renewal fails: %s. Sync goes on and Ready is unchanged, but a kbind backend on the provider judges this consumer stale after its --stale-after; its reaper only marks the copies, which this konnector clears while it syncs (see docs/troubleshooting.md#no-heartbeat-lease)",
		c.Message)
}
