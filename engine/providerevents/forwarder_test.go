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

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/metrics"
)

// TestNewStartsItsCountersAtZero: a forwarder's counters exist, at 0, before
// its first Event. Prometheus' increase() cannot see a counter's first
// value, so a series born at 5 (a first storm's drops) shows no increase and
// KbindProviderEventsDropped would never fire for it.
func TestNewStartsItsCountersAtZero(t *testing.T) {
	gk := schema.GroupKind{Group: "example.org", Kind: "Widget"}
	if _, err := New(Options{Connection: "provider", GroupKind: gk, Provider: &rest.Config{Host: "https://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP kbind_provider_events_dropped_total New provider Events not re-emitted on consumer objects because the rate limits refused them, by connection and API.
# TYPE kbind_provider_events_dropped_total counter
kbind_provider_events_dropped_total{api="Widget.example.org",connection="provider"} 0
# HELP kbind_provider_events_forwarded_total Provider Events re-emitted on consumer objects (Event creates and updates), by connection and API.
# TYPE kbind_provider_events_forwarded_total counter
kbind_provider_events_forwarded_total{api="Widget.example.org",connection="provider"} 0
`
	for _, name := range []string{"kbind_provider_events_dropped_total", "kbind_provider_events_forwarded_total"} {
		c := metrics.ProviderEventsDropped
		if strings.Contains(name, "forwarded") {
			c = metrics.ProviderEventsForwarded
		}
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), name); err != nil {
			t.Error(err)
		}
	}
}
