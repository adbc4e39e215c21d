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

package liveness

import (
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestConsumerUID(t *testing.T) {
	const l, a = "core.kbind.io/consumer-cluster-uid", "core.kbind.io/consumer-cluster-uid"
	cases := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        string
		problem     string
	}{
		{"both markers", map[string]string{l: "u1"}, map[string]string{a: "u1"}, "u1", ""},
		{"neither", nil, nil, "", "no core.kbind.io/consumer-cluster-uid label or annotation"},
		{"label only", map[string]string{l: "u1"}, nil, "", "no core.kbind.io/consumer-cluster-uid annotation"},
		{"annotation only", nil, map[string]string{a: "u1"}, "", "no core.kbind.io/consumer-cluster-uid label"},
		{"disagree", map[string]string{l: "u1"}, map[string]string{a: "u2"}, "", `label "u1" and annotation "u2" differ`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConsumerUID(tc.labels, tc.annotations)
			if got != tc.want {
				t.Errorf("uid %q, want %q", got, tc.want)
			}
			if (err == nil) != (tc.problem == "") || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
				t.Errorf("error %v, want %q", err, tc.problem)
			}
		})
	}
}

// TestAttribute: a Lease counts for the consumer its markers name only
// while that consumer holds it; one held by anyone else (the takeover of
// an attack review: a tenant rewrote the holder and let it go stale) is
// TakenOver and counts for nobody.
func TestAttribute(t *testing.T) {
	const l = "core.kbind.io/consumer-cluster-uid"
	marked := map[string]string{l: "u1"}
	holder := func(s string) *string { return &s }
	cases := []struct {
		name      string
		labels    map[string]string
		holder    *string
		want      string
		takenOver *TakenOver
		problem   string
	}{
		{"held by its consumer", marked, holder("u1"), "u1", nil, ""},
		{"held by another consumer", marked, holder("u2"), "", &TakenOver{Consumer: "u1", Holder: "u2"}, `is held by "u2", not by consumer cluster u1`},
		{"held by someone else", marked, holder("attacker"), "", &TakenOver{Consumer: "u1", Holder: "attacker"}, `is held by "attacker"`},
		{"no holder", marked, nil, "", &TakenOver{Consumer: "u1"}, "has no spec.holderIdentity"},
		{"empty holder", marked, holder(""), "", &TakenOver{Consumer: "u1"}, "has no spec.holderIdentity"},
		{"holder differs only in case", marked, holder("U1"), "", &TakenOver{Consumer: "u1", Holder: "U1"}, `"U1"`},
		{"no markers, any holder: not a takeover", nil, holder("u1"), "", nil, "no core.kbind.io/consumer-cluster-uid label or annotation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Attribute(tc.labels, tc.labels, tc.holder)
			if got != tc.want {
				t.Errorf("uid %q, want %q", got, tc.want)
			}
			if (err == nil) != (tc.problem == "") || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
				t.Errorf("error %v, want %q", err, tc.problem)
			}
			var taken *TakenOver
			if errors.As(err, &taken) != (tc.takenOver != nil) || (taken != nil && *taken != *tc.takenOver) {
				t.Errorf("taken over %+v, want %+v", taken, tc.takenOver)
			}
		})
	}
}

func TestStaleSinceAction(t *testing.T) {
	ts := "2026-12-02T10:30:00Z"
	cases := []struct {
		name    string
		current string
		present bool
		state   State
		want    Action
	}{
		{"unknown Lease", "", false, State{}, Keep},
		{"live, unmarked", "", false, State{Known: true}, Keep},
		{"turned stale", "", false, State{Known: true, Stale: true}, Mark},
		{"stale, marked", ts, true, State{Known: true, Stale: true}, Keep},
		{"stale, garbage mark", "yesterday", true, State{Known: true, Stale: true}, Mark},
		{"renewed after being stale", ts, true, State{Known: true, Renewed: true}, Clear},
		{"restarted backend keeps an old mark until it sees a renewal", ts, true, State{Known: true}, Keep},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := StaleSinceAction(tc.current, tc.present, tc.state); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := StaleSinceValue(time.Date(2026, 12, 2, 11, 30, 0, 0, time.FixedZone("x", 3600))); got != "2026-12-02T10:30:00Z" {
		t.Errorf("StaleSinceValue = %s", got)
	}
}

func TestNextTransitionAndLive(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	live := func(in time.Duration) State { return State{Known: true, StaleSince: now.Add(in)} }
	stale := State{Known: true, Stale: true, StaleSince: now.Add(-time.Minute)}
	cases := []struct {
		name     string
		states   []State
		wantNext time.Duration
		wantOK   bool
		wantLive bool
	}{
		{"no Leases", nil, 0, false, false},
		{"one live", []State{live(5 * time.Minute)}, 5 * time.Minute, true, true},
		{"earliest of two live", []State{live(5 * time.Minute), live(2 * time.Minute)}, 2 * time.Minute, true, true},
		{"one stale, one live: live", []State{stale, live(time.Minute)}, time.Minute, true, true},
		{"all stale: no requeue", []State{stale, stale}, 0, false, false},
		{"unknown counts as live", []State{stale, {}}, 0, false, true},
		{"due now still requeues", []State{live(0)}, time.Millisecond, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, ok := NextTransition(tc.states, now)
			if next != tc.wantNext || ok != tc.wantOK {
				t.Errorf("NextTransition = %v %v, want %v %v", next, ok, tc.wantNext, tc.wantOK)
			}
			if got := Live(tc.states); got != tc.wantLive {
				t.Errorf("Live = %v, want %v", got, tc.wantLive)
			}
		})
	}
}

func TestTrackerRenewed(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	tr := NewTracker(clk, time.Minute)
	tr.Observe("ns/l", "t1")
	if tr.State("ns/l").Renewed {
		t.Error("a first sighting is not a renewal")
	}
	tr.Observe("ns/l", "t1")
	if tr.State("ns/l").Renewed {
		t.Error("an unchanged renewTime is not a renewal")
	}
	tr.Observe("ns/l", "t2")
	if !tr.State("ns/l").Renewed {
		t.Error("a changed renewTime is a renewal")
	}
}
