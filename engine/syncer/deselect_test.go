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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecideSelection(t *testing.T) {
	const grace = time.Minute
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		selected  bool
		elsewhere string
		deleting  bool
		since     time.Duration // after t0; -1: never seen unselected
		claimsAt  time.Duration // after t0
		now       time.Duration // after t0
		want      Selection
		after     time.Duration
	}{
		{"selected: synced", true, "", false, -1, 0, 0, SelectionSync, 0},
		{"selected again within the grace: synced (the deselection is forgotten)", true, "", false, 0, 0, 10 * time.Second, SelectionSync, 0},
		{"claimed elsewhere: a move", false, "west", false, -1, 0, 0, SelectionMove, 0},
		{"step 2 of a two-step relabel within the grace: a move wins over the deselection", false, "west", false, 0, 5 * time.Second, 30 * time.Second, SelectionMove, 0},
		{"claimed elsewhere after the grace, before the release: still a move", false, "west", false, 0, 5 * time.Second, 2 * time.Minute, SelectionMove, 0},
		{"first seen unselected: kept, looked at again after the grace", false, "", false, -1, 0, 0, SelectionWait, grace},
		{"first seen on stale claims (the label event before the bindings' recompute): kept", false, "", false, -1, -time.Second, 0, SelectionWait, grace},
		{"unselected within the grace: kept, for what is left of it", false, "", false, 0, 5 * time.Second, 20 * time.Second, SelectionWait, 40 * time.Second},
		{"unselected past the grace but on claims computed before it was seen: kept until they are recomputed", false, "", false, 10 * time.Second, 9 * time.Second, 2 * time.Minute, SelectionWait, grace / 4},
		{"claims computed the same instant the deselection was seen: not after it, kept", false, "", false, 10 * time.Second, 10 * time.Second, 2 * time.Minute, SelectionWait, grace / 4},
		{"unselected for the grace on fresh claims: released", false, "", false, 0, time.Second, grace, SelectionRelease, 0},
		{"unselected long past the grace on fresh claims: released", false, "", false, 0, 30 * time.Second, time.Hour, SelectionRelease, 0},
		{"an object being deleted: released at once (the user's act)", false, "", true, -1, 0, 0, SelectionRelease, 0},
		{"an object being deleted and claimed elsewhere: a move (DecideMove decides its copy)", false, "west", true, -1, 0, 0, SelectionMove, 0},
	} {
		var since time.Time
		if tc.since >= 0 {
			since = t0.Add(tc.since)
		}
		got, after := DecideSelection(tc.selected, tc.elsewhere, tc.deleting, since, t0.Add(tc.claimsAt), t0.Add(tc.now), grace)
		if got != tc.want || after != tc.after {
			t.Errorf("%s: %s after %s, want %s after %s", tc.name, got, after, tc.want, tc.after)
		}
	}
}

func TestRoutedElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{"no route annotation (synced before it existed): the covering route's", nil, false},
		{"this route's", map[string]string{kbindv1alpha1.ConnectionAnnotation: "east"}, false},
		{"moved to another route: that route's finalizer, never released here", map[string]string{kbindv1alpha1.ConnectionAnnotation: "west"}, true},
	} {
		obj := &unstructured.Unstructured{}
		obj.SetAnnotations(tc.annotations)
		if got := routedElsewhere(obj, "east"); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestDeletedBeforeMove(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name        string
		deleting    bool
		finalizers  []string
		annotations map[string]string
		want        bool
	}{
		{"deleted under this route's annotation and finalizer: released here, no other route will", true,
			[]string{kbindv1alpha1.SyncerFinalizer}, map[string]string{kbindv1alpha1.ConnectionAnnotation: "east"}, true},
		{"not being deleted: a move (the copy released for it)", false,
			[]string{kbindv1alpha1.SyncerFinalizer}, map[string]string{kbindv1alpha1.ConnectionAnnotation: "east"}, false},
		{"the new route took it over: its release", true,
			[]string{kbindv1alpha1.SyncerFinalizer}, map[string]string{kbindv1alpha1.ConnectionAnnotation: "west"}, false},
		{"no route annotation (synced before it existed): the covering route's", true,
			[]string{kbindv1alpha1.SyncerFinalizer}, nil, false},
		{"finalizer gone: nothing to release", true,
			[]string{"example.org/other"}, map[string]string{kbindv1alpha1.ConnectionAnnotation: "east"}, false},
	} {
		obj := &unstructured.Unstructured{}
		obj.SetAnnotations(tc.annotations)
		obj.SetFinalizers(tc.finalizers)
		if tc.deleting {
			obj.SetDeletionTimestamp(&now)
		}
		if got := deletedBeforeMove(obj, "east"); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}
