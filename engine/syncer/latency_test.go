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
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kbind/kbind/engine/metrics"
)

// The latency of a change counts from its first unhandled observation; a
// sync takes what it handles, a retried one puts it back, and nothing is
// left behind for a key that synced.
func TestObservations(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		op string // observe, take (the sync starts), retry (it is retried: put back)
		at int
	}
	cases := []struct {
		name  string
		steps []step
		// taken is what the last take returned (-1: nothing), left the
		// keys still remembered.
		taken int
		left  int
	}{
		{"nothing observed", []step{{"take", 0}}, -1, 0},
		{"one change", []step{{"observe", 1}, {"take", 0}}, 1, 0},
		{"several changes before the sync: the earliest counts", []step{{"observe", 1}, {"observe", 2}, {"observe", 3}, {"take", 0}}, 1, 0},
		{"handled: the next sync has nothing", []step{{"observe", 1}, {"take", 0}, {"take", 0}}, -1, 0},
		{"a change during the sync is the next sync's", []step{{"observe", 1}, {"take", 0}, {"observe", 5}, {"take", 0}}, 5, 0},
		{"a retried sync keeps the first observation", []step{{"observe", 1}, {"take", 0}, {"observe", 5}, {"retry", 1}, {"take", 0}}, 1, 0},
		{"retried: remembered for the retry", []step{{"observe", 2}, {"take", 0}, {"retry", 2}}, 2, 1},
		{"a retry with nothing observed puts nothing back", []step{{"take", 0}, {"retry", -1}}, -1, 0},
	}
	for _, tc := range cases {
		var o observations
		taken := time.Time{}
		for _, s := range tc.steps {
			switch s.op {
			case "observe":
				o.observe(key, at(s.at))
			case "take":
				taken = o.take(key)
			case "retry":
				if s.at >= 0 {
					o.observe(key, at(s.at))
				} else {
					o.observe(key, time.Time{})
				}
			}
		}
		switch {
		case tc.taken < 0 && !taken.IsZero():
			t.Errorf("%s: took %v, want nothing", tc.name, taken)
		case tc.taken >= 0 && !taken.Equal(at(tc.taken)):
			t.Errorf("%s: took %v, want %v", tc.name, taken, at(tc.taken))
		}
		if n := o.len(); n != tc.left {
			t.Errorf("%s: %d key(s) remembered, want %d", tc.name, n, tc.left)
		}
	}
}

// A delivered change is observed once, in its direction, from its first
// observation; a direction without an observed change is not observed.
func TestAcknowledged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The histogram is process-global: each run (-count) observes under a
	// Connection name of its own.
	connection := fmt.Sprintf("latency-unit-%d", metricRuns.Add(1))
	c := &changes{up: t0, down: time.Time{}}
	c.acknowledged(connection, metrics.DirectionUp, t0.Add(1500*time.Millisecond))
	c.acknowledged(connection, metrics.DirectionUp, t0.Add(9*time.Second))   // a second write of the same retry chain
	c.acknowledged(connection, metrics.DirectionDown, t0.Add(2*time.Second)) // no provider change observed
	if n, sum := histogram(t, connection, metrics.DirectionUp); n != 1 || sum != 1.5 {
		t.Errorf("up: %d observation(s) summing %v s, want 1 of 1.5 s", n, sum)
	}
	if n, _ := histogram(t, connection, metrics.DirectionDown); n != 0 {
		t.Errorf("down: %d observation(s), want none", n)
	}
	if !c.up.IsZero() {
		t.Error("the delivered up change is still remembered")
	}
}

func histogram(t *testing.T, connection, direction string) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := metrics.SyncLatency.WithLabelValues(connection, direction).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
