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

package syncer

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestConnectionUsable(t *testing.T) {
	now := metav1.Now()
	cond := func(typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus, reason kbindv1alpha1.Reason) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: status, Reason: string(reason)}
	}
	ready := cond(kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	draining := cond(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings)
	held := cond(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDeletionProtected)
	connected := cond(kbindv1alpha1.ConditionConnected, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	disconnected := cond(kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	for _, tc := range []struct {
		name     string
		uid      string
		deleting bool
		conds    []metav1.Condition
		want     bool
	}{
		{"ready", "u", false, []metav1.Condition{connected, ready}, true},
		{"no status yet", "", false, nil, false},
		{"ready without a pinned consumer UID", "", false, []metav1.Condition{connected, ready}, false},
		{"not ready", "u", false, []metav1.Condition{disconnected, cond(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)}, false},
		{"deleting, waiting for its bindings, connected", "u", true, []metav1.Condition{connected, draining}, true},
		{"deleting, waiting for its bindings, provider lost", "u", true, []metav1.Condition{disconnected, draining}, false},
		{"DrainingBindings without a deletionTimestamp", "u", false, []metav1.Condition{connected, draining}, false},
		{"deleting, held by its deletionProtection, connected: works as before", "u", true, []metav1.Condition{connected, held}, true},
		{"deleting, held by its deletionProtection, provider lost", "u", true, []metav1.Condition{disconnected, held}, false},
		{"DeletionProtected without a deletionTimestamp", "u", false, []metav1.Condition{connected, held}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &kbindv1alpha1.Connection{Status: kbindv1alpha1.ConnectionStatus{LocalClusterUID: tc.uid, Conditions: tc.conds}}
			if tc.deleting {
				conn.DeletionTimestamp = &now
			}
			if got := ConnectionUsable(conn); got != tc.want {
				t.Errorf("ConnectionUsable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartBackoff(t *testing.T) {
	// The n-th consecutive failure of an API's Syncer waits this long.
	limiter := newRestartBackoff()
	want := map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 50: time.Minute}
	for n := 1; n <= 50; n++ {
		got := limiter.When(Route{CRD: "widgets.example.org", Connection: "p"})
		if w, ok := want[n]; ok && got != w {
			t.Errorf("failure %d: wait %s, want %s", n, got, w)
		}
	}
	limiter.Forget(Route{CRD: "widgets.example.org", Connection: "p"})
	if got := limiter.When(Route{CRD: "widgets.example.org", Connection: "p"}); got != time.Second {
		t.Errorf("after the Syncer synced: wait %s, want 1s", got)
	}
}

// TestClaiming: a deleting binding claims nothing (it drains), unless its
// deletion is held by its deletionProtection: then it syncs as before.
func TestClaiming(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name                string
		deleting, protected bool
		want                bool
	}{
		{"live", false, false, true},
		{"live, protected", false, true, true},
		{"deleting: drains", true, false, false},
		{"deleting, protected: held, claims as before", true, true, true},
	} {
		for _, b := range []kbindv1alpha1.BindingObject{&kbindv1alpha1.ClusterBinding{}, &kbindv1alpha1.Binding{}} {
			b.BindingSpec().DeletionProtection = tc.protected
			if tc.deleting {
				b.SetDeletionTimestamp(&now)
			}
			if got := Claiming(b); got != tc.want {
				t.Errorf("%s %s: Claiming = %v, want %v", tc.name, b.BindingKind(), got, tc.want)
			}
		}
	}
}
