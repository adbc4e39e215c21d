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

package providerevents

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

func TestOccurrenceOf(t *testing.T) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	for _, tc := range []struct {
		name string
		e    corev1.Event
		want Occurrence
	}{
		{"core/v1 event", corev1.Event{Count: 3, FirstTimestamp: at(0), LastTimestamp: at(time.Minute)}, Occurrence{3, t0, t0.Add(time.Minute)}},
		{"count 0 counts once", corev1.Event{LastTimestamp: at(0)}, Occurrence{1, t0, t0}},
		{"events.k8s.io single", corev1.Event{EventTime: metav1.NewMicroTime(t0)}, Occurrence{1, t0, t0}},
		{"events.k8s.io series", corev1.Event{EventTime: metav1.NewMicroTime(t0), Series: &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Hour))}},
			Occurrence{7, t0, t0.Add(time.Hour)}},
		{"no times: creation", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(0)}}, Occurrence{1, t0, t0}},
		{"first after last is clamped", corev1.Event{FirstTimestamp: at(time.Hour), LastTimestamp: at(0)}, Occurrence{1, t0, t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OccurrenceOf(&tc.e)
			if got.Count != tc.want.Count || !got.First.Equal(tc.want.First) || !got.Last.Equal(tc.want.Last) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConcerns(t *testing.T) {
	gk := schema.GroupKind{Group: "example.org", Kind: "Widget"}
	for _, tc := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"example.org/v1alpha1", "Widget", true},
		{"example.org/v2", "Widget", true}, // any version of the group
		{"other.org/v1alpha1", "Widget", false},
		{"example.org/v1alpha1", "Gadget", false},
		{"v1", "Widget", false},
		{"a/b/c", "Widget", false},
	} {
		e := &corev1.Event{InvolvedObject: corev1.ObjectReference{APIVersion: tc.apiVersion, Kind: tc.kind}}
		if got := Concerns(e, gk); got != tc.want {
			t.Errorf("Concerns(%s %s) = %v, want %v", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

func TestName(t *testing.T) {
	a, b := Name("db", "uid-1"), Name("db", "uid-2")
	if a == b || !strings.HasPrefix(a, "db.") || len(a) != len("db.")+16 {
		t.Errorf("names %q %q", a, b)
	}
	if Name("db", "uid-1") != a {
		t.Error("not deterministic")
	}
	long := Name(strings.Repeat("x", 253), "uid-1")
	if len(long) != 253 || !strings.HasSuffix(long, a[2:]) {
		t.Errorf("long name %d %q", len(long), long[240:])
	}
}

func TestDesired(t *testing.T) {
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{UID: "p-1"}, Type: corev1.EventTypeWarning, Reason: "ProvisioningFailed",
		Message: "quota exceeded", Source: corev1.EventSource{Component: "db-controller", Host: "node-1"}, Count: 2,
		FirstTimestamp: metav1.NewTime(t0), LastTimestamp: metav1.NewTime(t0.Add(time.Minute))}
	obj := corev1.ObjectReference{APIVersion: "example.org/v1alpha1", Kind: "Widget", Namespace: "team-a", Name: "db", UID: "c-1"}
	got := Desired(e, obj, "prod")
	if got.Namespace != "team-a" || got.Name != Name("db", "p-1") || got.InvolvedObject != obj {
		t.Errorf("identity %s/%s %+v", got.Namespace, got.Name, got.InvolvedObject)
	}
	if got.Type != e.Type || got.Reason != e.Reason || got.Message != e.Message || got.Count != 2 {
		t.Errorf("content %+v", got)
	}
	if got.Source.Component != "db-controller (provider prod)" || got.Source.Host != "" {
		t.Errorf("source %+v", got.Source)
	}
	if got.Labels["core.kbind.io/managed"] != "true" {
		t.Errorf("labels %v", got.Labels)
	}
	cluster := Desired(&corev1.Event{ReportingController: "example.org/ctrl"}, corev1.ObjectReference{Name: "c1"}, "prod")
	if cluster.Namespace != "default" || cluster.Source.Component != "example.org/ctrl (provider prod)" {
		t.Errorf("cluster-scoped: %s %+v", cluster.Namespace, cluster.Source)
	}
}

func TestDecide(t *testing.T) {
	ev := func(count int32, last time.Time) *corev1.Event {
		return &corev1.Event{Count: count, LastTimestamp: metav1.NewTime(last)}
	}
	now := t0.Add(2 * time.Hour)
	for _, tc := range []struct {
		name              string
		existing, desired *corev1.Event
		want              Action
	}{
		{"new", nil, ev(1, now), ActionCreate},
		{"new but older than the TTL", nil, ev(1, now.Add(-MaxAge-time.Second)), ActionNone},
		{"current", ev(2, now), ev(2, now), ActionNone},
		{"happened again", ev(2, now.Add(-time.Minute)), ev(3, now), ActionUpdate},
		{"later, same count (series)", ev(2, now.Add(-time.Minute)), ev(2, now), ActionUpdate},
		{"never rewound", ev(5, now), ev(3, now.Add(-time.Minute)), ActionNone},
		{"old but existing is still updated", ev(1, now.Add(-2*MaxAge)), ev(2, now.Add(-MaxAge-time.Minute)), ActionUpdate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.existing, tc.desired, now); got != tc.want {
				t.Errorf("Decide = %v, want %v", got, tc.want)
			}
		})
	}
	merged := Merge(ev(5, now), &corev1.Event{Count: 3, LastTimestamp: metav1.NewTime(now.Add(time.Minute)), Message: "new"})
	if merged.Count != 5 || !merged.LastTimestamp.Time.Equal(now.Add(time.Minute)) || merged.Message != "new" {
		t.Errorf("Merge = %+v", merged)
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(Limits{PerObjectBurst: 3, PerObjectEvery: 10 * time.Second, TotalPerSecond: 1, TotalBurst: 5})
	for i := 0; i < 3; i++ {
		if d := l.Reserve("a", t0); d != 0 {
			t.Fatalf("write %d of object a waits %v", i, d)
		}
	}
	if d := l.Reserve("a", t0); d != 10*time.Second {
		t.Errorf("object a over its burst waits %v, want 10s", d)
	}
	// A refused reservation takes nothing: after 10 s exactly one more.
	if d := l.Reserve("a", t0.Add(10*time.Second)); d != 0 {
		t.Errorf("object a after 10s waits %v", d)
	}
	// The total: refilled to its burst of 5 by t0+10s, one taken by a.
	for i, uid := range []types.UID{"b", "c", "d", "e"} {
		if d := l.Reserve(uid, t0.Add(10*time.Second)); d != 0 {
			t.Errorf("write %d waits %v", i, d)
		}
	}
	if d := l.Reserve("f", t0.Add(10*time.Second)); d != time.Second {
		t.Errorf("a sixth write at once waits %v, want 1s (the total limit)", d)
	}
	// Objects refused by the total limit keep their own tokens.
	if d := l.Reserve("f", t0.Add(11*time.Second)); d != 0 {
		t.Errorf("object f after the total refilled waits %v", d)
	}
}

func TestLimiterPrunesIdleObjects(t *testing.T) {
	l := NewLimiter(DefaultLimits)
	for i := 0; i < maxIdleLimiters; i++ {
		l.Reserve(types.UID(strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26)), t0)
	}
	l.Reserve("late", t0.Add(time.Hour))
	if n := len(l.objects); n != 1 {
		t.Errorf("%d limiters kept after an idle hour, want 1", n)
	}
}
