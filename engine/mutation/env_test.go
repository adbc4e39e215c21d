package mutation

import (
	"testing"

	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The cost limits are the API server's own; StaticCostLimit is a copy.
func TestCostConstantsAreTheAPIServers(t *testing.T) {
	if StaticCostLimit != apiextensionsvalidation.StaticEstimatedCostLimit {
		t.Errorf("StaticCostLimit is %d, apiextensions-apiserver's StaticEstimatedCostLimit %d", StaticCostLimit, apiextensionsvalidation.StaticEstimatedCostLimit)
	}
	if PerCallCostLimit != 1_000_000 || RuntimeCostBudget != 10_000_000 || MaxElements != 524_288 {
		t.Errorf("limits changed: per call %d, budget %d, elements %d; update the package doc", PerCallCostLimit, RuntimeCostBudget, MaxElements)
	}
}

// compatibilityVersion is what the API server of the linked release uses
// (a test binary is not version-stamped, as a konnector might be).
func TestCompatibilityVersion(t *testing.T) {
	if got, want := compatibilityVersion(), environment.DefaultCompatibilityVersion(); !got.EqualTo(want) {
		t.Errorf("compatibilityVersion() = %s, the API server's DefaultCompatibilityVersion() = %s", got, want)
	}
}
