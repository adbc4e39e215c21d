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

package syncer_test

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// latencyCount is how many end-to-end latencies the Connection
// "provider" observed in a direction.
func latencyCount(t *testing.T, direction string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range enginetest.Series(t, "kbind_sync_latency_seconds", map[string]string{"connection": "provider", "direction": direction}) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// objectCounts is kbind_objects of the API (Kind.group) by state; a state
// without a series is absent from the map.
func objectCounts(t *testing.T, api string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range enginetest.Series(t, "kbind_objects", map[string]string{"connection": "provider", "api": api}) {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "state" {
				out[lp.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestLifecycleMetrics: objects synced up and a status changed on the
// provider show in the end-to-end latency of both directions;
// kbind_objects counts the API's objects by state, every state present,
// a conflict among them, and its series go when the API is unbound.
func TestLifecycleMetrics(t *testing.T) {
	parallelEnv(t)
	ns := unique("measured-a")
	ctx := context.Background()
	// The Measured API is the test's alone, so that its object counts and
	// Event counters are its own; the latencies of the Connection
	// "provider" are shared with the tests running alongside: it asserts
	// their growth, at least its own observations.
	measuredGVK, measureds := namespacedAPI(t, "Measured", "measured.example.org")
	api := measuredGVK.Kind + "." + measuredGVK.Group
	cb := bindCluster(t, measureds, "provider", measureds)
	up, down := latencyCount(t, "up"), latencyCount(t, "down")

	const n = 3
	for i := range n {
		create(t, env.Consumer, object(measuredGVK, ns, fmt.Sprintf("m%d", i), map[string]any{"size": int64(i)}))
	}
	for i := range n {
		waitCopy(t, measuredGVK, ns, fmt.Sprintf("m%d", i), nil)
	}
	enginetest.Eventually(t, "an up latency per object", func() error {
		if got := latencyCount(t, "up") - up; got < n {
			return fmt.Errorf("%d up latencies observed", got)
		}
		return nil
	})

	// The API forwards provider Events (the default): both Event counters
	// are served from the start, at 0.
	labels := map[string]string{"connection": "provider", "api": api}
	for _, name := range []string{"kbind_provider_events_forwarded_total", "kbind_provider_events_dropped_total"} {
		if ms := enginetest.Series(t, name, labels); len(ms) != 1 || ms[0].GetCounter().GetValue() != 0 {
			t.Errorf("%s%v: %v, want one series at 0", name, labels, ms)
		}
	}

	// A provider controller reports status: down.
	pcopy, _ := get(t, env.Provider, measuredGVK, ns, "m0")
	pcopy.Object["status"] = map[string]any{"phase": "Ready"}
	if err := env.Provider.Status().Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the status on the consumer", func() error {
		if u, _ := get(t, env.Consumer, measuredGVK, ns, "m0"); fmt.Sprint(u.Object["status"]) != "map[phase:Ready]" {
			return fmt.Errorf("status %v", u.Object["status"])
		}
		return nil
	})
	enginetest.Eventually(t, "a down latency", func() error {
		if got := latencyCount(t, "down") - down; got < 1 {
			return fmt.Errorf("%d down latencies observed", got)
		}
		return nil
	})

	// A foreign provider object: a conflict, counted as such.
	create(t, env.Provider, object(measuredGVK, ns, "taken", map[string]any{"owner": "provider-team"}))
	create(t, env.Consumer, object(measuredGVK, ns, "taken", map[string]any{"owner": "me"}))
	waitConflict(t, measuredGVK, ns, "taken", kbindv1alpha1.ReasonForeignObjectExists)
	want := map[string]float64{"synced": n, "pending": 0, "failed": 0, "conflict": 1}
	enginetest.Eventually(t, "kbind_objects by state", func() error {
		if got := objectCounts(t, api); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("kbind_objects %v, want %v", got, want)
		}
		return nil
	})

	// Unbound: the API's results are dropped, and its series with them.
	if err := env.Consumer.Delete(ctx, cb); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "no kbind_objects series of an unbound API", func() error {
		if got := objectCounts(t, api); len(got) > 0 {
			return fmt.Errorf("kbind_objects %v", got)
		}
		return nil
	})
}
