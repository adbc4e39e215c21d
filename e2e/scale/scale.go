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

// Package scale runs many kbind consumers against one provider API server
// and measures what each costs the provider: its API server's memory and
// CPU, open watches, requests, watch events and etcd's objects and bytes
// (docs/bench.md "One provider, many consumers"). `make bench
// BENCH_FLAGS="--consumers 10,100,1000"` prints the table, and the test of
// this package holds, at a small N, that what one consumer costs does not
// depend on how many there are.
//
// A consumer is what a real one is to the provider: a ServiceAccount, a
// namespace, RBAC and a token made by `kubectl kbind grant`, a Connection
// under Namespace isolation with a heartbeat Lease, a ClusterBinding of
// one API and a few objects. One machine cannot run a thousand consumer
// clusters, so several consumers share one: each consumer cluster runs one
// konnector built with the kbindbench tag, which gives every Connection an
// identity of its own (engine/connection/identity_bench.go) — the only
// seam; everything the provider sees is per consumer. A consumer cluster
// can serve an API to one Connection only, so the provider exports
// PerCluster APIs and the i-th consumer binds API i mod PerCluster from
// consumer cluster i / PerCluster: consumers of different clusters share
// APIs, as tenants of one provider do.
package scale

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Group is the group of the provider's exported APIs.
const Group = "scale.example.org"

// WorkNamespace is the consumer namespace of every consumer's objects.
const WorkNamespace = "work"

// Options configure an Env.
type Options struct {
	// Dir receives the clusters' and konnectors' files. Required.
	Dir string
	// PerCluster is how many consumers share one consumer cluster, and
	// how many APIs the provider exports.
	PerCluster int
	// Objects is how many objects each consumer creates.
	Objects int
	// Konnector is a konnector binary built with -tags kbindbench, Plugin
	// kubectl-kbind.
	Konnector, Plugin string
	// EtcdArgs are extra etcd flags for every cluster.
	EtcdArgs map[string][]string
	// SchemaKiB, when set, gives each exported CRD's spec schema about
	// this many KiB of documented properties, as real providers' CRDs
	// carry (tens to hundreds of KiB); without it a CRD is about 2 KiB.
	SchemaKiB int
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// Env is one provider and the consumers connected to it so far.
type Env struct {
	opts     Options
	Provider *testenv.Cluster
	provider *clients
	clusters []*consumerCluster
	// consumers is how many are connected.
	consumers int
}

type clients struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	// requests and lists count the bench's own requests, which the
	// figures of the API server it talks to leave out.
	requests, lists, throttled atomic.Int64
}

// counting counts the requests of a client, its LISTs (GETs of the
// exported APIs: the bench lists them only) and its answers of 429.
type counting struct {
	next http.RoundTripper
	c    *clients
}

func (t counting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err // never answered: the API server did not count it
	}
	t.c.requests.Add(1)
	if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/apis/"+Group+"/") {
		t.c.lists.Add(1)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		t.c.throttled.Add(1)
	}
	return resp, nil
}

func newClients(cfg *rest.Config) (*clients, error) {
	c := &clients{}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{next: rt, c: c} })
	var err error
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// consumerCluster is one consumer control plane and its konnector.
type consumerCluster struct {
	cluster   *testenv.Cluster
	clients   *clients
	konnector *harness.Process
	// metricsAddr is the konnector's metrics endpoint, pprofAddr its
	// /debug/pprof.
	metricsAddr, pprofAddr string
}

// API is the i-th exported API of the provider.
func API(i int) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: fmt.Sprintf("s%03ds", i)}
}

func kindOf(gvr schema.GroupVersionResource) string {
	return "S" + strings.TrimSuffix(strings.TrimPrefix(gvr.Resource, "s"), "s")
}

// Consumer names the i-th consumer: its grant, Connection and
// ClusterBinding.
func Consumer(i int) string { return fmt.Sprintf("c%04d", i) }

// Start starts the provider with its exported APIs.
func Start(opts Options) (*Env, error) {
	if opts.Dir == "" || opts.PerCluster < 1 || opts.Konnector == "" || opts.Plugin == "" {
		return nil, errors.New("scale: Options need Dir, PerCluster, Konnector and Plugin")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range opts.PerCluster {
		gvr := API(i)
		kind := kindOf(gvr)
		crd := enginetest.CRD(gvr.Resource, strings.ToLower(kind), kind, Group, apiextensionsv1.NamespaceScoped, true)
		padSchema(crd, opts.SchemaKiB)
		crds = append(crds, crd)
	}
	provider, err := testenv.StartCluster("provider", testenv.ClusterOptions{Dir: opts.Dir, CRDs: crds, EtcdArgs: opts.EtcdArgs})
	if err != nil {
		return nil, err
	}
	e := &Env{opts: opts, Provider: provider}
	if e.provider, err = newClients(provider.Config); err != nil {
		_ = provider.Stop()
		return nil, err
	}
	return e, nil
}

// padSchema gives crd's spec schema about kib KiB of documented string
// properties (none when kib is 0); unknown fields stay preserved, so the
// bench's objects stay valid.
func padSchema(crd *apiextensionsv1.CustomResourceDefinition, kib int) {
	const perProperty = 160 // bytes of JSON per property below, about
	if kib <= 0 {
		return
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range kib * 1024 / perProperty {
		spec.Properties[fmt.Sprintf("field%05d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string",
			Description: fmt.Sprintf("Field %d of the bench's exported API, documented the way a provider documents its API's fields, in about one sentence.", i)}
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
}

// Stop stops every konnector and cluster.
func (e *Env) Stop() {
	for _, c := range e.clusters {
		if c.konnector != nil {
			c.konnector.Stop(context.Background())
		}
		_ = c.cluster.Stop()
	}
	_ = e.Provider.Stop()
}

// Consumers is how many consumers are connected.
func (e *Env) Consumers() int { return e.consumers }

// Pprof returns the /debug/pprof address (host:port) of the first
// consumer cluster's konnector, "" before it runs.
func (e *Env) Pprof() string {
	if len(e.clusters) == 0 {
		return ""
	}
	return e.clusters[0].pprofAddr
}

// Clusters is how many consumer clusters (and konnectors) run.
func (e *Env) Clusters() int { return len(e.clusters) }

// Grow connects consumers until there are n: each granted on the provider,
// its bundle applied on its consumer cluster, Ready and Synced, and its
// objects on the provider.
func (e *Env) Grow(ctx context.Context, n int) error {
	from := e.consumers
	if n <= from {
		return nil
	}
	e.opts.Logf("granting consumers %d..%d", from, n-1)
	bundles, err := e.grantAll(ctx, from, n)
	if err != nil {
		return err
	}
	touched := map[int]bool{}
	for i := from; i < n; i++ {
		touched[i/e.opts.PerCluster] = true
	}
	for ci := range e.clusterCount(n) {
		if !touched[ci] {
			continue
		}
		if err := e.connectCluster(ctx, ci, bundles[ci]); err != nil {
			return err
		}
	}
	e.opts.Logf("creating %d objects per consumer", e.opts.Objects)
	if err := e.createObjects(ctx, from, n, "obj"); err != nil {
		return err
	}
	e.consumers = n
	return e.waitProviderObjects(ctx, n, e.opts.Objects, 10*time.Minute)
}

func (e *Env) clusterCount(n int) int { return (n + e.opts.PerCluster - 1) / e.opts.PerCluster }

// grantAll runs kubectl kbind grant for consumers [from, n), four at a
// time, and returns their bundles by consumer cluster.
func (e *Env) grantAll(ctx context.Context, from, n int) (map[int]string, error) {
	type result struct {
		i      int
		bundle []byte
		err    error
	}
	work := make(chan int)
	results := make(chan result)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range work {
				out, err := e.grant(ctx, i)
				results <- result{i: i, bundle: out, err: err}
			}
		})
	}
	go func() {
		defer close(work)
		for i := from; i < n; i++ {
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	byConsumer := map[int][]byte{}
	var errs []error
	for r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		byConsumer[r.i] = r.bundle
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := map[int]string{}
	for i := from; i < n; i++ {
		out[i/e.opts.PerCluster] += "---\n" + string(byConsumer[i])
	}
	return out, nil
}

func (e *Env) grant(ctx context.Context, i int) ([]byte, error) {
	api := API(i % e.opts.PerCluster)
	cmd := exec.CommandContext(ctx, e.opts.Plugin, "--kubeconfig", e.Provider.KubeconfigPath,
		"grant", Consumer(i), "--apis", api.Resource+"."+api.Group, "--connection", Consumer(i))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kbind grant %s: %w: %s", Consumer(i), err, stderr.String())
	}
	return out, nil
}

// connectCluster starts consumer cluster ci when it is new, applies the
// bundles on it, starts its konnector when it is new, and waits for every
// Connection Ready and every ClusterBinding Synced there.
func (e *Env) connectCluster(ctx context.Context, ci int, bundles string) error {
	if ci == len(e.clusters) {
		e.opts.Logf("starting consumer cluster %d", ci)
		c, err := e.startCluster(ctx, ci)
		if err != nil {
			return err
		}
		e.clusters = append(e.clusters, c)
	}
	c := e.clusters[ci]
	file := filepath.Join(c.cluster.Dir, fmt.Sprintf("bundles-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(file, []byte(bundles), 0o600); err != nil {
		return err
	}
	if out, err := c.cluster.Kubectl(ctx, "apply", "-f", file); err != nil {
		return fmt.Errorf("applying the bundles on consumer cluster %d: %w: %s", ci, err, out)
	}
	if c.konnector == nil {
		if err := e.startKonnector(ctx, c); err != nil {
			return err
		}
	}
	e.opts.Logf("waiting for consumer cluster %d's Connections and ClusterBindings", ci)
	for _, args := range [][]string{
		{"wait", "--for=condition=Ready", "connection", "--all", "--timeout=600s"},
		{"wait", "--for=condition=Synced", "clusterbinding", "--all", "--timeout=600s"},
	} {
		if out, err := c.cluster.Kubectl(ctx, args...); err != nil {
			return fmt.Errorf("consumer cluster %d: kubectl %s: %w: %s", ci, strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func (e *Env) startCluster(ctx context.Context, ci int) (*consumerCluster, error) {
	cluster, err := testenv.StartCluster(fmt.Sprintf("consumer-%02d", ci), testenv.ClusterOptions{Dir: e.opts.Dir, InstallKbindCRDs: true, EtcdArgs: e.opts.EtcdArgs})
	if err != nil {
		return nil, err
	}
	c := &consumerCluster{cluster: cluster}
	if c.clients, err = newClients(cluster.Config); err != nil {
		_ = cluster.Stop()
		return nil, err
	}
	for _, ns := range []string{"kbind", WorkNamespace} {
		if _, err := c.clients.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			_ = cluster.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (e *Env) startKonnector(ctx context.Context, c *consumerCluster) error {
	addr, err := harness.LoopbackAddr()
	if err != nil {
		return err
	}
	c.metricsAddr = addr
	if c.pprofAddr, err = harness.LoopbackAddr(); err != nil {
		return err
	}
	c.konnector, err = harness.NewProcess(e.opts.Konnector, filepath.Join(c.cluster.Dir, "konnector.log"),
		"--kubeconfig", c.cluster.KubeconfigPath, "--metrics-bind-address", addr, "--pprof-bind-address", c.pprofAddr)
	if err != nil {
		return err
	}
	return c.konnector.Start(ctx)
}

// createObjects creates, for each consumer in [from, n), Objects objects
// named <name>-<j> of its API in the work namespace of its cluster.
func (e *Env) createObjects(ctx context.Context, from, n int, name string) error {
	for i := from; i < n; i++ {
		c := e.clusters[i/e.opts.PerCluster]
		for j := range e.opts.Objects {
			if err := e.createObject(ctx, c, i, fmt.Sprintf("%s-%d", name, j)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Env) createObject(ctx context.Context, c *consumerCluster, i int, name string) error {
	gvr := API(i % e.opts.PerCluster)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kindOf(gvr),
		"metadata":   map[string]any{"name": name, "namespace": WorkNamespace},
		"spec":       map[string]any{"consumer": Consumer(i)},
	}}
	_, err := c.clients.dyn.Resource(gvr).Namespace(WorkNamespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s for consumer %s: %w", gvr.Resource, WorkNamespace, name, Consumer(i), err)
	}
	return nil
}

// providerCounts counts the objects of every exported API a consumer
// binds on the provider by namespace: one list per API.
func (e *Env) providerCounts(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	for a := range min(e.opts.PerCluster, e.consumers) {
		list, err := e.provider.dyn.Resource(API(a)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, item := range list.Items {
			counts[item.GetNamespace()]++
		}
	}
	return counts, nil
}

// waitProviderObjects waits until each of the first n consumers has at
// least per objects in its provider namespace (kbind-<consumer>, grant's
// default under Namespace isolation).
func (e *Env) waitProviderObjects(ctx context.Context, n, per int, timeout time.Duration) error {
	var missing int
	err := pollEvery(ctx, 2*time.Second, timeout, func() (bool, error) {
		counts, err := e.providerCounts(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // the provider may be restarting: poll again
		}
		missing = 0
		for i := range n {
			missing += max(0, per-counts["kbind-"+Consumer(i)])
		}
		return missing == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d objects not on the provider: %w", missing, err)
	}
	return nil
}

// poll calls cond every 500 ms until it is true, it errs, or timeout.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return pollEvery(ctx, 500*time.Millisecond, timeout, cond)
}

// pollEvery calls cond every interval until it is true, it errs, or
// timeout.
func pollEvery(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s", timeout)
		case <-tick.C:
		}
	}
}
