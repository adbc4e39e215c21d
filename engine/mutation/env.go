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
		out[dir] = env
	}
	return out, nil
}

// programOptions are the options the API server compiles a CRD validation
// rule with (apiextensions-apiserver pkg/apiserver/schema/cel
// compilation.go compileRule).
func programOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.CostLimit(PerCallCostLimit),
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
