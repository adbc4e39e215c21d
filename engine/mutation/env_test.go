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
