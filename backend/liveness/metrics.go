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
	"encoding/json"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	consumers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kbind_backend_consumers",
		Help: "Consumer clusters with heartbeat Leases on this provider, by state (live: some Lease renews; stale: every Lease is stale).",
	}, []string{"state"})

	renewalAgeDesc = prometheus.NewDesc("kbind_backend_consumer_renewal_age_seconds",
		"Seconds since the backend last saw any heartbeat Lease of the consumer cluster renew (its own clock; restarts start at 0).",
		[]string{"consumer_cluster_uid"}, nil)

	takenOverDesc = prometheus.NewDesc("kbind_backend_heartbeat_leases_taken_over",
		"Heartbeat Leases whose spec.holderIdentity is not the consumer cluster their markers name, by that consumer: they do not count for it, and it is not reaped while any is left.",
		[]string{"consumer_cluster_uid"}, nil)

	consumerInfoDesc = prometheus.NewDesc("kbind_backend_consumer_info",
		"One per heartbeat Lease the backend attributes to a consumer cluster, always 1: the konnector version and the core.kbind.io API version its konnector wrote on it (\"unknown\" when it wrote none). Gone with the Lease.",
		[]string{"namespace", "lease", "consumer_cluster_uid", "konnector_version", "api_version"}, nil)

	ages = &ageCollector{}
)

func init() {
	metrics.Registry.MustRegister(consumers, ages)
}

func updateConsumerGauge(verdicts map[string]bool) {
	live, stale := 0, 0
	for _, l := range verdicts {
		if l {
			live++
		} else {
			stale++
		}
	}
	consumers.WithLabelValues("live").Set(float64(live))
	consumers.WithLabelValues("stale").Set(float64(stale))
}

// ageCollector computes renewal ages, taken-over Lease counts and the
// konnectors' versions at scrape time, so they never go stale between reconciles and a consumer without
// any leaves no series behind.
type ageCollector struct {
	mu      sync.Mutex
	sources []*Controller
}

func register(c *Controller) {
	ages.mu.Lock()
	defer ages.mu.Unlock()
	ages.sources = append(ages.sources, c)
}

func (a *ageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- renewalAgeDesc
	ch <- takenOverDesc
	ch <- consumerInfoDesc
}

func (a *ageCollector) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	sources := append([]*Controller(nil), a.sources...)
	a.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range sources {
		for uid, age := range c.renewalAges() {
			if seen[uid] {
				continue
			}
			seen[uid] = true
			ch <- prometheus.MustNewConstMetric(renewalAgeDesc, prometheus.GaugeValue, age.Seconds(), uid)
		}
	}
	seen = map[string]bool{}
	for _, c := range sources {
		for uid, n := range c.takenOverCounts() {
			if seen[uid] {
				continue
			}
			seen[uid] = true
			ch <- prometheus.MustNewConstMetric(takenOverDesc, prometheus.GaugeValue, float64(n), uid)
		}
	}
	seen = map[string]bool{}
	for _, c := range sources {
		for _, i := range c.leaseInfos() {
			if key := i.Namespace + "/" + i.Name; !seen[key] {
				seen[key] = true
				ch <- prometheus.MustNewConstMetric(consumerInfoDesc, prometheus.GaugeValue, 1, i.Namespace, i.Name, i.Consumer, i.KonnectorVersion, i.APIVersion)
			}
		}
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
