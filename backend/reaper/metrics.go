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

func init() {
	metrics.Registry.MustRegister(deletions)
}
