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

package monitoring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Values the test renders the charts' rules with: its scrape jobs, every
// `for` 0s (an alert fires at the first evaluation its condition holds),
// and thresholds and windows cut to what seconds of a test can show
// (docs/metrics.md#proven-against-a-real-prometheus lists them).
var (
	konnectorRuleValues = map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org"}}, "metrics": map[string]any{"prometheusRule": map[string]any{
		"enabled": true, "job": konnectorJob, "alerts": map[string]any{
			"KbindKonnectorDown":            map[string]any{"for": "0s"},
			"KbindConnectionNotReady":       map[string]any{"for": "0s"},
			"KbindHeartbeatStale":           map[string]any{"for": "0s", "seconds": 5},
			"KbindCredentialRenewalFailing": map[string]any{"for": "0s", "window": "30s"},
			"KbindCredentialsExpiring":      map[string]any{"for": "0s"},
			"KbindSyncFailures":             map[string]any{"for": "0s", "window": "15s"},
			"KbindConflicts":                map[string]any{"for": "0s"},
			"KbindProviderEventsDropped":    map[string]any{"for": "0s", "window": "15s"},
			"KbindSyncerNotReady":           map[string]any{"for": "0s"},
		}}}}
	backendRuleValues = map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{
		"enabled": true, "job": backendJob, "alerts": map[string]any{
			"KbindBackendDown":   map[string]any{"for": "0s"},
			"KbindConsumerStale": map[string]any{"for": "0s", "seconds": 5},
			"KbindReapFailing":   map[string]any{"for": "0s", "window": "15s"},
		}}}}
)

// rig is what the test runs: the two API servers, the konnector, the
// backend and Prometheus.
type rig struct {
	t                  *testing.T
	ctx                context.Context
	dir                string
	provider, consumer *testenv.Cluster
	konnectorBin       string
	konnectorMetrics   string
	konnector          *harness.Process
	backend            *harness.Process
	prom               *Prometheus
}

func (r *rig) kubectl(kubeconfig string, args ...string) string {
	r.t.Helper()
	out, err := testenv.Kubectl(r.ctx, kubeconfig, args...)
	if err != nil {
		r.t.Fatalf("%v", err)
	}
	return out
}

func (r *rig) apply(kubeconfig, manifest string) {
	r.t.Helper()
	r.kubectl(kubeconfig, "apply", "-f", r.file(manifest))
}

// file writes manifest to a new file and returns its path.
func (r *rig) file(manifest string) string {
	r.t.Helper()
	f, err := os.CreateTemp(r.dir, "manifest-*.yaml")
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(manifest); err != nil {
		r.t.Fatal(err)
	}
	return f.Name()
}

// startKonnector (re)starts the konnector with --credential-expiry-warning
// warning ("" for its default), its metrics on the address Prometheus
// scrapes.
func (r *rig) startKonnector(warning string) {
	r.t.Helper()
	if r.konnector != nil {
		r.konnector.Stop(r.ctx)
	}
	args := []string{"--kubeconfig", r.consumer.KubeconfigPath, "--metrics-bind-address", r.konnectorMetrics, "--heartbeat-interval", "1s"}
	if warning != "" {
		args = append(args, "--credential-expiry-warning", warning)
	}
	k, err := harness.NewProcess(r.konnectorBin, filepath.Join(r.dir, "konnector.log"), args...)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := k.Start(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	r.konnector = k
}

// alertTimes are what the scenarios measured, logged at the end.
type alertTimes struct {
	t    *testing.T
	mu   sync.Mutex
	rows []string
}

func (a *alertTimes) add(format string, args ...any) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	row := fmt.Sprintf(format, args...)
	a.t.Log(row)
	a.rows = append(a.rows, row)
}

// waitAlert waits until alert is firing (firing true) or no longer firing,
// and returns how long that took since since: a measurement, logged in
// the test's table (alertTimes), not asserted. within is a generous poll
// timeout, never the expected time: every rule runs with `for: 0s`, and
// Prometheus scrapes every second (1 s timeout) and evaluates every
// second, so an alert follows its condition within about 3 s; the
// condition itself comes within the configured window it names (the
// backend's --stale-after 10 s and a 5 s threshold, a 15 s or 30 s rate
// window, a 30 s token's renewal at two thirds of its lifetime, the
// konnector's heartbeat). Each within is at least twice that sum
// (30 s for a target down: 3 s; 60 s for a stale consumer: 10 s + 5 s +
// 3 s; 90 s for a window of 30 s to pass: 30 s + 3 s, and so on), which
// leaves a busy machine's slower processes and scrapes their margin.
func (r *rig) waitAlert(alert string, firing bool, since time.Time, within time.Duration) time.Duration {
	r.t.Helper()
	state := map[bool]string{true: "firing", false: "resolved"}[firing]
	enginetest.EventuallyWithin(r.t, within, alert+" "+state, func() error {
		names, err := r.prom.Firing(r.ctx)
		if err != nil {
			return err
		}
		if slices.Contains(names, alert) != firing {
			return fmt.Errorf("firing now: %v", names)
		}
		return nil
	})
	return time.Since(since).Round(100 * time.Millisecond)
}

// TestDashboardsAndAlertsAgainstPrometheus runs a real konnector and
// backend syncing real objects, scraped every second by a real Prometheus
// that loads both charts' rules. While all is well no kbind alert fires;
// then each scenario fires its alert, which resolves after the heal
// (time to fire logged). At the end every query of both dashboards, with
// the template variables set to this test's values, returns data over the
// test's time range — as Grafana asks for it.
func TestDashboardsAndAlertsAgainstPrometheus(t *testing.T) {
	began := time.Now()
	ctx := context.Background()
	r := &rig{t: t, ctx: ctx, dir: t.TempDir()}
	promDir := PrometheusDir(t)
	konnectorRules, konnectorAlerts := RulesFile(t, "konnector", r.dir, konnectorRuleValues)
	backendRules, backendAlerts := RulesFile(t, "backend", r.dir, backendRuleValues)
	bins := t.TempDir()
	r.konnectorBin = filepath.Join(bins, "konnector")
	backendBin := filepath.Join(bins, "backend")
	for bin, pkg := range map[string]string{r.konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector", backendBin: "github.com/kbind/kbind/backend/cmd/backend"} {
		if err := harness.Build(ctx, bin, pkg); err != nil {
			t.Fatal(err)
		}
	}
	r.provider = testenv.StartClusterT(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	r.consumer = testenv.StartClusterT(t, "consumer", testenv.ClusterOptions{InstallKbindCRDs: true})
	pkc, ckc := r.provider.KubeconfigPath, r.consumer.KubeconfigPath
	r.kubectl(pkc, "create", "namespace", "kbind")
	r.kubectl(ckc, "create", "namespace", "kbind")
	consumerUID := strings.TrimSpace(r.kubectl(ckc, "get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}"))

	// Prometheus first, so that it sees the konnector's first moments
	// (time to Ready).
	r.konnectorMetrics = harness.FreeAddr(t)
	backendMetrics := harness.FreeAddr(t)
	r.prom = StartPrometheus(t, promDir, PrometheusConfig(r.konnectorMetrics, backendMetrics, konnectorRules, backendRules))
	promStarted := time.Now()

	// The backend runs as its own user, with every right on the provider,
	// so that an admission policy can refuse it (and only it) deletions.
	r.apply(pkc, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kbind-test-backend}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kbind-test-backend}]
`)
	backendKubeconfig := filepath.Join(r.dir, "backend.kubeconfig")
	if err := harness.WriteImpersonating(pkc, backendKubeconfig, "kbind-test-backend"); err != nil {
		t.Fatal(err)
	}
	startBackend := func() {
		t.Helper()
		b, err := harness.NewProcess(backendBin, filepath.Join(r.dir, "backend.log"), "--kubeconfig", backendKubeconfig,
			"--metrics-bind-address", backendMetrics, "--stale-after", "10s", "--reap", "--reap-interval", "1s", "--reap-grace", "2s")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		r.backend = b
	}
	startBackend()
	r.startKonnector("1h") // the admin client certificate lives 7 days: the default warning would fire
	t.Cleanup(func() {
		r.konnector.Stop(ctx)
		r.backend.Stop(ctx)
		if t.Failed() {
			for _, name := range []string{"konnector.log", "backend.log"} {
				data, _ := os.ReadFile(filepath.Join(r.dir, name))
				t.Logf("%s:\n%s", name, tailLines(string(data), 80))
			}
		}
	})

	// A Connection binding Widgets, and a second one (no binding) the
	// scenarios break.
	r.apply(ckc, enginetest.ConnectionManifest("provider", r.provider.Kubeconfig)+`---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: widgets}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
---
`+enginetest.ConnectionManifest("second", r.provider.Kubeconfig))
	r.kubectl(ckc, "wait", "--for=condition=Ready", "connection/provider", "connection/second", "--timeout=60s")
	r.kubectl(ckc, "wait", "--for=condition=Ready", "clusterbinding/widgets", "--timeout=60s")
	r.kubectl(ckc, "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=60s")

	// A third Connection authenticates with a 30 s ServiceAccount token
	// the konnector renews (at two thirds of its lifetime).
	r.apply(pkc, serviceAccount("renewing")+grant("renewing", "kbind-test-renewing", "cluster-admin", ""))
	r.apply(ckc, enginetest.ConnectionManifest("renewing", r.tokenKubeconfig("renewing", 30*time.Second)))

	// Objects, synced up; status written on the provider, synced down.
	r.apply(ckc, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\n"+widgets("team", "w1", "w2", "w3"))
	r.writeStatus("Provisioned", "w1", "w2", "w3")
	enginetest.EventuallyWithin(t, 90*time.Second, "a renewal of the renewing Connection's token", func() error {
		series, err := r.prom.Query(ctx, `kbind_credentials_renewals_total{connection="renewing", result="success"} > 0`)
		if err != nil || len(series) == 0 {
			return fmt.Errorf("no successful renewal scraped yet (%v)", err)
		}
		return nil
	})
	t.Logf("setup took %s", time.Since(began).Round(time.Second))

	// Healthy: every target up, and no kbind alert fires for 10 s.
	r.healthy(10*time.Second, append(konnectorAlerts, backendAlerts...))

	times := &alertTimes{t: t}

	// The konnector stops: KbindKonnectorDown; past the backend's stale
	// window (10 s) its consumer is stale (KbindConsumerStale), and the
	// reaper, refused deletions by an admission policy, fails
	// (KbindReapFailing) — which also keeps the consumer's objects.
	r.apply(pkc, refusePolicy("kbind-test-refuse-reaping", `operations: [DELETE]
      resources: [widgets]`, `request.userInfo.username == 'kbind-test-backend'`))
	r.waitPolicy("delete", "widget", "-n", "team", "w1", "--dry-run=server", "--as", "kbind-test-backend")
	r.konnector.Stop(ctx)
	stopped := time.Now()
	times.add("KbindKonnectorDown: konnector stopped: fired after %s", r.waitAlert("KbindKonnectorDown", true, stopped, 30*time.Second))
	times.add("KbindConsumerStale: konnector stopped (backend --stale-after 10s, threshold 5s): fired after %s", r.waitAlert("KbindConsumerStale", true, stopped, 60*time.Second))
	times.add("KbindReapFailing: the reaper refused deleting the stale consumer's Widgets: fired after %s (since the konnector stopped)", r.waitAlert("KbindReapFailing", true, stopped, 60*time.Second))
	// What is left to reap exists only while reaping: held long enough for
	// the dashboard's range queries to find it.
	r.held(`kbind_backend_reap_candidates{consumer_cluster_uid="` + consumerUID + `"}`)
	// Back with the default expiry warning (7 days, the client
	// certificate's lifetime): KbindCredentialsExpiring.
	restarted := time.Now()
	r.startKonnector("")
	times.add("KbindKonnectorDown: resolved %s after the restart", r.waitAlert("KbindKonnectorDown", false, restarted, 30*time.Second))
	times.add("KbindConsumerStale: resolved %s after the restart", r.waitAlert("KbindConsumerStale", false, restarted, 30*time.Second))
	times.add("KbindCredentialsExpiring: konnector restarted with the default --credential-expiry-warning (7d) on a client certificate of 7 days: fired after %s", r.waitAlert("KbindCredentialsExpiring", true, restarted, 60*time.Second))
	healed := time.Now()
	r.startKonnector("1h")
	times.add("KbindCredentialsExpiring: resolved %s after the restart with 1h", r.waitAlert("KbindCredentialsExpiring", false, healed, 60*time.Second))
	r.kubectl(pkc, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "kbind-test-refuse-reaping")
	times.add("KbindReapFailing: resolved %s after the consumer came back (window 15s)", r.waitAlert("KbindReapFailing", false, restarted, 60*time.Second))
	if out := r.kubectl(pkc, "get", "widgets", "-n", "team", "-o", "name"); strings.Count(out, "widget") != 3 {
		t.Errorf("the consumer's Widgets on the provider after the refused reaping: %q, want all three", out)
	}

	// The backend stops: KbindBackendDown.
	r.backend.Stop(ctx)
	stopped = time.Now()
	times.add("KbindBackendDown: backend stopped: fired after %s", r.waitAlert("KbindBackendDown", true, stopped, 30*time.Second))
	restarted = time.Now()
	startBackend()
	times.add("KbindBackendDown: resolved %s after the restart", r.waitAlert("KbindBackendDown", false, restarted, 30*time.Second))

	// Three at once: a conflict (a provider object of someone else where a
	// consumer object maps), a provider that refuses one object (a
	// ValidatingAdmissionPolicy), and a storm of provider Events on one
	// object (30: 25 pass, the rest are dropped).
	r.apply(pkc, widgets("team", "foreign"))
	r.apply(pkc, refusePolicy("kbind-test-refuse-sync", `operations: [CREATE, UPDATE]
      resources: [widgets]`, `object.metadata.name == 'refused'`))
	r.waitPolicy("create", "--dry-run=server", "-f", r.file(widgets("team", "refused")))
	triggered := time.Now()
	r.apply(ckc, widgets("team", "foreign", "refused"))
	r.apply(pkc, r.eventStorm("team", "w1", 30))
	times.add("KbindConflicts: a foreign provider Widget where a consumer Widget maps: fired after %s", r.waitAlert("KbindConflicts", true, triggered, 60*time.Second))
	times.add("KbindSyncFailures: the provider refuses one Widget (admission policy): fired after %s", r.waitAlert("KbindSyncFailures", true, triggered, 60*time.Second))
	times.add("KbindProviderEventsDropped: 30 provider Events on one object: fired after %s", r.waitAlert("KbindProviderEventsDropped", true, triggered, 60*time.Second))
	r.held(`kbind_conflicts{connection="provider"}`)
	// Meanwhile statuses change again on the provider and specs on the
	// consumer, for the latency panels (their rate needs an increase
	// Prometheus scraped; the konnector restarted since setup, so each
	// latency series is born again with its first observation).
	r.latencyIncrease("down", func() { r.writeStatus("Resized", "w1") }, func() { r.writeStatus("Resized", "w2", "w3") })
	spec := func(w string) func() {
		return func() {
			r.kubectl(ckc, "patch", "widget", "-n", "team", w, "--type=merge", "-p", `{"spec":{"size":2}}`)
		}
	}
	r.latencyIncrease("up", spec("w2"), spec("w3"))
	healed = time.Now()
	r.kubectl(pkc, "delete", "widget", "-n", "team", "foreign")
	r.kubectl(pkc, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "kbind-test-refuse-sync")
	times.add("KbindConflicts: resolved %s after the foreign Widget was deleted", r.waitAlert("KbindConflicts", false, healed, 60*time.Second))
	times.add("KbindSyncFailures: resolved %s after the policy was deleted (window 15s)", r.waitAlert("KbindSyncFailures", false, healed, 90*time.Second))
	times.add("KbindProviderEventsDropped: resolved %s after the storm (window 15s)", r.waitAlert("KbindProviderEventsDropped", false, healed, 60*time.Second))

	// The second Connection's Secret gets a token the provider refuses:
	// KbindConnectionNotReady.
	broken := time.Now()
	r.apply(ckc, enginetest.ConnectionManifest("second", r.badTokenKubeconfig()))
	times.add("KbindConnectionNotReady: Connection second's Secret holds a refused token: fired after %s", r.waitAlert("KbindConnectionNotReady", true, broken, 60*time.Second))
	healed = time.Now()
	r.apply(ckc, enginetest.ConnectionManifest("second", r.provider.Kubeconfig))
	times.add("KbindConnectionNotReady: resolved %s after the Secret was restored", r.waitAlert("KbindConnectionNotReady", false, healed, 60*time.Second))

	// Someone takes the second Connection's heartbeat Lease over on the
	// provider: the konnector does not renew a Lease another holds, so its
	// heartbeat ages (KbindHeartbeatStale); the backend counts the Lease as
	// taken over.
	lease := "second-" + consumerUID[:10]
	takenOver := time.Now()
	r.kubectl(pkc, "patch", "lease", "-n", "kbind", lease, "--type=merge", "-p", `{"spec":{"holderIdentity":"someone-else"}}`)
	times.add("KbindHeartbeatStale: Connection second's heartbeat Lease taken over on the provider (threshold 5s): fired after %s", r.waitAlert("KbindHeartbeatStale", true, takenOver, 60*time.Second))
	r.held(`kbind_backend_heartbeat_leases_taken_over{consumer_cluster_uid="` + consumerUID + `"}`)
	healed = time.Now()
	r.kubectl(pkc, "patch", "lease", "-n", "kbind", lease, "--type=merge", "-p", `{"spec":{"holderIdentity":"`+consumerUID+`"}}`)
	times.add("KbindHeartbeatStale: resolved %s after the Lease was handed back", r.waitAlert("KbindHeartbeatStale", false, healed, 60*time.Second))

	// A Connection whose ServiceAccount may do all a konnector does but
	// list Gadgets, binding Gadgets: its syncer waits for its provider
	// informer (KbindSyncerNotReady) until the list is granted.
	r.apply(pkc, serviceAccount("limited")+grant("limited", "kbind-test-limited", "kbind-test-limited", `
- {apiGroups: ["", coordination.k8s.io, apiextensions.k8s.io, events.k8s.io, authorization.k8s.io, authentication.k8s.io], resources: ["*"], verbs: ["*"]}
- {apiGroups: [example.org], resources: [widgets, widgets/status], verbs: ["*"]}`))
	triggered = time.Now()
	r.apply(ckc, enginetest.ConnectionManifest("limited", r.tokenKubeconfig("limited", 2*time.Hour))+`---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: gadgets}
spec:
  connectionRef: {name: limited}
  apis: [{name: gadgets.example.org}]
`)
	times.add("KbindSyncerNotReady: a binding of Gadgets through a Connection that may not list them on the provider: fired after %s", r.waitAlert("KbindSyncerNotReady", true, triggered, 90*time.Second))
	healed = time.Now()
	r.apply(pkc, grant("limited", "kbind-test-limited-gadgets", "kbind-test-limited-gadgets", `
- {apiGroups: [example.org], resources: [gadgets, gadgets/status], verbs: ["*"]}`))
	times.add("KbindSyncerNotReady: resolved %s after the list of Gadgets was granted", r.waitAlert("KbindSyncerNotReady", false, healed, 120*time.Second))

	// A Connection whose token may not be renewed (an admission policy
	// refuses its TokenRequest): KbindCredentialRenewalFailing.
	r.apply(pkc, serviceAccount("norenew")+grant("norenew", "kbind-test-norenew", "cluster-admin", "")+refusePolicy("kbind-test-refuse-renewal", `apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [serviceaccounts/token]`, `request.userInfo.username == 'system:serviceaccount:kbind:norenew'`))
	r.waitPolicy("create", "token", "norenew", "-n", "kbind", "--as", "system:serviceaccount:kbind:norenew")
	triggered = time.Now()
	r.apply(ckc, enginetest.ConnectionManifest("norenew", r.tokenKubeconfig("norenew", 30*time.Second)))
	times.add("KbindCredentialRenewalFailing: a 30 s token whose renewal the provider refuses: fired after %s", r.waitAlert("KbindCredentialRenewalFailing", true, triggered, 90*time.Second))
	healed = time.Now()
	r.kubectl(ckc, "delete", "connection", "norenew")
	r.kubectl(pkc, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "kbind-test-refuse-renewal")
	times.add("KbindCredentialRenewalFailing: resolved %s after the Connection was deleted (window 30s)", r.waitAlert("KbindCredentialRenewalFailing", false, healed, 90*time.Second))

	// Everything healed: nothing fires any more.
	enginetest.EventuallyWithin(t, 90*time.Second, "no kbind alert firing after the scenarios", func() error {
		names, err := r.prom.Firing(ctx)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			return fmt.Errorf("firing: %v", names)
		}
		return nil
	})
	t.Logf("alerts, the scenario that fired each and the time it took:\n%s", strings.Join(times.rows, "\n"))

	// Every dashboard query, as Grafana evaluates it: a range query over the
	// whole test, step $__interval.
	r.checkDashboards(promStarted, consumerUID)
	t.Logf("whole test took %s", time.Since(began).Round(time.Second))
}

// writeStatus writes status.phase on the provider copies of the Widgets
// team/names and waits until it is down on the consumer objects.
func (r *rig) writeStatus(phase string, names ...string) {
	r.t.Helper()
	for _, w := range names {
		enginetest.EventuallyWithin(r.t, 60*time.Second, "widget "+w+" on the provider", func() error {
			_, err := testenv.Kubectl(r.ctx, r.provider.KubeconfigPath, "get", "widget", "-n", "team", w)
			return err
		})
		r.kubectl(r.provider.KubeconfigPath, "patch", "widget", "-n", "team", w, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"`+phase+`"}}`)
	}
	for _, w := range names {
		enginetest.EventuallyWithin(r.t, 60*time.Second, "widget "+w+"'s status on the consumer", func() error {
			out, err := testenv.Kubectl(r.ctx, r.consumer.KubeconfigPath, "get", "widget", "-n", "team", w, "-o", "jsonpath={.status.phase}")
			if err != nil || out != phase {
				return fmt.Errorf("status.phase %q: %v", out, err)
			}
			return nil
		})
	}
}

// latencyIncrease makes the rate of the provider Connection's
// kbind_sync_latency_seconds series of direction show an increase: a
// series born with its first observations starts at their count, so
// rate() has nothing to show until a later observation is scraped — and
// several observations landing within one scrape make no increase. first
// makes a change in that direction; once Prometheus holds the series, then
// makes another, and the increase is waited for.
func (r *rig) latencyIncrease(direction string, first, then func()) {
	r.t.Helper()
	series := `kbind_sync_latency_seconds_count{connection="provider", direction="` + direction + `"}`
	first()
	enginetest.EventuallyWithin(r.t, 60*time.Second, "a scraped "+series, func() error {
		got, err := r.prom.Query(r.ctx, series)
		if err != nil || len(got) == 0 {
			return fmt.Errorf("%v (%v)", got, err)
		}
		return nil
	})
	then()
	enginetest.EventuallyWithin(r.t, 60*time.Second, "an increase of "+series, func() error {
		got, err := r.prom.Query(r.ctx, "increase("+series+"[1m]) > 0")
		if err != nil || len(got) == 0 {
			return fmt.Errorf("%v (%v)", got, err)
		}
		return nil
	})
}

// held waits until Prometheus holds 10 samples (10 s) of a series of
// selector, so that a dashboard's range query, a sample every 5 s, sees a
// series that lives only during a scenario.
func (r *rig) held(selector string) {
	r.t.Helper()
	enginetest.EventuallyWithin(r.t, 60*time.Second, "10 samples of "+selector, func() error {
		series, err := r.prom.Query(r.ctx, "count_over_time("+selector+"[1m])")
		if err != nil {
			return err
		}
		if len(series) == 0 || len(series[0].Values) == 0 || series[0].Values[0] < 10 {
			return fmt.Errorf("%v", series)
		}
		return nil
	})
}

// healthy waits until both targets are up and the rules have been
// evaluated, then asserts that no alert of alerts fires for hold.
func (r *rig) healthy(hold time.Duration, alerts []string) {
	r.t.Helper()
	enginetest.EventuallyWithin(r.t, 60*time.Second, "both targets up and no kbind alert firing", func() error {
		up, err := r.prom.Query(r.ctx, `up == 1`)
		if err != nil {
			return err
		}
		if len(up) != 2 {
			return fmt.Errorf("%d targets up, want 2", len(up))
		}
		names, err := r.prom.Firing(r.ctx)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			return fmt.Errorf("firing: %v", names)
		}
		return nil
	})
	deadline := time.Now().Add(hold)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range tick.C {
		names, err := r.prom.Firing(r.ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, n := range names {
			if slices.Contains(alerts, n) {
				r.t.Fatalf("alert %s fires while all is well (firing: %v)", n, names)
			}
		}
		if time.Now().After(deadline) {
			break
		}
	}
	r.t.Logf("healthy: no kbind alert fired for %s (%d alerts loaded: %v)", hold, len(alerts), alerts)
}

// checkDashboards evaluates every query of both dashboards (panels and
// variables) with the template variables set to this test's values, over
// the test's time range, and requires data: at least one sample that is a
// number. A misspelled or renamed metric, label or function fails here.
func (r *rig) checkDashboards(from time.Time, consumerUID string) {
	r.t.Helper()
	grafana := map[string]string{"__rate_interval": "1m", "__interval": "5s"}
	// $connection as Grafana renders a multi-value selection of two
	// Connections: provider (the bound Widgets) and renewing (the only one
	// whose token renews, for the renewals panel).
	boards := []struct {
		file string
		vars map[string]string
	}{
		{"../../charts/konnector/files/dashboards/kbind-konnector.json", map[string]string{"job": konnectorJob, "connection": "(provider|renewing)", "api": "Widget.example.org"}},
		{"../../charts/backend/files/dashboards/kbind-backend.json", map[string]string{"job": backendJob, "consumer": consumerUID}},
	}
	// The check can fail: a misspelled metric returns nothing.
	if series, err := r.prom.QueryRange(r.ctx, `kbind_connection_readyy{job="`+konnectorJob+`"}`, from, time.Now(), 5*time.Second); err != nil || len(series) != 0 {
		r.t.Fatalf("a misspelled metric returned %v, %v: the check below would prove nothing", series, err)
	}
	for _, b := range boards {
		d, err := harness.LoadDashboard(b.file)
		if err != nil {
			r.t.Fatal(err)
		}
		vars := map[string]string{}
		for k, v := range grafana {
			vars[k] = v
		}
		for k, v := range b.vars {
			vars[k] = v
		}
		r.t.Logf("dashboard %s: variables %v", d.UID, vars)
		for _, q := range d.Queries() {
			expr, err := harness.Expand(q.Expr, vars)
			if err != nil {
				r.t.Errorf("%s %s: %v", d.UID, q.Panel, err)
				continue
			}
			series, err := r.prom.QueryRange(r.ctx, expr, from, time.Now(), 5*time.Second)
			if err != nil {
				r.t.Errorf("%s %s: %v", d.UID, q.Panel, err)
				continue
			}
			numbers := 0
			for _, s := range series {
				numbers += s.RealValues()
			}
			if numbers == 0 {
				r.t.Errorf("%s %s returns no data: %s (%d series, no sample a number)", d.UID, q.Panel, expr, len(series))
				continue
			}
			r.t.Logf("%s %s: %d series, %d samples", d.UID, q.Panel, len(series), numbers)
		}
	}
}

// waitPolicy waits until the admission policy named in the message of a
// refusal takes effect (the API server loads policies asynchronously): the
// request args, which the policy refuses, is refused.
func (r *rig) waitPolicy(args ...string) {
	r.t.Helper()
	enginetest.EventuallyWithin(r.t, 30*time.Second, "the admission policy in effect", func() error {
		out, err := testenv.Kubectl(r.ctx, r.provider.KubeconfigPath, args...)
		if err == nil || !strings.Contains(out, "refused by the test") {
			return fmt.Errorf("not refused yet: %s", out)
		}
		return nil
	})
}

// refusePolicy is a ValidatingAdmissionPolicy (with its binding) named name
// that refuses the requests rules match where condition holds.
func refusePolicy(name, rules, condition string) string {
	if !strings.Contains(rules, "apiGroups") {
		rules = "apiGroups: [example.org]\n      apiVersions: [\"*\"]\n      " + rules
	}
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - %[2]s
  matchConditions:
  - name: target
    expression: %[3]q
  validations:
  - expression: "false"
    reason: Forbidden
    message: refused by the test (%[1]s)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Deny]
`, name, rules, condition)
}

func widgets(ns string, names ...string) string {
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: {size: 1}\n", n, ns))
	}
	return strings.Join(out, "---\n")
}

// eventStorm is n new Events on the provider's Widget ns/name, as a
// provider controller records them.
func (r *rig) eventStorm(ns, name string, n int) string {
	uid := r.kubectl(r.provider.KubeconfigPath, "get", "widget", "-n", ns, name, "-o", "jsonpath={.metadata.uid}")
	now := time.Now().UTC().Format(time.RFC3339)
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: %[2]s.storm-%[4]d, namespace: %[1]s}
involvedObject: {apiVersion: example.org/v1alpha1, kind: Widget, namespace: %[1]s, name: %[2]s, uid: %[3]s}
reason: Storm
message: event %[4]d of a storm
type: Warning
count: 1
firstTimestamp: %[5]s
lastTimestamp: %[5]s
source: {component: widget-controller}
`, ns, name, uid, i, now))
	}
	return strings.Join(out, "---\n")
}

// tokenKubeconfig is the provider's kubeconfig authenticating as the
// ServiceAccount kbind/sa with a token of lifetime.
func (r *rig) tokenKubeconfig(sa string, lifetime time.Duration) []byte {
	r.t.Helper()
	token, err := r.provider.ServiceAccountToken(r.ctx, "kbind", sa, lifetime)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.withToken(token)
}

// badTokenKubeconfig is the provider's kubeconfig with a token the
// provider does not know.
func (r *rig) badTokenKubeconfig() []byte {
	return r.withToken("not-a-token-the-provider-knows")
}

func (r *rig) withToken(token string) []byte {
	r.t.Helper()
	kc, err := clientcmd.Load(r.provider.Kubeconfig)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, u := range kc.AuthInfos {
		u.Token, u.ClientCertificateData, u.ClientKeyData = token, nil, nil
	}
	out, err := clientcmd.Write(*kc)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// serviceAccount is the manifest of the provider ServiceAccount kbind/name.
func serviceAccount(name string) string {
	return "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: " + name + ", namespace: kbind}\n---\n"
}

// grant is the manifest that binds the ClusterRole role to the
// ServiceAccount kbind/sa through the ClusterRoleBinding binding, creating
// the role with rules (a YAML list) unless rules is "" (an existing role).
func grant(sa, binding, role, rules string) string {
	out := ""
	if rules != "" {
		out = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: " + role + "}\nrules:" + rules + "\n---\n"
	}
	return out + "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: " + binding + "}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + role + "}\n" +
		"subjects: [{kind: ServiceAccount, name: " + sa + ", namespace: kbind}]\n---\n"
}
