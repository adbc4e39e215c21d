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

package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var konnectorBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
	})
}

// The intervals every konnector of the suite runs with. The scenarios'
// properties do not depend on the defaults (30 s each; the engine's own
// tests hold the defaults' bounds, e.g. engine/connection
// TestHungProviderReportedWithDefaults): shorter intervals let a fault be
// reported, and so end, sooner. Every bound that depends on them is
// derived from these constants (scenarios_test.go).
const (
	// heartbeatInterval: --heartbeat-interval (a renewal every 9–11 s,
	// each bounded by heartbeat.RenewTimeout: 5 s).
	heartbeatInterval = 10 * time.Second
	// bindingResync: --binding-resync; the deselection grace is twice
	// it (30 s), which the relabel scenario's pauses (10 s at most) stay
	// well within.
	bindingResync = 15 * time.Second
	// providerTimeout is the konnector's --provider-timeout default.
	providerTimeout = engine.DefaultProviderTimeout
)

// Names of what the suite applies on the consumer.
const (
	connectionName = "provider"
	bindingName    = "widgets"
)

// env is the suite's pair, proxy and konnector, shared by the scenarios.
type env struct {
	pair               *testenv.Pair
	proxy              *Proxy
	consumer, provider client.Client
	// checkConsumer and checkProvider are the suite's checks' clients
	// (waitConverged, describe): their own rate limiter, generous, so
	// that no check waits behind the load's writes.
	checkConsumer, checkProvider client.Client
	konnector                    *konnector
	monitor                      *monitor
	// kubeconfig is the Connection's: the provider's admin, through the
	// proxy.
	kubeconfig []byte
}

func newEnv(t *testing.T) *env {
	ctx := context.Background()
	crds := []*apiextensionsv1.CustomResourceDefinition{widgetCRD(), gadgetCRD()}
	for i := range churnLanes {
		crds = append(crds, laneCRD(i))
	}
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: crds})
	upstream, err := url.Parse(pair.Provider.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := NewProxy("provider", upstream.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, kbindv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{pair: pair, proxy: proxy}
	if e.consumer, err = client.New(pair.Consumer.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if e.provider, err = client.New(pair.Provider.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if e.checkConsumer, err = client.New(checkConfig(pair.Consumer.Config), client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if e.checkProvider, err = client.New(checkConfig(pair.Provider.Config), client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "create", "namespace", "kbind"); err != nil {
		t.Fatal(err)
	}
	e.konnector = newKonnector(t, "konnector", pair.Consumer.KubeconfigPath)
	if err := e.konnector.Start(ctx); err != nil {
		t.Fatal(err)
	}
	through, err := Through(pair.Provider.Kubeconfig, proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	e.kubeconfig = through
	manifest := enginetest.ConnectionManifest(connectionName, through) + `
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: ` + bindingName + `}
spec:
  connectionRef: {name: ` + connectionName + `}
  apis: [{name: widgets.example.org}]
`
	file := filepath.Join(t.TempDir(), "connection.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "apply", "-f", file); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, obj := range []string{"connection/" + connectionName, "clusterbinding/" + bindingName} {
		if out, err := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "wait", "--for=condition=Ready", obj, "--timeout=90s"); err != nil {
			status, _ := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "get", obj, "-o", "jsonpath={.status}")
			t.Fatalf("%v: %s\nstatus: %s", err, out, status)
		}
	}
	e.monitor = startMonitor(t, e.consumer)
	return e
}

// checkConfig is cfg for the suite's checks: a copy (its own rate limiter)
// allowing 1000 requests a second, burst 2000.
func checkConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = 1000, 2000, nil
	return c
}

// The provider's APIs: Widgets carry the load; the gadgets API is bound
// in a scenario (a konnector killed while it installs the CRD); each churn
// lane binds its own API.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true)
}

func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, true)
}

func laneCRD(i int) *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD(fmt.Sprintf("lane%ds", i), fmt.Sprintf("lane%d", i), fmt.Sprintf("Lane%d", i), "churn.example.org", apiextensionsv1.NamespaceScoped, true)
}

// sample is the Connection's and the ClusterBinding's state at one time.
type sample struct {
	at                           time.Time
	connected, ready, bindingOK  bool
	connectedReason, readyReason string
	message                      string
	// bindingMessage is the ClusterBinding's Ready or Synced message when
	// it is not both.
	bindingMessage string
	err            error
}

// monitor reads the Connection and the ClusterBinding every 200 ms.
type monitor struct {
	mu      sync.Mutex
	samples []sample
}

func startMonitor(t *testing.T, c client.Client) *monitor {
	m := &monitor{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			m.record(readState(ctx, c))
			return false, nil
		})
	}()
	return m
}

func readState(ctx context.Context, c client.Client) sample {
	s := sample{at: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn := &kbindv1alpha1.Connection{}
	if s.err = c.Get(rctx, client.ObjectKey{Name: connectionName}, conn); s.err != nil {
		return s
	}
	if cond := meta.FindStatusCondition(conn.Status.Conditions, string(kbindv1alpha1.ConditionConnected)); cond != nil {
		s.connected, s.connectedReason = cond.Status == metav1.ConditionTrue, cond.Reason
		s.message = cond.Message
	}
	if cond := meta.FindStatusCondition(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)); cond != nil {
		s.ready, s.readyReason = cond.Status == metav1.ConditionTrue, cond.Reason
		// Both messages: the fault may be named by Ready alone (a deleted
		// Secret: Connected only says it waits for one).
		if !s.ready && cond.Message != s.message {
			s.message = strings.TrimPrefix(s.message+"; "+cond.Message, "; ")
		}
	}
	b := &kbindv1alpha1.ClusterBinding{}
	if s.err = c.Get(rctx, client.ObjectKey{Name: bindingName}, b); s.err != nil {
		return s
	}
	s.bindingOK = true
	for _, typ := range []kbindv1alpha1.ConditionType{kbindv1alpha1.ConditionReady, kbindv1alpha1.ConditionSynced} {
		cond := meta.FindStatusCondition(b.Status.Conditions, string(typ))
		if cond == nil || cond.Status != metav1.ConditionTrue {
			s.bindingOK = false
			if cond != nil && s.bindingMessage == "" {
				s.bindingMessage = fmt.Sprintf("%s=%s (%s): %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
	}
	return s
}

func (m *monitor) record(s sample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
}

// first is the first sample after since that satisfies ok.
func (m *monitor) first(since time.Time, ok func(sample) bool) (sample, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.samples {
		if s.at.After(since) && s.err == nil && ok(s) {
			return s, true
		}
	}
	return sample{}, false
}

func (s sample) healthy() bool  { return s.connected && s.ready && s.bindingOK }
func (s sample) reported() bool { return !s.connected || !s.ready }

// says is the sample's reasons and messages, for assertions.
func (s sample) says() string {
	return s.connectedReason + " " + s.readyReason + ": " + s.message + " | " + s.bindingMessage
}

// bindingReported: the ClusterBinding is not Ready or not Synced.
func (s sample) bindingReported() bool { return !s.bindingOK }

// konnector is the built konnector as a process (harness.Process), with
// the consumer's admin kubeconfig and its metrics and pprof endpoints on
// loopback ports.
type konnector struct {
	*harness.Process
	name                   string
	metricsAddr, pprofAddr string
}

// newKonnector prepares a konnector named name (its log file) with extra
// flags.
func newKonnector(t *testing.T, name, kubeconfig string, extraArgs ...string) *konnector {
	k := &konnector{name: name, metricsAddr: harness.FreeAddr(t), pprofAddr: harness.FreeAddr(t)}
	// Kept when the test fails (removed when it passes).
	dir, err := os.MkdirTemp("", "kbind-faults-")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", kubeconfig, "--namespace", "kbind", "--metrics-bind-address", k.metricsAddr, "--pprof-bind-address", k.pprofAddr,
		"--heartbeat-interval", heartbeatInterval.String(), "--binding-resync", bindingResync.String(),
		// Every sync decision, to follow one object through a failure.
		"--log-level=debug"}, extraArgs...)
	k.Process, err = harness.NewProcess(konnectorBin, filepath.Join(dir, name+".log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Stop(context.Background())
		if t.Failed() {
			data, _ := os.ReadFile(k.LogPath())
			lines := strings.Split(string(data), "\n")
			if len(lines) > 150 {
				lines = lines[len(lines)-150:]
			}
			t.Logf("%s log tail (the whole log: %s):\n%s", name, k.LogPath(), strings.Join(lines, "\n"))
			return
		}
		_ = os.RemoveAll(dir)
	})
	return k
}

// metrics is the konnector's metrics exposition.
func (k *konnector) metrics() (string, error) {
	return httpGet("http://" + k.metricsAddr + "/metrics")
}

// metric sums the konnector's samples of name whose labels include match
// (0 when there is none).
func (k *konnector) metric(name string, match map[string]string) (float64, error) {
	text, err := k.metrics()
	if err != nil {
		return 0, fmt.Errorf("reading the %s metrics: %w", k.name, err)
	}
	v, _, err := MetricSum(text, name, match)
	return v, err
}

// goroutines is the konnector's go_goroutines gauge.
func (k *konnector) goroutines() (int, error) {
	v, err := k.metric("go_goroutines", nil)
	return int(v), err
}

// leads tells whether the konnector holds the leader election Lease.
func (k *konnector) leads() bool {
	v, err := k.metric("leader_election_master_status", map[string]string{"name": kbindv1alpha1.KonnectorLeaderElectionID})
	return err == nil && v == 1
}

// rss is the konnector's resident set size in bytes, read right after a
// garbage collection (its heap profile endpoint runs one first): the Go
// runtime returns freed memory to the system only once a collection has
// lowered its heap goal, and an idle konnector allocates too little to
// start one, so without it RSS would measure the last burst's garbage.
func (k *konnector) rss() (int64, error) {
	if _, err := httpGet("http://" + k.pprofAddr + "/debug/pprof/heap?gc=1"); err != nil {
		return 0, fmt.Errorf("collecting the %s's garbage: %w", k.name, err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", k.PID()))
	if err != nil {
		return 0, err
	}
	return VmRSS(string(data))
}

// connectionsTo counts the konnector's established TCP connections to a
// port (decimal) on this host.
func (k *konnector) connectionsTo(port string) (int, error) {
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0, err
	}
	pid := k.PID()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if inode, ok := SocketInode(link); ok {
				inodes[inode] = true
			}
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return 0, err
		}
		m, err := EstablishedTo(string(data), inodes, p)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// goroutineProfile is the konnector's goroutines, grouped by stack
// (pprof debug=1), for a failure message.
func (k *konnector) goroutineProfile() string {
	text, err := httpGet("http://" + k.pprofAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	return text
}

// saveProfiles writes the konnector's goroutine profile (by stack) and
// heap profile (after a GC) into a directory kept for the developer and
// returns it.
func (k *konnector) saveProfiles(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kbind-faults-profiles-")
	if err != nil {
		return err.Error()
	}
	for file, path := range map[string]string{"goroutines.txt": "goroutine?debug=1", "heap.pb.gz": "heap?gc=1"} {
		data, err := httpGet("http://" + k.pprofAddr + "/debug/pprof/" + path)
		if err != nil {
			data = err.Error()
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o600); err != nil {
			t.Log(err)
		}
	}
	return dir
}

// deleteAndWait deletes objs on the consumer (one already gone is fine)
// and waits until each is gone: its finalizers done — a binding drained,
// a Connection's session retired. A test that stops a provider cluster of
// its own (StartClusterT's cleanup) calls it first for that provider's
// bindings and Connection: a konnector still draining through it, or
// still holding its session's watches and heartbeat, keeps the API
// server's graceful shutdown from ending within testenv's stop timeout
// ("timeout waiting for process kube-apiserver to stop"), and the test
// fails after its properties held.
func (e *env) deleteAndWait(t *testing.T, timeout time.Duration, objs ...client.Object) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range objs {
		must(t, client.IgnoreNotFound(e.consumer.Delete(ctx, obj)))
	}
	start := time.Now()
	for _, obj := range objs {
		key := client.ObjectKeyFromObject(obj)
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(e.consumer.Get(ctx, key, obj)), nil
		})
		if err != nil {
			t.Fatalf("%T %s not gone %s after its deletion (finalizers %v): %v", obj, key, timeout, obj.GetFinalizers(), err)
		}
	}
	t.Logf("%d objects deleted and gone after %s", len(objs), time.Since(start).Round(100*time.Millisecond))
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}

// watches is the number of open watches on a cluster's API server
// (apiserver_longrunning_requests, verb WATCH): the konnector's and the
// API server's own (the suite's clients watch nothing).
func watches(ctx context.Context, c *testenv.Cluster) (int, error) {
	data, err := apiServerMetrics(ctx, c)
	if err != nil {
		return 0, err
	}
	v, _, err := MetricSum(data, "apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
	return int(v), err
}

// watchesBy is the open watches on a cluster's API server by resource.
func watchesBy(ctx context.Context, c *testenv.Cluster) (map[string]float64, error) {
	data, err := apiServerMetrics(ctx, c)
	if err != nil {
		return nil, err
	}
	return MetricSumBy(data, "apiserver_longrunning_requests", map[string]string{"verb": "WATCH"}, "resource")
}

func apiServerMetrics(ctx context.Context, c *testenv.Cluster) (string, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return "", err
	}
	data, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the %s API server's metrics: %w", c.Name, err)
	}
	return string(data), nil
}
