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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
)

func TestHeartbeatFailing(t *testing.T) {
	hb := func(s metav1.ConditionStatus, r kbindv1alpha1.Reason) patch.Condition {
		return patch.Condition{Type: kbindv1alpha1.ConditionHeartbeat, Status: s, Reason: r, Message: "m"}
	}
	stored := func(s metav1.ConditionStatus, r kbindv1alpha1.Reason) []metav1.Condition {
		return []metav1.Condition{{Type: string(kbindv1alpha1.ConditionHeartbeat), Status: s, Reason: string(r)}}
	}
	for _, tc := range []struct {
		name   string
		before []metav1.Condition
		now    patch.Condition
		want   bool
	}{
		{"first report, failing", nil, hb(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden), true},
		{"renewed, now refused", stored(metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected), hb(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden), true},
		{"still refused: said once", stored(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden), hb(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden), false},
		{"failing for another reason", stored(metav1.ConditionFalse, kbindv1alpha1.ReasonPending), hb(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden), true},
		{"renewed", stored(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden), hb(metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := heartbeatFailing(tc.before, []patch.Condition{tc.now}); got != tc.want {
				t.Errorf("heartbeatFailing = %v, want %v", got, tc.want)
			}
		})
	}
}
