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

package backend

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var konnectorBin, backendBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
		&backendBin:   "github.com/kbind/kbind/backend/cmd/backend",
	})
}

// The backend's configured intervals in these tests (its flags).
const (
	staleAfter   = 10 * time.Second
	reapInterval = time.Second
	reapGrace    = 2 * time.Second
)

// settle is what an eventual-consistency poll waits on top of the
// configured intervals the awaited state depends on: processes starting,
// watches, syncs and kubectl round trips on a busy machine (these tests run
// in parallel, each with three control planes). Generous on purpose: a
// poll returns as soon as its state holds and logs how long that took.
const settle = 80 * time.Second

// eventually polls check until it returns nil or timeout passes, and logs
// how long that took: the timeout is a bound for a busy machine, the
// logged duration the measurement.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	began := time.Now()
	enginetest.EventuallyWithin(t, timeout, what, check)
	t.Logf("%s: after %s", what, time.Since(began).Round(time.Millisecond))
}

// starting lets one control plane start at a time: the tests run in
// parallel to overlap their waits (the stale window, syncs), but an
// API server starting is CPU-bound, and several starting at once on a busy
// machine overran envtest's start timeout.
var starting sync.Mutex

// startCluster starts a control plane for t (testenv.StartClusterT), one
// at a time.
func startCluster(t *testing.T, name string, opts testenv.ClusterOptions) *testenv.Cluster {
	t.Helper()
	starting.Lock()
	defer starting.Unlock()
	began := time.Now()
	c := testenv.StartClusterT(t, name, opts)
	t.Logf("control plane %s started in %s", name, time.Since(began).Round(time.Millisecond))
	return c
}

// process is a running binary.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *enginetest.SyncBuffer
	done chan struct{}
}

func start(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, log: &enginetest.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.log.String())
		}
	})
	return p
}

// stop ends the process the way a crash or a node loss would: no goodbye.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := testenv.Kubectl(context.Background(), kubeconfig, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

func apply(t *testing.T, kubeconfig, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, kubeconfig, "apply", "-f", file)
}

// consumer starts a consumer cluster with a konnector connected to the
// provider, binding Widgets and copying the ConfigMaps named configs up.
func consumer(t *testing.T, name string, provider *testenv.Cluster) (*testenv.Cluster, *process) {
	t.Helper()
	c := startCluster(t, name, testenv.ClusterOptions{InstallKbindCRDs: true})
	kubectl(t, c.KubeconfigPath, "create", "namespace", "kbind")
	k := start(t, "konnector "+name, konnectorBin, "--kubeconfig", c.KubeconfigPath,
		"--health-probe-bind-address", harness.FreeAddr(t), "--metrics-bind-address", "0", "--heartbeat-interval", "1s")
	apply(t, c.KubeconfigPath, enginetest.ConnectionManifest("provider", provider.Kubeconfig)+`---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: widgets}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: configmaps, direction: FromConsumer, selector: {labelSelector: {matchLabels: {copy: up}}}}
`)
	kubectl(t, c.KubeconfigPath, "wait", "--for=condition=Ready", "clusterbinding/widgets", "--timeout=60s")
	kubectl(t, c.KubeconfigPath, "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=60s")
	return c, k
}

func objects(ns string, widgets []string, configs ...string) string {
	out := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)
	for _, w := range widgets {
		out += fmt.Sprintf("---\napiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: {size: 1}\n", w, ns)
	}
	for _, c := range configs {
		out += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, labels: {copy: up}}\ndata: {color: blue}\n", c, ns)
	}
	return out
}

// providerState lists what the test looks at on the provider, one
// "<kind> <namespace>/<name> [terminating]" line each, for the managed
// objects of kinds (Widgets, ConfigMaps and Leases when none are given)
// and every namespace.
func providerState(t *testing.T, kc string, kinds ...string) map[string]bool {
	t.Helper()
	if len(kinds) == 0 {
		kinds = []string{"widgets.example.org", "configmaps", "leases.coordination.k8s.io"}
	}
	out := map[string]bool{}
	for _, kind := range kinds {
		lines := kubectl(t, kc, "get", kind, "-A", "-l", "core.kbind.io/managed=true", "-o",
			`jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}`)
		for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				key := kind + " " + f[0]
				if len(f) > 1 {
					key += " terminating"
				}
				out[key] = true
			}
		}
	}
	lines := kubectl(t, kc, "get", "namespaces", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}`)
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			key := "namespaces " + f[0]
			if f[1] == "Terminating" {
				key += " terminating"
			}
			out[key] = true
		}
	}
	return out
}

func clusterUID(t *testing.T, c *testenv.Cluster) string {
	t.Helper()
	return strings.TrimSpace(kubectl(t, c.KubeconfigPath, "get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}"))
}

// asServiceAccount installs the backend chart on the provider with the Helm
// SDK and returns a kubeconfig that impersonates its ServiceAccount, so the
// backend runs with exactly the chart's RBAC.
func asServiceAccount(t *testing.T, provider *testenv.Cluster) string {
	t.Helper()
	// The consumers bind Widgets (example.org); the test expects the
	// namespace kbind created for A to be deleted, which needs
	// rbac.namespaceCleanup.
	helmInstall(t, provider, "backend", "backend", map[string]any{"reap": true, "rbac": map[string]any{"reapGroups": []any{"example.org"}, "namespaceCleanup": true}})
	path := filepath.Join(t.TempDir(), "backend-sa.kubeconfig")
	if err := harness.WriteImpersonating(provider.KubeconfigPath, path, "system:serviceaccount:kbind:backend"); err != nil {
		t.Fatal(err)
	}
	return path
}

// helmInstall installs the repository's chart charts/<chart> on the
// provider as release in namespace kbind (created if missing), with the
// Helm SDK.
func helmInstall(t *testing.T, provider *testenv.Cluster, chart, release string, values map[string]any) {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc := provider.KubeconfigPath
	flags.KubeConfig, flags.Context, flags.Namespace = &kc, ptr.To("provider"), ptr.To("kbind")
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, "kbind", "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	c, err := loader.Load("../../charts/" + chart)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = release, "kbind", true
	if _, err := install.Run(c, values); err != nil {
		t.Fatalf("helm install %s: %v", release, err)
	}
}

func TestBackendReapsTheStoppedConsumerOnly(t *testing.T) {
	t.Parallel() // its own provider, consumers and processes
	began := time.Now()
	provider := startCluster(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	pkc := provider.KubeconfigPath
	saKubeconfig := asServiceAccount(t, provider)    // also creates the provider namespace kbind, where the Leases go
	kubectl(t, pkc, "create", "namespace", "shared") // the provider's own namespace, used by both consumers

	a, konnectorA := consumer(t, "consumer-a", provider)
	b, _ := consumer(t, "consumer-b", provider)
	uidA, uidB := clusterUID(t, a), clusterUID(t, b)
	apply(t, a.KubeconfigPath, objects("team-a", []string{"a-w1"}, "a-config")+"---\n"+objects("shared", []string{"a-w2"}))
	apply(t, b.KubeconfigPath, objects("team-b", []string{"b-w1"}, "b-config")+"---\n"+objects("shared", []string{"b-w2"}))

	leaseA, leaseB := "provider-"+uidA[:10], "provider-"+uidB[:10]
	before := []string{
		"widgets.example.org team-a/a-w1", "widgets.example.org shared/a-w2", "configmaps team-a/a-config",
		"leases.coordination.k8s.io kbind/" + leaseA, "namespaces team-a",
		"widgets.example.org team-b/b-w1", "widgets.example.org shared/b-w2", "configmaps team-b/b-config",
		"leases.coordination.k8s.io kbind/" + leaseB, "namespaces team-b", "namespaces shared", "namespaces kbind",
	}
	eventually(t, settle, "both consumers' copies and Leases on the provider", func() error {
		state := providerState(t, pkc)
		for _, want := range before {
			if !state[want] {
				return fmt.Errorf("no %s", want)
			}
		}
		return nil
	})
	// The provider namespace team-a was created by kbind for A.
	if got := kubectl(t, pkc, "get", "namespace", "team-a", "-o", `jsonpath={.metadata.labels.core\.kbind\.io/consumer-cluster-uid}`); got != uidA {
		t.Fatalf("namespace team-a marked for %q, want %s", got, uidA)
	}
	t.Logf("setup took %s", time.Since(began))

	// Consumer A's konnector goes away for good.
	konnectorA.stop()
	stopped := time.Now()

	// The dry run, as the chart's ServiceAccount, lists exactly A's objects.
	dry := exec.Command(backendBin, "--kubeconfig", saKubeconfig, "--dry-run", "--stale-after", staleAfter.String())
	var stdout, stderr strings.Builder
	dry.Stdout, dry.Stderr = &stdout, &stderr
	if err := dry.Run(); err != nil {
		t.Fatalf("backend --dry-run: %v\n%s", err, stderr.String())
	}
	t.Logf("backend --dry-run took %s; stdout:\n%s", time.Since(stopped), stdout.String())
	got := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	suffix := " (consumer " + uidA + ")"
	want := []string{
		"would delete widgets.example.org shared/a-w2" + suffix,
		"would delete widgets.example.org team-a/a-w1" + suffix,
		"would delete configmaps team-a/a-config" + suffix,
		"would delete namespaces team-a" + suffix,
		"would delete leases.coordination.k8s.io kbind/" + leaseA + suffix,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dry run printed:\n%s\nwant:\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr.String())
	}
	if strings.Contains(stderr.String(), "is forbidden: User") {
		t.Errorf("the chart's RBAC refused the dry run something:\n%s", stderr.String())
	}
	// The dry run changed nothing.
	if got := kubectl(t, pkc, "get", "lease", "-n", "kbind", leaseA, "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/stale-since}`); got != "" {
		t.Errorf("the dry run annotated the Lease: %q", got)
	}

	// The backend, reaping, as the chart's ServiceAccount.
	probe, metricsAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	backend := start(t, "backend", backendBin, "--kubeconfig", saKubeconfig, "--reap", "--stale-after", staleAfter.String(), "--reap-interval", reapInterval.String(), "--reap-grace", reapGrace.String(),
		"--health-probe-bind-address", probe, "--metrics-bind-address", metricsAddr, "--leader-elect")
	eventually(t, settle, "backend /readyz", func() error {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
	reapStart := time.Now()
	var after map[string]bool
	// Stale a window after the backend started, its copies marked and
	// deleted a grace later, the rest on the next passes: staleAfter +
	// reapGrace + settle.
	eventually(t, staleAfter+reapGrace+settle, "consumer A reaped", func() error {
		after = providerState(t, pkc)
		for _, gone := range []string{"widgets.example.org team-a/a-w1", "widgets.example.org shared/a-w2", "configmaps team-a/a-config",
			"leases.coordination.k8s.io kbind/" + leaseA} {
			if after[gone] || after[gone+" terminating"] {
				return fmt.Errorf("%s still there", gone)
			}
		}
		// No namespace controller on this provider: a deleted namespace
		// stays Terminating.
		if !after["namespaces team-a terminating"] {
			return fmt.Errorf("namespace team-a not deleted")
		}
		return nil
	})
	t.Logf("consumer A reaped %s after the backend was ready (%s after its konnector stopped)", time.Since(reapStart), time.Since(stopped))
	for _, keep := range []string{
		"widgets.example.org team-b/b-w1", "widgets.example.org shared/b-w2", "configmaps team-b/b-config",
		"leases.coordination.k8s.io kbind/" + leaseB, "namespaces team-b", "namespaces shared", "namespaces kbind",
	} {
		if !after[keep] {
			t.Errorf("%s: gone or terminating, must stay (provider state %v)", keep, sorted(after))
		}
	}
	if got := kubectl(t, pkc, "get", "lease", "-n", "kbind", leaseB, "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/stale-since}`); got != "" {
		t.Errorf("the live consumer's Lease is marked stale: %q", got)
	}
	// What happened, the way an operator looks: Events (asynchronous; one
	// about an object inside the namespace being deleted may be refused, so
	// these are the ones outside it).
	eventually(t, settle, "Reaped Events", func() error {
		for _, o := range [][2]string{{"shared", "a-w2"}, {"kbind", leaseA}, {"default", "team-a"}} {
			out, err := testenv.Kubectl(context.Background(), pkc, "get", "events", "-n", o[0],
				"--field-selector", "reason=Reaped,involvedObject.name="+o[1], "-o", "name")
			if err != nil {
				return err
			}
			if n := len(strings.Fields(out)); n != 1 {
				return fmt.Errorf("%d Reaped Events about %s/%s, want 1", n, o[0], o[1])
			}
		}
		return nil
	})
	eventually(t, settle, "backend metrics", func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`kbind_backend_deletions_total{kind="Widget.example.org",result="deleted"} 2`,
			`kbind_backend_deletions_total{kind="ConfigMap",result="deleted"} 1`,
			`kbind_backend_deletions_total{kind="Namespace",result="deleted"} 1`,
			`kbind_backend_deletions_total{kind="Lease.coordination.k8s.io",result="deleted"} 1`,
			`kbind_backend_consumers{state="live"} 1`,
			`kbind_backend_consumer_renewal_age_seconds{consumer_cluster_uid="` + uidB + `"}`,
		} {
			if !strings.Contains(string(body), want) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
		}
		return nil
	})
	if strings.Contains(backend.log.String(), "is forbidden: User") {
		t.Errorf("the chart's RBAC refused the backend something:\n%s", backend.log.String())
	}
	t.Logf("whole test took %s", time.Since(began))
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
