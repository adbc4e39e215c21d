// Package metrics holds kbind's Prometheus metrics (docs/metrics.md). They are
// registered with controller-runtime's registry, so the konnector serves
// them on its metrics endpoint next to controller-runtime's own.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Directions of SyncDuration.
const (
	DirectionUp   = "up"   // spec up: consumer → provider
	DirectionDown = "down" // status down: provider → consumer
)

var (
	// SyncDuration is the duration of the provider write of a spec up, or
	// of the consumer write of a status down.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kbind_sync_duration_seconds",
		Help:    "Duration of one sync write, by direction: up (spec to the provider) or down (status to the consumer).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"direction"})

	// Syncs counts per-object sync outcomes.
	Syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kbind_syncs_total",
		Help: "Per-object sync outcomes, by connection, API and result (synced, pending, failed, conflict).",
	}, []string{"connection", "api", "result"})

	// ProviderEventsForwarded counts provider Events re-emitted (created or
	// updated) on consumer objects.
	ProviderEventsForwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kbind_provider_events_forwarded_total",
		Help: "Provider Events re-emitted on consumer objects (Event creates and updates), by connection and API.",
	}, []string{"connection", "api"})

	// ProviderEventsDropped counts new provider Events not re-emitted
	// because the rate limits refused them.
	ProviderEventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kbind_provider_events_dropped_total",
		Help: "New provider Events not re-emitted on consumer objects because the rate limits refused them, by connection and API.",
	}, []string{"connection", "api"})

	// SyncerReady is 1 while the syncer of a bound API runs with its
	// informers on both sides synced, 0 while it waits for them or waits
	// to restart after a failure; the series is gone when it stops.
	SyncerReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kbind_syncer_ready",
		Help: "1 while the syncer of a bound API runs with its consumer and provider informers synced, 0 while it waits for them or to restart after a failure, by connection and API; absent when no syncer runs.",
	}, []string{"connection", "api"})

	// ConnectionReady is 1 while a Connection is Ready.
	ConnectionReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kbind_connection_ready",
		Help: "1 while the Connection is Ready, else 0.",
	}, []string{"connection"})

	// CredentialsExpiry is when the credential a Connection uses expires
	// (absent for one that does not).
	CredentialsExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kbind_credentials_expiry_timestamp_seconds",
		Help: "Unix time at which the credential the Connection uses on the provider expires; absent when it does not expire.",
	}, []string{"connection"})
	// CredentialsExpiring is 1 while CredentialsExpiring is True.
	CredentialsExpiring = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kbind_credentials_expiring",
		Help: "1 while the Connection's credential will not be renewed and expires within the warning time (CredentialsExpiring=True), else 0.",
	}, []string{"connection"})
	// CredentialRenewals counts ServiceAccount token renewals by result
	// (success, failure).
	CredentialRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kbind_credentials_renewals_total",
		Help: "ServiceAccount token renewals the konnector attempted, by Connection and result (success, failure).",
	}, []string{"connection", "result"})
)

var (
	conflictsDesc    = prometheus.NewDesc("kbind_conflicts", "Consumer objects skipped because their provider object belongs to someone else, by connection, API and reason.", []string{"connection", "api", "reason"}, nil)
	heartbeatAgeDesc = prometheus.NewDesc("kbind_heartbeat_age_seconds", "Seconds since the Connection's heartbeat Lease was last renewed.", []string{"connection"}, nil)
)

// ConflictSource reports current conflict counts.
type ConflictSource interface {
	// Conflicts calls fn for every (connection, API, reason) with conflicts.
	Conflicts(fn func(connection, api, reason string, n int))
}

// HeartbeatSource reports the last successful renewal per Connection.
type HeartbeatSource interface {
	LastRenewals() map[string]time.Time
}

type collector struct {
	mu         sync.Mutex
	conflicts  []ConflictSource
	heartbeats []HeartbeatSource
}

var state = &collector{}

func init() {
	ctrlmetrics.Registry.MustRegister(SyncDuration, Syncs, ProviderEventsForwarded, ProviderEventsDropped, SyncerReady, ConnectionReady, CredentialsExpiry, CredentialsExpiring, CredentialRenewals, state)
}

// AddConflictSource registers a source of kbind_conflicts.
func AddConflictSource(s ConflictSource) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.conflicts = append(state.conflicts, s)
}

// AddHeartbeatSource registers a source of kbind_heartbeat_age_seconds.
func AddHeartbeatSource(s HeartbeatSource) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.heartbeats = append(state.heartbeats, s)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- conflictsDesc
	ch <- heartbeatAgeDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	conflicts, heartbeats := append([]ConflictSource{}, c.conflicts...), append([]HeartbeatSource{}, c.heartbeats...)
	c.mu.Unlock()
	for _, s := range conflicts {
		s.Conflicts(func(connection, api, reason string, n int) {
			ch <- prometheus.MustNewConstMetric(conflictsDesc, prometheus.GaugeValue, float64(n), connection, api, reason)
		})
	}
	now := time.Now()
	for _, s := range heartbeats {
		for connection, last := range s.LastRenewals() {
			ch <- prometheus.MustNewConstMetric(heartbeatAgeDesc, prometheus.GaugeValue, now.Sub(last).Seconds(), connection)
		}
	}
}
