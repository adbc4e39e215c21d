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
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestTracker(t *testing.T) {
	const window = 30 * time.Minute
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	type step struct {
		advance time.Duration
		observe *string // renewTime seen, nil for none
		stale   bool
	}
	s := func(v string) *string { return &v }
	cases := []struct {
		name  string
		steps []step
	}{
		{"fresh lease is live", []step{{0, s("t1"), false}}},
		{"unchanged renewTime goes stale after the window", []step{
			{0, s("t1"), false}, {window - time.Second, s("t1"), false}, {time.Second, s("t1"), true},
		}},
		{"renewal resets the clock", []step{
			{0, s("t1"), false}, {window - time.Second, s("t2"), false}, {window - time.Second, nil, false}, {time.Second, nil, true},
		}},
		{"stale lease comes back when it renews", []step{
			{0, s("t1"), false}, {window, nil, true}, {time.Minute, s("t2"), false},
		}},
		{"a far-future renewTime that never changes still goes stale", []step{
			{0, s("2999-01-01T00:00:00.000000Z"), false}, {window, s("2999-01-01T00:00:00.000000Z"), true},
		}},
		{"an old renewTime first seen now is live (restart never reaps early)", []step{
			{0, s("2001-01-01T00:00:00.000000Z"), false}, {window - time.Minute, nil, false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			tr := NewTracker(clk, window)
			for i, st := range tc.steps {
				clk.SetTime(clk.Now().Add(st.advance))
				if st.observe != nil {
					tr.Observe("ns/lease", *st.observe)
				}
				if got := tr.State("ns/lease"); got.Stale != st.stale {
					t.Fatalf("step %d: stale=%v, want %v (%+v)", i, got.Stale, st.stale, got)
				}
			}
		})
	}
}

func TestConsumerLiveWithOneLiveLease(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	tr := NewTracker(clk, time.Minute)
	tr.Observe("a/old", "t1")
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	tr.Observe("b/new", "t1")
	if !tr.ConsumerLive([]string{"a/old", "b/new"}) {
		t.Error("a consumer with one live Lease must be live")
	}
	if tr.ConsumerLive([]string{"a/old"}) {
		t.Error("a consumer whose only Lease is stale must not be live")
	}
	if got := tr.NextTransition("b/new"); got != time.Minute {
		t.Errorf("NextTransition = %v, want 1m", got)
	}
	tr.Forget("b/new")
	if tr.State("b/new").Known {
		t.Error("forgotten Lease still known")
	}
}
