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

package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type objectSource map[[2]string]ObjectCounts

func (s objectSource) Objects(fn func(connection, api string, counts ObjectCounts)) {
	for k, c := range s {
		fn(k[0], k[1], c)
	}
}

type heartbeatSource map[string]time.Time

func (s heartbeatSource) LastRenewals() map[string]time.Time { return s }

// kbind_objects has every state of every reported API, 0 included; two
// sources (engines one after another in one process) never make a
// duplicate series, and a removed source reports nothing.
func TestObjects(t *testing.T) {
	a := objectSource{{"c1", "Widget.example.org"}: {Synced: 3, Conflict: 1}}
	b := objectSource{{"c1", "Widget.example.org"}: {Pending: 2}, {"c2", "Gadget.example.org"}: {}}
	removeA, removeB := AddObjectSource(a), AddObjectSource(b)
	defer removeB()
	want := `
# HELP kbind_objects Consumer objects of a bound API through a Connection by their current sync result (synced, pending, failed, conflict).
# TYPE kbind_objects gauge
kbind_objects{api="Gadget.example.org",connection="c2",state="conflict"} 0
kbind_objects{api="Gadget.example.org",connection="c2",state="failed"} 0
kbind_objects{api="Gadget.example.org",connection="c2",state="pending"} 0
kbind_objects{api="Gadget.example.org",connection="c2",state="synced"} 0
kbind_objects{api="Widget.example.org",connection="c1",state="conflict"} 1
kbind_objects{api="Widget.example.org",connection="c1",state="failed"} 0
kbind_objects{api="Widget.example.org",connection="c1",state="pending"} 2
kbind_objects{api="Widget.example.org",connection="c1",state="synced"} 3
`
	if err := testutil.CollectAndCompare(state, strings.NewReader(want), "kbind_objects"); err != nil {
		t.Error(err)
	}
	removeA()
	removeB()
	if n := testutil.CollectAndCount(state, "kbind_objects"); n != 0 {
		t.Errorf("%d kbind_objects series after the sources were removed", n)
	}
}

// Two heartbeat sources with the same Connection make one series, from
// the latest renewal.
func TestHeartbeatAgeOnce(t *testing.T) {
	now := time.Now()
	AddHeartbeatSource(heartbeatSource{"dup": now.Add(-time.Hour)})
	AddHeartbeatSource(heartbeatSource{"dup": now})
	reg := prometheus.NewRegistry()
	reg.MustRegister(state)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kbind_heartbeat_age_seconds" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d series, want 1", len(f.GetMetric()))
		}
		if age := f.GetMetric()[0].GetGauge().GetValue(); age > 60 {
			t.Errorf("age %.0f s: not the latest renewal's", age)
		}
		return
	}
	t.Error("no kbind_heartbeat_age_seconds")
}
