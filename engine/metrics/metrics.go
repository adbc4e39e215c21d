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

// Package metrics holds kbind's Prometheus metrics (docs/metrics.md). They are
// registered with controller-runtime's registry, so the konnector serves
// them on its metrics endpoint next to controller-runtime's own.
package metrics

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Directions of SyncDuration and SyncLatency.
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

	// SyncLatency is the end-to-end latency of a sync write: from the
	// konnector observing a change of one side (the informer event) to the
	// other side acknowledging the write that delivers it.
	SyncLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kbind_sync_latency_seconds",
		Help:    "End-to-end sync latency by connection and direction: up, from observing a consumer object's change to the provider acknowledging the apply; down, from observing a provider object's change to the consumer acknowledging the status write. Only changes that needed a write.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"connection", "direction"})

	// ConnectionTimeToReady is how long Connections took from creation to
	// their first Ready.
	ConnectionTimeToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kbind_connection_time_to_ready_seconds",
		Help:    "Seconds from a Connection's creation to the first time it became Ready; observed once per Connection, by the konnector that saw it.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	})

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
	objectsDesc      = prometheus.NewDesc("kbind_objects", "Consumer objects of a bound API through a Connection by their current sync result (synced, pending, failed, conflict).", []string{"connection", "api", "state"}, nil)
	heartbeatAgeDesc = prometheus.NewDesc("kbind_heartbeat_age_seconds", "Seconds since the Connection's heartbeat Lease was last renewed.", []string{"connection"}, nil)
)

// ConflictSource reports current conflict counts.
type ConflictSource interface {
	// Conflicts calls fn for every (connection, API, reason) with conflicts.
	Conflicts(fn func(connection, api, reason string, n int))
}

// ObjectCounts counts the consumer objects of one API through one
// Connection by sync result.
type ObjectCounts struct {
	Synced, Pending, Failed, Conflict int
}

// ObjectSource reports current per-object sync results.
type ObjectSource interface {
	// Objects calls fn once for every (connection, API) with results.
	Objects(fn func(connection, api string, counts ObjectCounts))
}

// HeartbeatSource reports the last successful renewal per Connection.
type HeartbeatSource interface {
	LastRenewals() map[string]time.Time
}

type collector struct {
	mu sync.Mutex
	// conflicts and objects are keyed by registration, so that removal
	// needs no comparable source.
	conflicts  map[int]ConflictSource
	objects    map[int]ObjectSource
	heartbeats []HeartbeatSource
	next       int
}

var state = &collector{conflicts: map[int]ConflictSource{}, objects: map[int]ObjectSource{}}

func init() {
	ctrlmetrics.Registry.MustRegister(SyncDuration, SyncLatency, ConnectionTimeToReady, Syncs, ProviderEventsForwarded, ProviderEventsDropped, SyncerReady, ConnectionReady, CredentialsExpiry, CredentialsExpiring, CredentialRenewals, state)
}

// AddConflictSource registers a source of kbind_conflicts until the
// returned remove is called.
func AddConflictSource(s ConflictSource) (remove func()) {
	state.mu.Lock()
	defer state.mu.Unlock()
	id := state.add()
	state.conflicts[id] = s
	return func() {
		state.mu.Lock()
		defer state.mu.Unlock()
		delete(state.conflicts, id)
	}
}

// add returns a new registration id; mu is held.
func (c *collector) add() int {
	c.next++
	return c.next
}

// AddObjectSource registers a source of kbind_objects until the returned
// remove is called (an engine stopped in a process that goes on, as in
// tests, must not report its last results for ever).
func AddObjectSource(s ObjectSource) (remove func()) {
	state.mu.Lock()
	defer state.mu.Unlock()
	id := state.add()
	state.objects[id] = s
	return func() {
		state.mu.Lock()
		defer state.mu.Unlock()
		delete(state.objects, id)
	}
}

// AddHeartbeatSource registers a source of kbind_heartbeat_age_seconds.
func AddHeartbeatSource(s HeartbeatSource) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.heartbeats = append(state.heartbeats, s)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- conflictsDesc
	ch <- objectsDesc
	ch <- heartbeatAgeDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	conflicts, objects := slices.Collect(maps.Values(c.conflicts)), slices.Collect(maps.Values(c.objects))
	heartbeats := slices.Clone(c.heartbeats)
	c.mu.Unlock()
	// Several sources (engines run one after another in one process, as in
	// tests) never report one series twice, which would fail the scrape:
	// counts are summed, the latest renewal wins.
	conflictCounts := map[[3]string]int{}
	for _, s := range conflicts {
		s.Conflicts(func(connection, api, reason string, n int) {
			conflictCounts[[3]string{connection, api, reason}] += n
		})
	}
	for k, n := range conflictCounts {
		ch <- prometheus.MustNewConstMetric(conflictsDesc, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
	objectCounts := map[[2]string]ObjectCounts{}
	for _, s := range objects {
		s.Objects(func(connection, api string, c ObjectCounts) {
			k := [2]string{connection, api}
			sum := objectCounts[k]
			sum.Synced, sum.Pending, sum.Failed, sum.Conflict = sum.Synced+c.Synced, sum.Pending+c.Pending, sum.Failed+c.Failed, sum.Conflict+c.Conflict
			objectCounts[k] = sum
		})
	}
	for k, c := range objectCounts {
		// Every state, 0 included: a query on a state that is absent could
		// not tell "none" from "not reported".
		for state, n := range map[string]int{"synced": c.Synced, "pending": c.Pending, "failed": c.Failed, "conflict": c.Conflict} {
			ch <- prometheus.MustNewConstMetric(objectsDesc, prometheus.GaugeValue, float64(n), k[0], k[1], state)
		}
	}
	renewals := map[string]time.Time{}
	for _, s := range heartbeats {
		for connection, last := range s.LastRenewals() {
			if last.After(renewals[connection]) {
				renewals[connection] = last
			}
		}
	}
	now := time.Now()
	for connection, last := range renewals {
		ch <- prometheus.MustNewConstMetric(heartbeatAgeDesc, prometheus.GaugeValue, now.Sub(last).Seconds(), connection)
	}
}
