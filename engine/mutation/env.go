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
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	baseversion "k8s.io/component-base/version"
)

// Variable names an expression sees.
const (
	objectVar   = "object"
	consumerVar = "consumer"
)

// Cost limits, the ones the Kubernetes API server applies to the
// x-kubernetes-validations rules of a CustomResourceDefinition.
const (
	// StaticCostLimit is the largest estimated cost of one expression,
	// refused at Compile. It is apiextensions-apiserver's
	// StaticEstimatedCostLimit (pkg/apis/apiextensions/validation,
	// validation.go), copied because that package pulls an API server's
	// worth of dependencies into the konnector for one constant;
	// TestCostConstantsAreTheAPIServers keeps the copy honest.
	StaticCostLimit = 10_000_000
	// PerCallCostLimit stops one evaluation at Apply: k8s.io/apiserver
	// pkg/apis/cel PerCallLimit ("roughly 0.1 second").
	PerCallCostLimit = celconfig.PerCallLimit
	// RuntimeCostBudget is what all rules together may cost on one object
	// at Apply: k8s.io/apiserver pkg/apis/cel RuntimeCELCostBudget, the
	// budget of all validation rules on one custom resource ("roughly 1
	// second").
	RuntimeCostBudget = celconfig.RuntimeCELCostBudget
	// NamespacedPerCallCostLimit stops one evaluation of a namespaced
	// Binding's rule at Apply. A namespace user writes those rules, and
	// they run on the konnector's workers, shared with every other
	// namespace; under the API server's limits one object could cost
	// minutes (see "Cost" in the package doc). Chosen by measurement
	// (BenchmarkApplyWorstNamespaced, the 2-core development machine
	// under load): the costliest comprehension found, stopped here, took
	// 0.5 ms, while ordinary rules cost a few units (a field 3, string
	// concatenation 4 to 14, a lookup among 10 conditions 76, a map over a
	// list of 10 objects 144, about 14 per item).
	NamespacedPerCallCostLimit = 1_000
	// NamespacedCostBudget is what all the rules of a namespaced Binding
	// may cost on one object at one Apply (one direction of one sync),
	// values written included (costBudget.convert). An evaluation is
	// charged when it ends, so the rules of one object spend at most this
	// plus NamespacedPerCallCostLimit: measured, 2.3 to 3.5 ms for the
	// worst spread of 32 rules; 32 maps over lists of 10 objects (4,608)
	// still fit.
	NamespacedCostBudget = 5_000
	// MaxElements bounds, for the static estimate, the size of every list,
	// map and string an expression reaches through object or consumer.
	// The variables are typed dyn (kbind has no schema to bound them), and
	// the API server's estimator takes an unbounded dyn value as infinitely
	// large, which would refuse every comprehension. The bound is the
	// largest object etcd stores with its default --max-request-bytes
	// (1.5 MiB, go.etcd.io/etcd/server/v3 embed.DefaultMaxRequestBytes),
	// divided as the API server divides for a list without maxItems: by the
	// smallest serialized element plus its comma ("{}," is 3 bytes;
	// apiextensions-apiserver pkg/apiserver/schema/cel/compilation.go
	// maxCardinality). So an expression is refused when it could exceed
	// StaticCostLimit on the largest object a cluster holds. (The API
	// server's own request bound, 3 MiB, would refuse a single map() over a
	// list, which no maxItems can fix here.)
	MaxElements = uint64(etcdMaxRequestBytes / 3)
	// etcdMaxRequestBytes is embed.DefaultMaxRequestBytes.
	etcdMaxRequestBytes = 1536 * 1024
)

// Limits are the runtime cost limits a Program runs under.
type Limits struct {
	// PerCall stops one evaluation (cel.CostLimit). It is at most
	// PerObject: an evaluation is charged to the object's budget only when
	// it ends, so this is also how far the rules of one object can overrun
	// PerObject.
	PerCall uint64
	// PerObject is what all rules together may cost on one object at one
	// Apply.
	PerObject uint64
	// chargeResults: converting a rule's value costs one per value
	// converted, from PerObject (see costBudget.convert). The API server
	// has no such charge (its rules return booleans), so ClusterLimits
	// keep to its budgets.
	chargeResults bool
	// perCallWhose and perObjectWhose say whose limits these are, in
	// errors; advice, when set, what the operator can do.
	perCallWhose, perObjectWhose, advice string
}

var (
	// ClusterLimits are a ClusterBinding's: the API server's for CRD
	// validation rules (PerCallCostLimit, RuntimeCostBudget). An
	// administrator writes those rules.
	ClusterLimits = Limits{PerCall: PerCallCostLimit, PerObject: RuntimeCostBudget,
		perCallWhose:   "the API server's for one CEL expression",
		perObjectWhose: "the API server's for all validation rules of one custom resource"}
	// NamespacedLimits are a namespaced Binding's
	// (NamespacedPerCallCostLimit, NamespacedCostBudget), far below a
	// ClusterBinding's: a namespace user writes those rules, and one
	// namespace's objects must not hold up every other's.
	NamespacedLimits = Limits{PerCall: NamespacedPerCallCostLimit, PerObject: NamespacedCostBudget, chargeResults: true,
		perCallWhose:   fmt.Sprintf("a namespaced Binding's; a ClusterBinding's is %d", PerCallCostLimit),
		perObjectWhose: fmt.Sprintf("a namespaced Binding's; a ClusterBinding's is %d", RuntimeCostBudget),
		advice:         "loop over fewer or shorter lists, or have an administrator bind the API with a ClusterBinding"}
)

// check refuses limits a Program cannot run under.
func (l Limits) check() error {
	if l.PerCall == 0 || l.PerCall > l.PerObject {
		return fmt.Errorf("mutation: a per-call cost limit of %d with a per-object budget of %d: want 0 < per call <= per object", l.PerCall, l.PerObject)
	}
	return nil
}

// suffix is the advice of an error, "" or ": <advice>".
func (l Limits) suffix() string {
	if l.advice == "" {
		return ""
	}
	return ": " + l.advice
}

// compatibilityVersion is the Kubernetes version whose CEL environment
// new expressions are checked against: the release of the linked
// k8s.io/apiserver (1.37) minus one, which is what
// environment.DefaultCompatibilityVersion returns in an API server of that
// release. It is computed here rather than by calling that function
// because the function reads the binary's link-time version stamp and a
// process-wide registry: a konnector binary stamped with kbind's own
// version would get another CEL environment. TestCompatibilityVersion
// checks both agree in an unstamped binary.
func compatibilityVersion() *version.Version {
	return version.MustParse(baseversion.DefaultKubeBinaryVersion).SubtractMinor(1)
}

// envs holds the compiled CEL environments, one per direction, built once
// per process: building one validates every library declaration (tens of
// milliseconds).
var envs = sync.OnceValues(buildEnvs)

// buildEnvs extends the API server's base environment with the variables of
// each direction. The NewExpressions environment is used (the one the API
// server checks newly written expressions with), so an expression accepted
// today is also accepted by a konnector built on an older Kubernetes
// release within the compatibility window.
func buildEnvs() (map[Direction]*cel.Env, error) {
	base := environment.MustBaseEnvSet(compatibilityVersion())
	out := map[Direction]*cel.Env{}
	for dir, vars := range map[Direction][]string{Up: {objectVar}, Down: {objectVar, consumerVar}} {
		opts := make([]cel.EnvOption, 0, len(vars))
		for _, v := range vars {
			opts = append(opts, cel.Variable(v, cel.DynType))
		}
		set, err := base.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        opts,
		})
		if err != nil {
			return nil, fmt.Errorf("extending the CEL base environment for %s rules: %w", dir, err)
		}
		env, err := set.Env(environment.NewExpressions)
		if err != nil {
			return nil, fmt.Errorf("building the CEL environment for %s rules: %w", dir, err)
		}
		if env, err = env.Extend(cel.CustomTypeAdapter(objectAdapter{env.CELTypeAdapter()})); err != nil {
			return nil, fmt.Errorf("building the CEL environment for %s rules: %w", dir, err)
		}
		out[dir] = env
	}
	return out, nil
}

// programOptions are the options the API server compiles a CRD validation
// rule with (apiextensions-apiserver pkg/apiserver/schema/cel
// compilation.go compileRule), with the per-call limit of limits.
func programOptions(limits Limits) []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.CostLimit(limits.PerCall),
		cel.CostTracking(costEstimator()),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency),
	}
}

// costEstimator is the API server's estimator of its CEL libraries' costs,
// with sizes bounded by MaxElements.
func costEstimator() *library.CostEstimator {
	return &library.CostEstimator{SizeEstimator: objectSizes{}}
}

// objectSizes bounds every value reached through a variable by
// MaxElements.
type objectSizes struct{}

// EstimateSize implements checker.CostEstimator.
func (objectSizes) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	if len(element.Path()) == 0 {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: MaxElements}
}

// EstimateCallCost implements checker.CostEstimator: the library estimator
// wrapping this one prices the calls.
func (objectSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
