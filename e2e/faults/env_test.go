package faults

import (
	"bufio"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/enginetest"
	"github.com/kbind/kbind/engine/testenv"
)

var konnectorBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
	})
}

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
	konnector          *konnector
	monitor            *monitor
}

func newEnv(t *testing.T) *env {
	ctx := context.Background()
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
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
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kbindv1alpha1.AddToScheme} {
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
	if _, err := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "create", "namespace", "kbind"); err != nil {
		t.Fatal(err)
	}
	e.konnector = newKonnector(t, pair.Consumer.KubeconfigPath)
	if err := e.konnector.Start(ctx); err != nil {
		t.Fatal(err)
	}
	through, err := Through(pair.Provider.Kubeconfig, proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
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

// sample is the Connection's and the ClusterBinding's state at one time.
type sample struct {
	at                           time.Time
	connected, ready, bindingOK  bool
	connectedReason, readyReason string
	message                      string
	err                          error
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
		if !s.ready && s.message == "" {
			s.message = cond.Message
		}
	}
	b := &kbindv1alpha1.ClusterBinding{}
	if s.err = c.Get(rctx, client.ObjectKey{Name: bindingName}, b); s.err != nil {
		return s
	}
	s.bindingOK = meta.IsStatusConditionTrue(b.Status.Conditions, string(kbindv1alpha1.ConditionReady)) &&
		meta.IsStatusConditionTrue(b.Status.Conditions, string(kbindv1alpha1.ConditionSynced))
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

// konnector is the built konnector as a process (harness.Process), with
// the consumer's admin kubeconfig and its metrics and pprof endpoints on
// loopback ports.
type konnector struct {
	*harness.Process
	metricsAddr, pprofAddr string
}

func newKonnector(t *testing.T, kubeconfig string) *konnector {
	k := &konnector{metricsAddr: harness.FreeAddr(t), pprofAddr: harness.FreeAddr(t)}
	// Kept when the test fails (removed when it passes).
	dir, err := os.MkdirTemp("", "kbind-faults-")
	if err != nil {
		t.Fatal(err)
	}
	k.Process, err = harness.NewProcess(konnectorBin, filepath.Join(dir, "konnector.log"),
		"--kubeconfig", kubeconfig, "--namespace", "kbind", "--metrics-bind-address", k.metricsAddr, "--pprof-bind-address", k.pprofAddr)
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
			t.Logf("konnector log tail (the whole log: %s):\n%s", k.LogPath(), strings.Join(lines, "\n"))
			return
		}
		_ = os.RemoveAll(dir)
	})
	return k
}

// goroutines is the konnector's go_goroutines gauge.
func (k *konnector) goroutines() (int, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + k.metricsAddr + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("reading the konnector's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("the konnector's metrics have no go_goroutines (%v)", sc.Err())
}

// goroutineProfile is the konnector's goroutines, grouped by stack
// (pprof debug=1), for a failure message.
func (k *konnector) goroutineProfile() string {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + k.pprofAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return string(data)
}
