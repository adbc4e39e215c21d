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

// Command bench measures the konnector against two local control planes:
// spec-up and status-down latency, throughput next to the direct-create
// limit with the same QPS, idle writes, writes after a restart, peak RSS and
// deletion throughput, for N namespaced objects over 10 namespaces and 2
// APIs. `make bench` runs it; it is not part of `make test`.
//
//	make bench                               # N = 100, 1000, 10000
//	make bench BENCH_FLAGS="--n 1000"        # one size
//	make bench BENCH_FLAGS="--json out.json" # the table as JSON too
//	make bench BENCH_FLAGS="--isolation Namespace" # an isolated Connection
//	make bench BENCH_FLAGS="--consumers 10,100,1000" # the provider's cost per consumer
//	make bench BENCH_FLAGS="--noisy-neighbour" # a namespace's costly mutations next to another's sync
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Run is one row of the table.
type Run struct {
	Isolation       string  `json:"isolation"`
	N               int     `json:"n"`
	ThroughputPerS  float64 `json:"throughput_per_s"`
	LimitPerS       float64 `json:"limit_per_s"`
	ThroughputRatio float64 `json:"throughput_ratio"`
	SpecUpP50Ms     float64 `json:"spec_up_p50_ms"`
	SpecUpP99Ms     float64 `json:"spec_up_p99_ms"`
	StatusDownP50Ms float64 `json:"status_down_p50_ms"`
	StatusDownP99Ms float64 `json:"status_down_p99_ms"`
	IdleWrites      int     `json:"idle_writes"`
	// The konnector's own requests per minute in the idle window, to the
	// provider (one Connection) and writes to the consumer (docs/bench.md).
	IdleProviderRequestsPerMin float64 `json:"idle_provider_requests_per_min"`
	IdleConsumerWritesPerMin   float64 `json:"idle_consumer_writes_per_min"`
	RestartWrites              int     `json:"restart_writes"`
	RestartSyncedS             float64 `json:"restart_synced_s"`
	PeakRSSMiB                 float64 `json:"peak_rss_mib"`
	LiveHeapMiB                float64 `json:"live_heap_mib"`
	// CPUSecondsPer1000 is the konnector's CPU time from the first create
	// until every status is down, per 1000 objects.
	CPUSecondsPer1000 float64 `json:"cpu_seconds_per_1000"`
	// Floor is the client floor of the same machine (measured once, before
	// the konnector starts; zero with --floor 0).
	Floor Floor `json:"floor"`
	// StartupS is from starting the konnector until every Connection is
	// Ready and the ClusterBinding Synced (setup, the same for every run).
	StartupS    float64 `json:"startup_s"`
	APIs        int     `json:"apis"`
	Connections int     `json:"connections"`
	// Providers is --providers: the providers the objects are routed to.
	Providers  int     `json:"providers"`
	DeletePerS float64 `json:"delete_per_s"`
}

// gvrs are the bound APIs: alphas and betas, or --apis of them.
var gvrs = apiGVRs(2)

// apiGVRs are n bench APIs: alphas and betas for 2, else r000s, r001s, ...
func apiGVRs(n int) []schema.GroupVersionResource {
	gvr := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "bench.example.org", Version: "v1alpha1", Resource: resource}
	}
	if n == 2 {
		return []schema.GroupVersionResource{gvr("alphas"), gvr("betas")}
	}
	out := make([]schema.GroupVersionResource, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, gvr(fmt.Sprintf("r%03ds", i)))
	}
	return out
}

const namespaces = 10

type bench struct {
	pair               *testenv.Pair
	consumer, provider dynamic.Interface
	providerLimited    dynamic.Interface
	konnectorBin       string
	qps                float32
	burst              int
	workers            int
	idle               time.Duration
	rate               float64
	konnector          *exec.Cmd
	metricsAddr        string
	pprofAddr          string
	// profiles, when set, keeps a heap profile of each run there.
	profiles string
	// memLimit, when set, is the konnector's GOMEMLIMIT.
	memLimit string
	peakRSS  float64
	startupS float64
	log      *os.File
	// isolation is the Connection's; the provider keys of consumer
	// objects come from it.
	isolation kbindv1alpha1.Isolation
	// second is the second provider of --providers 2, else nil.
	second *second
}

// benchTenant is the provider namespace of --isolation Namespace, and
// benchPrefix the prefix of --isolation Prefixed.
const (
	benchTenant = "bench-tenant"
	benchPrefix = "p"
)

// isolationFor is the Connection isolation of the --isolation flag.
func isolationFor(mode string) (kbindv1alpha1.Isolation, error) {
	switch kbindv1alpha1.IsolationMode(mode) {
	case kbindv1alpha1.IsolationNone:
		return kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}, nil
	case kbindv1alpha1.IsolationNamespace:
		return kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: benchTenant}, nil
	case kbindv1alpha1.IsolationPrefixed:
		return kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: benchPrefix}, nil
	}
	return kbindv1alpha1.Isolation{}, fmt.Errorf("--isolation %q: want None, Namespace or Prefixed", mode)
}

// consumerID is the consumer key id() of a provider copy: its own
// namespace and name without isolation, its origin markers with.
func (b *bench) consumerID(gvr schema.GroupVersionResource, u *unstructured.Unstructured) string {
	if b.isolation.Mode != kbindv1alpha1.IsolationNone {
		if origin, ok := isolation.Origin(u.GetAnnotations()); ok {
			return gvr.Resource + "/" + origin.Namespace + "/" + origin.Name
		}
	}
	return gvr.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
}

// providerKey is where the provider copy of k lives.
func (b *bench) providerKey(k key) key {
	pk, err := isolation.For(b.isolation).Object(types.NamespacedName{Namespace: k.ns, Name: k.name})
	if err != nil {
		return k
	}
	return key{gvr: k.gvr, ns: pk.Namespace, name: pk.Name}
}

// verbose prints diagnostics to stderr (-v).
var verbose bool

func main() {
	var sizes string
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	flag.StringVar(&sizes, "n", "100,1000,10000", "object counts to run, comma-separated")
	qps := flag.Float64("provider-qps", 100, "provider QPS of the konnector and of the direct-create limit")
	burst := flag.Int("provider-burst", 200, "provider burst of the konnector and of the limit")
	workers := flag.Int("workers", 4, "konnector sync workers per API")
	idle := flag.Duration("idle", 60*time.Second, "idle window in which writes are counted")
	rate := flag.Float64("rate", 0, "create consumer objects at this many per second (0: as fast as possible); spec-up latency is measured at this rate")
	bin := flag.String("konnector", "bin/konnector", "the konnector binary")
	fsync := flag.Bool("etcd-fsync", true, "let both etcds fsync every write, as real clusters do; --etcd-fsync=false takes a slow disk out of the numbers")
	flag.BoolVar(&verbose, "v", false, "print the slowest objects of each latency measurement and the write call latencies")
	keep := flag.String("keep", "", "keep the logs (konnector, API servers, etcds) in this directory")
	apis := flag.Int("apis", 2, "bound APIs (CRDs) the objects are spread over")
	flag.IntVar(&extraConnections, "connections", 1, "Connections to the provider: the bench's own and, beyond 1, idle ones (each with its own Secret and Namespace isolation namespace), all counted in startup and the idle provider requests")
	flag.BoolVar(&withShaping, "shaping", false, "bind every API projected onto the group "+shapedGroup+" with one up mutation rule (.spec.tenant from the namespace): the cost of API shaping")
	flag.BoolVar(&withMetadata, "metadata", false, "give every object two labels and an annotation, and the binding spec.metadata copying every label and annotation up (the cost of metadata sync)")
	memLimit := flag.String("gomemlimit", "", "run the konnector with this GOMEMLIMIT (e.g. 460MiB, what it sets itself in a container limited to 512Mi)")
	flag.IntVar(&floorObjects, "floor", 1000, "measure the client floor with this many objects before the konnector starts: the CPU the sync's requests and watch events cost per object on this machine with no sync logic (0: skip)")
	profiles := flag.String("profiles", "", "keep the konnector's CPU profiles and heap of each run in this directory (cpu-n<N>-<i>.pb.gz, heap-n<N>.pb.gz, for go tool pprof); with --consumers, the first konnector's over each idle window (cpu-consumers-n<N>-<i>.pb.gz, heap-consumers-n<N>.pb.gz)")
	var co consumersOptions
	flag.StringVar(&co.sizes, "consumers", "", "provider-scale mode: connect this many consumers to one provider, in steps (e.g. 10,100,1000), and print the provider's cost per consumer instead of the sync table")
	flag.IntVar(&co.perCluster, "consumers-per-cluster", 100, "with --consumers: consumers sharing one consumer cluster and konnector (and APIs the provider exports)")
	flag.IntVar(&co.objects, "consumer-objects", 3, "with --consumers: objects each consumer creates")
	flag.IntVar(&co.schemaKiB, "schema-kib", 0, "with --consumers: give each exported CRD's spec schema about this many KiB of documented properties, as real providers' CRDs carry (0: the bench's 2 KiB CRDs)")
	flag.DurationVar(&co.herdDown, "herd-down", 40*time.Second, "with --consumers: restart the provider API server for this long with every consumer connected, and measure the recovery (0: no restart)")
	flag.StringVar(&co.konnector, "konnector-bench", "bin/konnector-bench", "with --consumers: the konnector built with -tags kbindbench (one identity per Connection)")
	flag.StringVar(&co.plugin, "plugin", "bin/kubectl-kbind", "with --consumers: kubectl-kbind, which grants each consumer")
	flag.IntVar(&providers, "providers", 1, "providers serving the bench APIs, 1 or 2: with 2, a second provider cluster and Connection (same isolation), and two ClusterBindings routing alternate namespaces (half the objects) one to each; the limit is then both providers' direct creates at once, each at the provider QPS")
	importSizes := flag.String("import", "", "import mode: for each of these counts (e.g. 10000), a provider holding that many objects before the konnector connects with providerObjects: Import (Namespace isolation); prints the import time, consumer writes per object, provider writes and a restart's writes instead of the sync table")
	var no noisyOptions
	noisy := flag.Bool("noisy-neighbour", false, "noisy-neighbour mode: a victim namespace's spec-up latency, idle and while an attacker namespace's Binding carries 32 up rules of nested comprehensions (the costliest a namespace user may write) over objects it keeps changing; prints both latencies and the konnector's CPU-s per attacker object change instead of the sync table")
	flag.IntVar(&no.items, "noisy-items", maxItems, "with --noisy-neighbour: items in each attacker object's list (default: as many as an object holds)")
	flag.IntVar(&no.objects, "noisy-objects", 8, "with --noisy-neighbour: the attacker's objects")
	flag.IntVar(&no.rules, "noisy-rules", 32, "with --noisy-neighbour: the attacker Binding's up rules (0: its objects synced without rules, -1: no attacker Binding, its writes alone; for comparison)")
	flag.Float64Var(&no.changes, "noisy-changes", 2, "with --noisy-neighbour: attacker object changes per second, the objects in turn")
	flag.IntVar(&no.victims, "noisy-victims", 20, "with --noisy-neighbour: victim objects created in each window, one by one")
	flag.DurationVar(&no.victimEvery, "noisy-victim-every", 500*time.Millisecond, "with --noisy-neighbour: the time between two victim creates")
	flag.DurationVar(&no.victimWait, "noisy-victim-wait", 2*time.Minute, "with --noisy-neighbour: how long the victim's objects are waited for after the last create")
	mode := flag.String("isolation", "None", "the Connection's isolation mode: None, Namespace (provider namespace "+benchTenant+") or Prefixed (prefix "+benchPrefix+")")
	flag.Parse()
	if *apis < 1 || extraConnections < 1 || providers < 1 || providers > 2 {
		fmt.Fprintln(os.Stderr, "bench: --apis and --connections must be at least 1, --providers 1 or 2")
		os.Exit(2)
	}
	if co.sizes != "" {
		co.idle, co.fsync, co.keep, co.jsonOut, co.profiles = *idle, *fsync, *keep, *jsonOut, *profiles
		if err := runConsumers(co); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	gvrs = apiGVRs(*apis)
	if *noisy {
		no.konnector, no.qps, no.burst, no.workers, no.fsync, no.keep, no.jsonOut, no.profiles = *bin, float32(*qps), *burst, *workers, *fsync, *keep, *jsonOut, *profiles
		if err := runNoisy(no); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *importSizes != "" {
		if err := runImports(*importSizes, *jsonOut, float32(*qps), *burst, *bin, *fsync, *keep); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	iso, err := isolationFor(*mode)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}

	if err := run(sizes, *jsonOut, float32(*qps), *burst, *workers, *idle, *rate, *bin, *fsync, *keep, *profiles, *memLimit, iso); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(sizes, jsonOut string, qps float32, burst, workers int, idle time.Duration, rate float64, bin string, fsync bool, keep, profiles, memLimit string,
	iso kbindv1alpha1.Isolation) error {
	ctx := context.Background()
	dir, err := keep, os.MkdirAll(keep, 0o755)
	if keep == "" {
		dir, err = os.MkdirTemp("", "kbind-bench-")
		defer func() { _ = os.RemoveAll(dir) }()
	}
	if err != nil {
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, g := range gvrs {
		kind := strings.ToUpper(g.Resource[:1]) + strings.TrimSuffix(g.Resource[1:], "s")
		crds = append(crds, enginetest.CRD(g.Resource, strings.TrimSuffix(g.Resource, "s"), kind, g.Group, apiextensionsv1.NamespaceScoped, true))
	}
	opts := testenv.PairOptions{Dir: dir, ProviderCRDs: crds}
	if floorObjects > 0 {
		opts.ConsumerCRDs = append(opts.ConsumerCRDs, floorCRD())
	}
	if !fsync {
		opts.EtcdArgs = map[string][]string{"unsafe-no-fsync": {"true"}}
	}
	pair, err := testenv.StartPair(opts)
	if err != nil {
		return err
	}
	defer pair.Stop()
	b := &bench{pair: pair, konnectorBin: bin, qps: qps, burst: burst, workers: workers, idle: idle, rate: rate, isolation: iso, profiles: profiles, memLimit: memLimit}
	if providers == 2 {
		if b.second, err = startSecond(dir, crds, opts.EtcdArgs, qps, burst); err != nil {
			return err
		}
		defer func() { _ = b.second.cluster.Stop() }()
	}
	if profiles != "" {
		if err := os.MkdirAll(profiles, 0o755); err != nil {
			return err
		}
	}
	fast := func(c *rest.Config) *rest.Config { c = rest.CopyConfig(c); c.QPS, c.Burst = 2000, 4000; return c }
	if b.consumer, err = dynamic.NewForConfig(fast(pair.Consumer.Config)); err != nil {
		return err
	}
	if b.provider, err = dynamic.NewForConfig(fast(pair.Provider.Config)); err != nil {
		return err
	}
	limited := rest.CopyConfig(pair.Provider.Config)
	limited.QPS, limited.Burst = qps, burst
	if b.providerLimited, err = dynamic.NewForConfig(limited); err != nil {
		return err
	}
	if b.log, err = os.Create(filepath.Join(dir, "konnector.log")); err != nil {
		return err
	}
	var floor Floor
	if floorObjects > 0 {
		fmt.Fprintf(os.Stderr, "bench: client floor, %d objects ...\n", floorObjects)
		if floor, err = measureFloor(ctx, pair.Consumer.Config, floorObjects, workers*len(gvrs)); err != nil {
			return fmt.Errorf("client floor: %w", err)
		}
	}
	if err := b.setup(ctx); err != nil {
		return err
	}
	defer b.stopKonnector(syscall.SIGTERM)

	var runs []Run
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("bad --n value %q", s)
		}
		fmt.Fprintf(os.Stderr, "bench: N=%d ...\n", n)
		r, err := b.runN(ctx, n)
		if err != nil {
			return fmt.Errorf("run with N=%d: %w", n, err)
		}
		r.Isolation = string(iso.Mode)
		r.StartupS, r.APIs, r.Connections, r.Providers = b.startupS, len(gvrs), extraConnections+providers-1, providers
		r.Floor = floor
		runs = append(runs, r)
	}
	printTable(runs, qps, burst, workers, rate, fsync, iso)
	if jsonOut != "" {
		data, _ := json.MarshalIndent(map[string]any{"runs": runs}, "", "  ")
		if err := os.WriteFile(jsonOut, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) setup(ctx context.Context) error {
	cs := kubernetes.NewForConfigOrDie(b.pair.Consumer.Config)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kbind"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if b.isolation.Mode == kbindv1alpha1.IsolationNamespace {
		// The provider admin's namespace (docs/isolation.md), on each provider.
		cfgs := []*rest.Config{b.pair.Provider.Config}
		if b.second != nil {
			cfgs = append(cfgs, b.second.cluster.Config)
		}
		for _, cfg := range cfgs {
			pcs := kubernetes.NewForConfigOrDie(cfg)
			if _, err := pcs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchTenant}}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	isoYAML, err := json.Marshal(b.isolation)
	if err != nil {
		return err
	}
	apis := ""
	for _, g := range gvrs {
		apis += "  - name: " + g.Resource + "." + g.Group + "\n"
		if withShaping {
			apis += "    projection: {group: " + shapedGroup + "}\n" +
				"    mutations: {up: [{path: .spec.tenant, expression: object.metadata.namespace}]}\n"
		}
	}
	if withMetadata {
		apis += "  metadata: {labels: [\"*\"], annotations: [\"*\"]}\n"
	}
	selector, secondManifest := b.secondManifest(string(isoYAML), apis)
	manifest := enginetest.ConnectionManifestWith("provider", "provider", b.pair.Provider.Kubeconfig, "  isolation: "+string(isoYAML)+"\n") + `---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: bench}
spec:
  connectionRef: {name: provider}
` + selector + "  apis:\n" + apis + secondManifest
	idle, err := b.idleConnections(ctx)
	if err != nil {
		return err
	}
	manifest += idle
	file := filepath.Join(b.pair.Dir, "setup.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		return err
	}
	if out, err := testenv.Kubectl(ctx, b.pair.KubeconfigPath, "--context=consumer", "apply", "-f", file); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	start := time.Now()
	if err := b.startKonnector(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"--context=consumer", "wait", "--for=condition=Ready", "connection", "--all", "--timeout=300s"},
		{"--context=consumer", "wait", "--for=condition=Synced", "clusterbinding", "--all", "--timeout=300s"},
	} {
		if out, err := testenv.Kubectl(ctx, b.pair.KubeconfigPath, args...); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
	}
	b.startupS = time.Since(start).Seconds()
	return nil
}

// idleConnections creates, for --connections beyond 1, the provider
// namespaces of the idle Connections and returns their consumer manifests:
// a Secret each (the provider kubeconfig) and a Connection under Namespace
// isolation in its own provider namespace, binding nothing.
func (b *bench) idleConnections(ctx context.Context) (string, error) {
	pcs := kubernetes.NewForConfigOrDie(b.pair.Provider.Config)
	var out strings.Builder
	for i := 1; i < extraConnections; i++ {
		name := fmt.Sprintf("idle-%03d", i)
		if _, err := pcs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + name}}, metav1.CreateOptions{}); err != nil {
			return "", err
		}
		out.WriteString("---\n" + enginetest.ConnectionManifestWith(name, name, b.pair.Provider.Kubeconfig,
			"  isolation: {mode: Namespace, namespace: bench-"+name+"}\n"))
	}
	return out.String(), nil
}

func (b *bench) startKonnector() error {
	addr, err := harness.LoopbackAddr()
	if err != nil {
		return err
	}
	b.metricsAddr = addr
	if b.pprofAddr, err = harness.LoopbackAddr(); err != nil {
		return err
	}
	b.konnector = exec.Command(b.konnectorBin, "--kubeconfig", b.pair.Consumer.KubeconfigPath,
		"--metrics-bind-address", addr, "--health-probe-bind-address", "127.0.0.1:0", "--pprof-bind-address", b.pprofAddr,
		"--provider-qps", fmt.Sprint(b.qps), "--provider-burst", fmt.Sprint(b.burst),
		// One consumer client serves every provider: with two, it gets
		// twice the QPS and burst, as the providers' side has (a client
		// per Connection), so that it is not the limit on its own.
		"--consumer-qps", fmt.Sprint(b.qps*float32(providers)), "--consumer-burst", fmt.Sprint(b.burst*providers),
		"--workers", fmt.Sprint(b.workers))
	b.konnector.Stdout, b.konnector.Stderr = b.log, b.log
	if b.memLimit != "" {
		b.konnector.Env = append(os.Environ(), "GOMEMLIMIT="+b.memLimit)
	}
	return b.konnector.Start()
}

func (b *bench) stopKonnector(sig syscall.Signal) {
	if b.konnector == nil || b.konnector.Process == nil {
		return
	}
	b.sampleRSS()
	_ = b.konnector.Process.Signal(sig)
	_, _ = b.konnector.Process.Wait()
	b.konnector = nil
}

// sampleRSS records the konnector's peak resident set (VmHWM).
func (b *bench) sampleRSS() {
	if b.konnector == nil || b.konnector.Process == nil {
		return
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.konnector.Process.Pid))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			if mib := kb / 1024; mib > b.peakRSS {
				b.peakRSS = mib
			}
		}
	}
}

// recorder counts watch events and remembers when each key was first seen
// in a state.
type recorder struct {
	mu     sync.Mutex
	seen   map[string]time.Time
	writes int
}

func newRecorder() *recorder { return &recorder{seen: map[string]time.Time{}} }

// watch records events of gvr from now on: it lists first and watches from
// the list's resourceVersion, so existing objects are not counted.
func (r *recorder) watch(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, match func(watch.EventType, *unstructured.Unstructured) bool) error {
	return r.watchKeyed(ctx, c, gvr, match, func(u *unstructured.Unstructured) string {
		return gvr.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
	})
}

// watchKeyed is watch with the key of an object given by keyOf.
func (r *recorder) watchKeyed(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource,
	match func(watch.EventType, *unstructured.Unstructured) bool, keyOf func(*unstructured.Unstructured) string) error {
	list, err := c.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	w, err := c.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return err
	}
	go r.follow(w, match, keyOf)
	return nil
}

// follow records the events of w until it ends: each one a write, and
// when each key was first seen in a state match accepts.
func (r *recorder) follow(w watch.Interface, match func(watch.EventType, *unstructured.Unstructured) bool, keyOf func(*unstructured.Unstructured) string) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		now := time.Now()
		key := keyOf(u)
		r.mu.Lock()
		r.writes++
		if _, ok := r.seen[key]; !ok && match(ev.Type, u) {
			r.seen[key] = now
		}
		r.mu.Unlock()
	}
}

func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k := range r.seen {
		if strings.Contains(k, prefix) {
			n++
		}
	}
	return n
}

func (r *recorder) times() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.seen))
	for k, v := range r.seen {
		out[k] = v
	}
	return out
}

func (r *recorder) writeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

func waitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// extraConnections is --connections: the bench's Connection and the idle
// ones.
var extraConnections = 1

// withMetadata is --metadata: objects carry labels and an annotation the
// binding copies up.
var withMetadata bool

// withShaping is --shaping: every API is projected onto shapedGroup (same
// kind and plural) and has one up mutation rule.
var withShaping bool

// floorObjects is --floor: the objects the client floor is measured with.
var floorObjects = 1000

const shapedGroup = "shaped.bench.example.org"

// onConsumer is the consumer API of a bench API: itself, or its
// projection with --shaping.
func onConsumer(g schema.GroupVersionResource) schema.GroupVersionResource {
	if withShaping {
		g.Group = shapedGroup
	}
	return g
}

func object(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       strings.ToUpper(gvr.Resource[:1]) + strings.TrimSuffix(gvr.Resource[1:], "s"),
		"spec":       map[string]any{"size": int64(len(name))},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	if withMetadata {
		u.SetLabels(map[string]string{"team": ns, "app.kubernetes.io/name": "bench"})
		u.SetAnnotations(map[string]string{"example.org/owner": name})
	}
	return u
}

// keys lists the N objects of a run: spread over 10 namespaces and 2 APIs.
type key struct {
	gvr      schema.GroupVersionResource
	ns, name string
}

func keysFor(prefix string, n int) []key {
	out := make([]key, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, key{gvr: gvrs[i%len(gvrs)], ns: fmt.Sprintf("%s-%d", prefix, i%namespaces), name: fmt.Sprintf("obj-%d", i)})
	}
	return out
}

func (k key) id() string { return k.gvr.Resource + "/" + k.ns + "/" + k.name }

// forEach runs fn for every key with 16 parallel writers, at rate keys
// per second (0: as fast as they go), and returns when each call started.
func forEach(keys []key, rate float64, fn func(key) error) (map[string]time.Time, error) {
	started := make(map[string]time.Time, len(keys))
	var callDurations []time.Duration
	defer func() {
		if verbose && len(callDurations) > 0 {
			slices.Sort(callDurations)
			fmt.Fprintf(os.Stderr, "bench: %d writes, call p50 %s p99 %s\n", len(callDurations),
				callDurations[len(callDurations)/2].Round(time.Millisecond), callDurations[len(callDurations)*99/100].Round(time.Millisecond))
		}
	}()
	var mu sync.Mutex
	var firstErr error
	work := make(chan key)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				t0 := time.Now()
				err := fn(k)
				done := time.Now()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				// The clock starts when the API server has accepted the
				// write: only then can the konnector see it.
				started[k.id()] = done
				callDurations = append(callDurations, done.Sub(t0))
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for i, k := range keys {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		work <- k
	}
	close(work)
	wg.Wait()
	return started, firstErr
}

// createAll creates the objects of keys through c.
// createAll creates the objects of keys through c, each at the API gvr
// maps its bench API to (onConsumer on the consumer).
func createAll(ctx context.Context, c dynamic.Interface, gvr func(schema.GroupVersionResource) schema.GroupVersionResource, keys []key, rate float64) (map[string]time.Time, error) {
	return forEach(keys, rate, func(k key) error {
		_, err := c.Resource(gvr(k.gvr)).Namespace(k.ns).Create(ctx, object(gvr(k.gvr), k.ns, k.name), metav1.CreateOptions{})
		return err
	})
}

// ensureNamespaces creates the run's namespaces, each labelled with the
// provider its objects are routed to (routeLabel).
func ensureNamespaces(ctx context.Context, cfg *rest.Config, prefix string) error {
	cs := kubernetes.NewForConfigOrDie(cfg)
	for i := 0; i < namespaces; i++ {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{routeLabel: strconv.Itoa(i % providers)}}}
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
	}
	return nil
}

func percentiles(created, seen map[string]time.Time) (p50, p99 float64) {
	type sample struct {
		key string
		at  time.Time
		ms  float64
	}
	var lat []sample
	var first time.Time
	for k, t0 := range created {
		if t1, ok := seen[k]; ok {
			lat = append(lat, sample{k, t0, float64(t1.Sub(t0).Microseconds()) / 1000})
			if first.IsZero() || t0.Before(first) {
				first = t0
			}
		}
	}
	if len(lat) == 0 {
		return 0, 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i].ms < lat[j].ms })
	if verbose {
		for _, s := range lat[max(0, len(lat)-10):] {
			fmt.Fprintf(os.Stderr, "bench: slow: %s at +%s took %.0f ms\n", s.key, s.at.Sub(first).Round(time.Millisecond), s.ms)
		}
	}
	at := func(q float64) float64 { return lat[int(q*float64(len(lat)-1))].ms }
	return at(0.50), at(0.99)
}

// countWrites starts counting every write to the synced objects of both
// clusters.
func (b *bench) countWrites(ctx context.Context) (*recorder, error) {
	rec := newRecorder()
	for _, c := range append([]dynamic.Interface{b.consumer}, b.providerClients()...) {
		for _, g := range gvrs {
			if c == b.consumer {
				g = onConsumer(g)
			}
			if err := rec.watch(ctx, c, g, func(watch.EventType, *unstructured.Unstructured) bool { return false }); err != nil {
				return nil, err
			}
		}
	}
	return rec, nil
}

// runN measures one run of n objects, in stages: spec up, status down (with
// the CPU and live heap they took), the provider's own limit, the idle
// window, a restart and the deletion of everything.
func (b *bench) runN(ctx context.Context, n int) (Run, error) {
	r := Run{N: n}
	prefix := fmt.Sprintf("n%d", n)
	keys := keysFor(prefix, n)
	timeout := 10*time.Minute + time.Duration(n)*50*time.Millisecond
	if err := ensureNamespaces(ctx, b.pair.Consumer.Config, prefix); err != nil {
		return r, err
	}
	// wctx bounds the run's watches.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()

	up, err := b.watchSpecUp(wctx, prefix)
	if err != nil {
		return r, err
	}
	cpuBefore, err := scrapeGauge(b.metricsAddr, "process_cpu_seconds_total")
	if err != nil {
		return r, err
	}
	// With --profiles: CPU profiles of the whole measured window.
	stopProfile := cpuProfile(b.pprofAddr, b.profiles, fmt.Sprintf("n%d", n), 10*time.Second)
	defer stopProfile()
	if err := b.specUp(ctx, up, prefix, keys, timeout, &r); err != nil {
		return r, err
	}
	if err := b.statusDown(ctx, wctx, prefix, keys, timeout, &r); err != nil {
		return r, err
	}
	cpuAfter, err := scrapeGauge(b.metricsAddr, "process_cpu_seconds_total")
	if err != nil {
		return r, err
	}
	stopProfile()
	r.CPUSecondsPer1000 = (cpuAfter - cpuBefore) / float64(n) * 1000
	heap, err := liveHeap(b.pprofAddr, b.metricsAddr, b.profiles, fmt.Sprintf("n%d", n))
	if err != nil {
		return r, err
	}
	r.LiveHeapMiB = heap / (1 << 20)

	if err := b.limit(ctx, prefix, &r); err != nil {
		return r, err
	}
	if err := b.idleWindow(wctx, &r); err != nil {
		return r, err
	}
	if err := b.restart(wctx, &r); err != nil {
		return r, err
	}
	if err := b.deletion(ctx, prefix, timeout, &r); err != nil {
		return r, err
	}
	r.PeakRSSMiB = b.peakRSS
	return r, nil
}

// watchSpecUp records, until ctx ends, when each consumer object of the
// run (namespaces prefix-*) is ADDED on the provider.
func (b *bench) watchSpecUp(ctx context.Context, prefix string) (*recorder, error) {
	up := newRecorder()
	for _, g := range gvrs {
		for _, c := range b.providerClients() {
			if err := up.watchKeyed(ctx, c, g, func(_ watch.EventType, u *unstructured.Unstructured) bool {
				return strings.Contains(b.consumerID(g, u), "/"+prefix+"-")
			}, func(u *unstructured.Unstructured) string { return b.consumerID(g, u) }); err != nil {
				return nil, err
			}
		}
	}
	return up, nil
}

// specUp creates the run's objects on the consumer and waits until up
// saw every copy on the provider: the throughput and the spec-up latency.
func (b *bench) specUp(ctx context.Context, up *recorder, prefix string, keys []key, timeout time.Duration, r *Run) error {
	start := time.Now()
	created, err := createAll(ctx, b.consumer, onConsumer, keys, b.rate)
	if err != nil {
		return err
	}
	if err := waitFor(timeout, "every object on the provider", func() bool { b.sampleRSS(); return up.count(prefix+"-") >= r.N }); err != nil {
		return err
	}
	r.ThroughputPerS = float64(r.N) / time.Since(start).Seconds()
	r.SpecUpP50Ms, r.SpecUpP99Ms = percentiles(created, up.times())
	return nil
}

// statusDown patches each provider copy's status and waits until every
// consumer object shows it (watched until wctx ends): the status-down
// latency.
func (b *bench) statusDown(ctx, wctx context.Context, prefix string, keys []key, timeout time.Duration, r *Run) error {
	down := newRecorder()
	for _, g := range gvrs {
		if err := down.watch(wctx, b.consumer, onConsumer(g), func(_ watch.EventType, u *unstructured.Unstructured) bool {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			return strings.HasPrefix(u.GetNamespace(), prefix+"-") && phase == "Ready"
		}); err != nil {
			return err
		}
	}
	patched, err := forEach(keys, 0, func(k key) error {
		pk := b.providerKey(k)
		_, err := b.providerFor(k.ns).Resource(k.gvr).Namespace(pk.ns).Patch(ctx, pk.name, "application/merge-patch+json",
			[]byte(`{"status":{"phase":"Ready"}}`), metav1.PatchOptions{}, "status")
		return err
	})
	if err != nil {
		return err
	}
	if err := waitFor(timeout, "every status on the consumer", func() bool { b.sampleRSS(); return down.count(prefix+"-") >= r.N }); err != nil {
		return err
	}
	r.StatusDownP50Ms, r.StatusDownP99Ms = percentiles(patched, down.times())
	return nil
}

// limit measures the limit: the same N objects created directly on the
// provider by a plain client with the konnector's provider QPS; then
// deletes them.
func (b *bench) limit(ctx context.Context, prefix string, r *Run) error {
	if err := ensureNamespaces(ctx, b.pair.Provider.Config, "limit-"+prefix); err != nil {
		return err
	}
	if b.second != nil {
		if err := ensureNamespaces(ctx, b.second.cluster.Config, "limit-"+prefix); err != nil {
			return err
		}
	}
	took, err := b.limitCreate(ctx, keysFor("limit-"+prefix, r.N))
	if err != nil {
		return err
	}
	r.LimitPerS = float64(r.N) / took.Seconds()
	r.ThroughputRatio = r.ThroughputPerS / r.LimitPerS
	b.deleteLimitObjects(ctx, prefix)
	return nil
}

// idleWindow counts, over the idle window after convergence, the writes
// to the synced objects on both sides and the konnector's own requests.
func (b *bench) idleWindow(wctx context.Context, r *Run) error {
	time.Sleep(5 * time.Second) // let the last status counts settle before the window opens
	idle, err := b.countWrites(wctx)
	if err != nil {
		return err
	}
	requestsBefore, err := scrapeRequests(b.metricsAddr)
	if err != nil {
		return err
	}
	time.Sleep(b.idle)
	r.IdleWrites = idle.writeCount()
	requestsAfter, err := scrapeRequests(b.metricsAddr)
	if err != nil {
		return err
	}
	idleRequests := requestsAfter.since(requestsBefore)
	perMin := time.Minute.Seconds() / b.idle.Seconds()
	for _, host := range b.providerHosts() {
		r.IdleProviderRequestsPerMin += idleRequests.of(host, false) * perMin
	}
	r.IdleConsumerWritesPerMin = idleRequests.of(b.pair.Consumer.Config.Host, true) * perMin
	fmt.Printf("N=%d idle %s: the konnector's requests (host method count): %s\n", r.N, b.idle, idleRequests)
	return nil
}

// restart kills a converged konnector and starts it again: the time until
// it is synced again and the writes in its first 30 s.
func (b *bench) restart(wctx context.Context, r *Run) error {
	b.stopKonnector(syscall.SIGKILL)
	restart, err := b.countWrites(wctx)
	if err != nil {
		return err
	}
	restartStart := time.Now()
	if err := b.startKonnector(); err != nil {
		return err
	}
	// Synced again: every API's syncer runs with synced informers and has
	// worked through the objects its informers delivered.
	// A konnector without kbind_syncer_ready (a build from before it, to
	// compare with) gets no restart time: -1.
	r.RestartSyncedS = -1
	if err := waitFor(2*time.Minute, "the restarted konnector synced", func() bool {
		b.sampleRSS()
		ready, depth, err := syncedState(b.metricsAddr, onConsumer(gvrs[0]).Group)
		return err == nil && ready == len(gvrs)*providers && depth == 0
	}); err != nil {
		fmt.Fprintf(os.Stderr, "bench: N=%d: no restart time: %v\n", r.N, err)
	} else {
		r.RestartSyncedS = time.Since(restartStart).Seconds()
	}
	time.Sleep(time.Until(restartStart.Add(30 * time.Second)))
	b.sampleRSS()
	r.RestartWrites = restart.writeCount()
	return nil
}

// deletion deletes every consumer object of the run; done when the last
// one is gone (each waits for its provider copy).
func (b *bench) deletion(ctx context.Context, prefix string, timeout time.Duration, r *Run) error {
	delStart := time.Now()
	for _, g := range gvrs {
		for i := 0; i < namespaces; i++ {
			// A collection of thousands outlasts the API server's request
			// timeout (it goes on deleting): the same call again finishes
			// the rest.
			if err := retryOnServerTimeout(func() error {
				return b.consumer.Resource(onConsumer(g)).Namespace(fmt.Sprintf("%s-%d", prefix, i)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			}); err != nil {
				return err
			}
		}
	}
	if err := waitFor(timeout, "every consumer object deleted", func() bool {
		b.sampleRSS()
		total := 0
		for _, g := range gvrs {
			for i := 0; i < namespaces; i++ {
				l, err := b.consumer.Resource(onConsumer(g)).Namespace(fmt.Sprintf("%s-%d", prefix, i)).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false
				}
				total += len(l.Items)
			}
		}
		return total == 0
	}); err != nil {
		return err
	}
	r.DeletePerS = float64(r.N) / time.Since(delStart).Seconds()
	return nil
}

func printTable(runs []Run, qps float32, burst, workers int, rate float64, fsync bool, iso kbindv1alpha1.Isolation) {
	disk := "etcd fsync off"
	if fsync {
		disk = "etcd fsync on"
	}
	meta := "off"
	if withMetadata {
		meta = "on (2 labels, 1 annotation per object)"
	}
	if withShaping {
		meta += ", shaping on (a projection and an up mutation rule per API)"
	}
	fmt.Printf("\nkbind bench: provider QPS %.0f, burst %d, %d workers per API, 10 namespaces, %d APIs, %d provider(s), %d Connection(s), %s, isolation %s, metadata sync %s\n",
		qps, burst, workers, len(gvrs), providers, extraConnections+providers-1, disk, iso.Mode, meta)
	if len(runs) > 0 {
		fmt.Printf("startup: %.1f s from starting the konnector until every Connection was Ready and every ClusterBinding Synced\n", runs[0].StartupS)
	}
	fmt.Println()
	if rate > 0 {
		fmt.Printf("consumer objects created at %.0f/s\n", rate)
	}
	fmt.Println("objects/s: consumer creates until every copy is on the provider; limit/s: the same creates straight to the provider with the same QPS")
	if providers == 2 {
		fmt.Println("two providers: alternate namespaces (half the objects) routed to each; limit/s: both providers' direct creates at once, each at the provider QPS; prov req/min: both providers")
	}
	fmt.Println("idle prov req/min: the konnector's requests to the provider per minute while idle; idle cons w/min: its writes to the consumer")
	fmt.Println("RSS MiB: the konnector's peak resident set; heap MiB: its live heap after a forced GC once every status is down")
	if len(runs) > 0 && runs[0].Floor.CPUSecondsPer1000 > 0 {
		f := runs[0].Floor
		fmt.Printf("CPU s/1k: the konnector's CPU from the first create until every status is down, per 1000 objects; floor s/1k: what a finalizer patch (%.0f µs), an apply (%.0f µs), a status update (%.0f µs) and %d watch events (%.0f µs each) cost a plain client on this machine\n",
			f.FinalizerPatchUs, f.ApplyUs, f.StatusUpdateUs, floorEvents, f.WatchEventUs)
	}
	fmt.Printf("%8s %12s %10s %7s %10s %10s %12s %12s %6s %9s %9s %9s %9s %9s %9s %9s %10s %10s %14s %14s\n",
		"N", "objects/s", "limit/s", "ratio", "up p50ms", "up p99ms", "down p50ms", "down p99ms", "idle", "restart", "restart s", "RSS MiB", "MiB/1000",
		"heap MiB", "KiB/obj", "CPU s/1k", "floor s/1k", "delete/s", "prov req/min", "cons w/min")
	for _, r := range runs {
		fmt.Printf("%8d %12.1f %10.1f %7.2f %10.0f %10.0f %12.0f %12.0f %6d %9d %9.1f %9.0f %9.1f %9.1f %9.2f %9.2f %10.2f %10.1f %14.1f %14.1f\n",
			r.N, r.ThroughputPerS, r.LimitPerS, r.ThroughputRatio, r.SpecUpP50Ms, r.SpecUpP99Ms,
			r.StatusDownP50Ms, r.StatusDownP99Ms, r.IdleWrites, r.RestartWrites, r.RestartSyncedS, r.PeakRSSMiB,
			r.PeakRSSMiB/float64(r.N)*1000, r.LiveHeapMiB, r.LiveHeapMiB*1024/float64(r.N), r.CPUSecondsPer1000, r.Floor.CPUSecondsPer1000, r.DeletePerS,
			r.IdleProviderRequestsPerMin, r.IdleConsumerWritesPerMin)
	}
}

// retryOnServerTimeout calls do again, up to 10 times, while the API server
// answers that it ran out of time but may still be processing the request.
func retryOnServerTimeout(do func() error) error {
	var err error
	for range 10 {
		if err = do(); !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
			return err
		}
	}
	return err
}
