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

package reaper

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of the deletion metric.
const (
	resultDeleted       = "deleted"
	resultForbidden     = "forbidden"
	resultFailed        = "failed"
	resultListForbidden = "list_forbidden"
)

var deletions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kbind_backend_deletions_total",
	Help: "Deletions the reaper attempted, by kind (Kind.group; resource.group for list_forbidden) and result (deleted, forbidden, failed, list_forbidden).",
}, []string{"kind", "result"})

// candidates is what the backend can say about the objects a consumer
// holds on the provider without a watch per exported API (it watches only
// Leases): the count its reaping passes find, for the stale consumers it
// reaps.
var candidates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kbind_backend_reap_candidates",
	Help: "Objects of a stale consumer cluster (provider copies, related copies, namespaces created for it, its Leases) that the latest reaping pass found on the provider, over the phases it reached; no series before reaping starts or once it finishes or stops.",
}, []string{"consumer_cluster_uid"})

func init() {
	metrics.Registry.MustRegister(deletions, candidates)
}

// recordCandidates keeps kbind_backend_reap_candidates in line with how a
// pass ended: a finished or stopped pass leaves no series.
func recordCandidates(uid string, v Verdict, found int) {
	if v == Done || v == Stopped {
		candidates.DeleteLabelValues(uid)
		return
	}
	candidates.WithLabelValues(uid).Set(float64(found))
}

// Forget drops what the reaper reports and remembers of a consumer whose
// reaping ended between passes (it renewed, or its Leases are gone).
func (r *Reaper) Forget(uid string) {
	candidates.DeleteLabelValues(uid)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.next, uid)
	delete(r.episodes, uid) // the stale episode ended
}
