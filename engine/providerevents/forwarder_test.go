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
