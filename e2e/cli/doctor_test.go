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

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// report is the JSON of kubectl kbind doctor -o json (docs/cli.md#doctor).
type report struct {
	Version  string `json:"version"`
	Healthy  bool   `json:"healthy"`
	Checked  []string
	Findings []struct {
		Check    string `json:"check"`
		Severity string `json:"severity"`
		Object   struct {
			Cluster, Kind, Namespace, Name string
		} `json:"object"`
		Field, Problem, Evidence, Fix, Doc string
	} `json:"findings"`
	Unchecked []string `json:"unchecked"`
}

// problems are the checks of the findings that are not notes.
func (r report) problems() []string {
	out := []string{}
	for _, f := range r.Findings {
		if f.Severity != "Note" {
			out = append(out, f.Check)
		}
	}
	slices.Sort(out)
	return out
}

func (r report) finding(check string) string {
	for _, f := range r.Findings {
		if f.Check == check {
			return fmt.Sprintf("%s %s: %s | evidence: %s | fix: %s | see %s", f.Severity, f.Object.Kind+" "+f.Object.Name, f.Problem, f.Evidence, f.Fix, f.Doc)
		}
	}
	return ""
}

// logDoctor logs the text form of kubectl kbind doctor, as a user sees it.
func logDoctor(t *testing.T, consumer string, args ...string) {
	t.Helper()
	text, _, _ := plugin(t, append([]string{"--kubeconfig", consumer, "doctor"}, args...)...)
	t.Logf("$ kubectl kbind doctor %s\n%s", strings.Join(args, " "), text)
}

// doctor runs kubectl kbind doctor -o json on the consumer and returns the
// report and the exit code.
func doctor(t *testing.T, consumer string, args ...string) (report, int) {
	t.Helper()
	out, errOut, code := plugin(t, append([]string{"--kubeconfig", consumer, "doctor", "-o", "json"}, args...)...)
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s%s", err, out, errOut)
	}
	if r.Version != "doctor.kbind.io/v1" {
		t.Errorf("report version %q", r.Version)
	}
	return r, code
}

// expectFindings runs doctor until it reports exactly the checks want
// (besides notes), each finding containing the strings in has, and exit 1.
func expectFindings(t *testing.T, consumer string, args []string, want []string, has map[string][]string) report {
	t.Helper()
	slices.Sort(want)
	var last report
	enginetest.EventuallyWithin(t, 60*time.Second, fmt.Sprintf("doctor %v reports %v", args, want), func() error {
		r, code := doctor(t, consumer, args...)
		last = r
		if got := r.problems(); !reflect.DeepEqual(got, want) || code != 1 || r.Healthy {
			return fmt.Errorf("exit %d, findings %v, want %v", code, got, want)
		}
		for check, subs := range has {
			f := r.finding(check)
			for _, s := range subs {
				if !strings.Contains(f, s) {
					return fmt.Errorf("finding %s lacks %q: %s", check, s, f)
				}
			}
		}
		return nil
	})
	logDoctor(t, consumer, args...)
	return last
}

// TestDoctor: on a healthy pair doctor exits 0 with nothing to report;
// for each broken state of the troubleshooting guide it reports exactly
// that finding, with the fix.
func TestDoctor(t *testing.T) {
	t.Parallel() // its own pair (and konnector): a consumer identity of its own
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("sprockets", "sprocket", "Sprocket", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org", "gadgets.example.org")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "team-a.yaml", mustPlugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org")))
	konnector := startKonnector(t, consumer)
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "clusterbinding/provider", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "w1.yaml", widget("default", "w1")))
	eventuallyGet(t, provider, "default/w1 on the provider", "widget", "-n", "kbind-team-a", "default.w1")

	t.Run("healthy", func(t *testing.T) {
		enginetest.EventuallyWithin(t, 30*time.Second, "doctor finds nothing", func() error {
			r, code := doctor(t, consumer)
			if code != 0 || !r.Healthy || len(r.problems()) != 0 {
				return fmt.Errorf("exit %d healthy %v findings %v", code, r.Healthy, r.problems())
			}
			if !slices.Contains(r.Checked, "Connection provider") || !slices.Contains(r.Checked, "ClusterBinding provider") {
				return fmt.Errorf("checked %v", r.Checked)
			}
			return nil
		})
		logDoctor(t, consumer)
		// As a kubectl plugin: kubectl finds kubectl-kbind on PATH.
		kubectlBin, err := testenv.KubectlPath()
		if err != nil {
			t.Fatal(err)
		}
		viaKubectl := exec.Command(kubectlBin, "kbind", "doctor", "provider", "--kubeconfig", consumer)
		viaKubectl.Env = append(os.Environ(), "PATH="+filepath.Dir(pluginBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := viaKubectl.CombinedOutput(); err != nil || !strings.Contains(string(out), "no problems found") {
			t.Errorf("kubectl kbind doctor: %v\n%s", err, out)
		}
		// Instance counts refresh with the binding's periodic pass.
		enginetest.EventuallyWithin(t, 60*time.Second, "status shows the synced Widget", func() error {
			out := mustPlugin(t, "--kubeconfig", consumer, "status")
			for _, want := range []string{"Namespace kbind-team-a", "ClusterBinding/provider"} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("status lacks %q", want)
				}
			}
			// The binding's row: API, ROUTES, OBJECTS 1, SYNCED 1.
			if !regexp.MustCompile(`widgets\.example\.org\s+every namespace\s+1\s+1\s`).MatchString(out) {
				return fmt.Errorf("status does not count the synced Widget on the binding's row:\n%s", out)
			}
			if strings.Contains(out, "stale") || strings.Contains(out, "unknown") {
				return fmt.Errorf("status of a live heartbeat:\n%s", out)
			}
			return nil
		})
	})

	t.Run("the Connection's Secret is missing", func(t *testing.T) {
		kubectl(t, consumer, "apply", "-f", writeFile(t, "missing.yaml", connectionYAML("missing", "missing-kubeconfig")))
		expectFindings(t, consumer, []string{"missing"}, []string{"connection.secret"}, map[string][]string{
			"connection.secret": {"kbind/missing-kubeconfig does not exist", "-n kbind create secret generic missing-kubeconfig --from-file=kubeconfig="}})
	})

	t.Run("the kubeconfig is malformed", func(t *testing.T) {
		kubectl(t, consumer, "-n", "kbind", "create", "secret", "generic", "malformed-kubeconfig", "--from-literal=kubeconfig=clusters: [not a kubeconfig")
		kubectl(t, consumer, "apply", "-f", writeFile(t, "malformed.yaml", connectionYAML("malformed", "malformed-kubeconfig")))
		r := expectFindings(t, consumer, []string{"malformed"}, []string{"connection.kubeconfig"}, map[string][]string{
			"connection.kubeconfig": {"not a kubeconfig kbind can use", "not valid YAML"}})
		if f := r.finding("connection.kubeconfig"); strings.Contains(f, "not a kubeconfig\"") || strings.Contains(f, "[not") {
			t.Errorf("the finding quotes the Secret's content: %s", f)
		}
	})

	t.Run("the provider is unreachable", func(t *testing.T) {
		cfg := rest.CopyConfig(pair.Provider.Config)
		cfg.Host = "https://" + harness.FreeAddr(t)
		// An opaque token: the test API server's client certificates
		// live 7 days, which doctor rightly reports as expiring.
		cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, "opaque-unreachable"
		kc, err := testenv.KubeconfigFor("unreachable", cfg)
		if err != nil {
			t.Fatal(err)
		}
		kubectl(t, consumer, "-n", "kbind", "create", "secret", "generic", "unreachable-kubeconfig", "--from-file=kubeconfig="+writeFile(t, "unreachable.kubeconfig", string(kc)))
		kubectl(t, consumer, "apply", "-f", writeFile(t, "unreachable.yaml", connectionYAML("unreachable", "unreachable-kubeconfig")))
		expectFindings(t, consumer, []string{"unreachable"}, []string{"connection.unreachable"}, map[string][]string{
			"connection.unreachable": {"cannot be reached", "connection refused"}})
	})

	t.Run("an API that is not exported and a Kind instead of plural.group", func(t *testing.T) {
		kubectl(t, consumer, "apply", "-f", writeFile(t, "mistakes.yaml", `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: mistakes}
spec:
  connectionRef: {name: provider}
  apis: [{name: sprockets.example.org}, {name: Widget}]
`))
		expectFindings(t, consumer, []string{"provider"}, []string{"binding.apiName", "binding.notExported"}, map[string][]string{
			"binding.notExported": {"sprockets.example.org is not exported", "kbind export sprockets.example.org"},
			"binding.apiName":     {`"Widget" is not an API name`, `"path":"/spec/apis/1/name","value":"widgets.example.org"`}})
		kubectl(t, consumer, "delete", "clusterbinding", "mistakes", "--timeout=60s")
	})

	t.Run("a missing RBAC verb", func(t *testing.T) {
		verbs := kubectl(t, provider, "get", "role", "-n", "kbind-team-a", "kbind-consumer-team-a", "-o", "jsonpath={.rules[0].verbs}")
		kubectl(t, provider, "patch", "role", "-n", "kbind-team-a", "kbind-consumer-team-a", "--type=json",
			"-p", `[{"op":"replace","path":"/rules/0/verbs","value":["get","list","watch","create","update","patch"]}]`)
		expectFindings(t, consumer, []string{"provider"}, []string{"connection.rbac"}, map[string][]string{
			"connection.rbac": {"does not allow system:serviceaccount:kbind:kbind-consumer-team-a to delete widgets.example.org in namespace kbind-team-a",
				"kbind grant team-a --apis widgets.example.org --isolation Namespace --connection"}})
		kubectl(t, provider, "patch", "role", "-n", "kbind-team-a", "kbind-consumer-team-a", "--type=json",
			"-p", fmt.Sprintf(`[{"op":"replace","path":"/rules/0/verbs","value":%s}]`, verbs))
	})

	t.Run("a foreign object on the provider", func(t *testing.T) {
		kubectl(t, provider, "apply", "-f", writeFile(t, "foreign.yaml", widget("kbind-team-a", "default.w9")))
		kubectl(t, consumer, "apply", "-f", writeFile(t, "w9.yaml", widget("default", "w9")))
		expectFindings(t, consumer, []string{"provider"}, []string{"object.conflict"}, map[string][]string{
			"object.conflict": {"ForeignObjectExists", "kbind-team-a/default.w9", "no kbind markers", `conflictPolicy":"Adopt"`}})
		// With an administrator's provider context, the fixes name it.
		r, _ := doctor(t, mergedKubeconfig(t, consumer, provider), "provider", "--provider-context", "provider")
		if f := r.finding("object.conflict"); !strings.Contains(f, "kubectl --context=provider -n kbind-team-a get widgets.example.org default.w9") || !strings.Contains(f, "no kbind markers") {
			t.Errorf("with --provider-context: %s", f)
		}
		kubectl(t, consumer, "delete", "widget", "-n", "default", "w9", "--timeout=60s")
		kubectl(t, provider, "delete", "widget", "-n", "kbind-team-a", "default.w9")
	})

	t.Run("an object stuck deleting while the provider is down", func(t *testing.T) {
		proxy := enginetest.NewProxy(t, pair.Provider.Config)
		kubectl(t, consumer, "-n", "kbind", "create", "secret", "generic", "proxied-kubeconfig", "--from-file=kubeconfig="+writeFile(t, "proxied.kubeconfig", string(proxy.Kubeconfig(t))))
		kubectl(t, consumer, "apply", "-f", writeFile(t, "proxied.yaml", connectionYAML("proxied", "proxied-kubeconfig")+`---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: gadgets}
spec:
  connectionRef: {name: proxied}
  apis: [{name: gadgets.example.org}]
`))
		kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/proxied", "clusterbinding/gadgets", "--timeout=60s")
		kubectl(t, consumer, "apply", "-f", writeFile(t, "g1.yaml", strings.ReplaceAll(widget("default", "g1"), "Widget", "Gadget")))
		eventuallyGet(t, provider, "default/g1 on the provider", "gadget", "-n", "default", "g1")
		proxy.SetFault(func(*http.Request) enginetest.Fault { return enginetest.Fault{Status: http.StatusServiceUnavailable} })
		kubectl(t, consumer, "delete", "gadget", "-n", "default", "g1", "--wait=false")
		expectFindings(t, consumer, []string{"proxied", "--stuck-after=1s"}, []string{"connection.unreachable", "object.stuckDeleting"}, map[string][]string{
			"object.stuckDeleting": {"finalizer core.kbind.io/syncer", "cannot reach the provider", "do not remove the finalizer"}})
		proxy.SetFault(nil)
		enginetest.EventuallyWithin(t, 60*time.Second, "the deletion completes once the provider is back", func() error {
			if out, _ := testenv.Kubectl(context.Background(), consumer, "get", "gadget", "-n", "default", "g1", "--ignore-not-found"); out != "" {
				return fmt.Errorf("still there: %s", out)
			}
			return nil
		})
		kubectl(t, consumer, "delete", "clusterbinding", "gadgets", "--timeout=60s")
	})

	t.Run("a stale heartbeat", func(t *testing.T) {
		_ = konnector.Process.Kill()
		_, _ = konnector.Process.Wait()
		lease := strings.TrimSpace(kubectl(t, provider, "get", "lease", "-n", "kbind-team-a", "-l", "core.kbind.io/managed=true", "-o", "name"))
		old := time.Now().Add(-10 * time.Minute).UTC().Format("2006-01-02T15:04:05.000000Z")
		kubectl(t, provider, "patch", "-n", "kbind-team-a", lease, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"renewTime":%q}}`, old))
		expectFindings(t, consumer, []string{"provider"}, []string{"connection.heartbeat"}, map[string][]string{
			"connection.heartbeat": {"the heartbeat is stale: the Lease was last renewed 10m"}})
		if out := mustPlugin(t, "--kubeconfig", consumer, "status"); !strings.Contains(out, "(stale)") {
			t.Errorf("status does not show the stale heartbeat:\n%s", out)
		}
	})

	t.Run("revoked credentials", func(t *testing.T) {
		mustPlugin(t, "--kubeconfig", provider, "revoke", "team-a")
		expectFindings(t, consumer, []string{"provider"}, []string{"connection.credentials"}, map[string][]string{
			"connection.credentials": {"refuses the Connection's credentials (Unauthorized)", "kubectl kbind grant team-a --apis widgets.example.org"}})
	})

	t.Run("the consumer cannot be read", func(t *testing.T) {
		empty := writeFile(t, "empty.kubeconfig", "apiVersion: v1\nkind: Config\n")
		if _, _, code := plugin(t, "--kubeconfig", empty, "doctor"); code != 2 {
			t.Errorf("doctor without a usable consumer: exit %d, want 2", code)
		}
		if _, _, code := plugin(t, "--kubeconfig", consumer, "doctor", "nope"); code != 2 {
			t.Errorf("doctor of a Connection that does not exist: exit %d, want 2", code)
		}
	})
}

func connectionYAML(name, secret string) string {
	return fmt.Sprintf(`apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: %s}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: %s}
`, name, secret)
}

// mergedKubeconfig writes one kubeconfig with the contexts of both files,
// the first one's current.
func mergedKubeconfig(t *testing.T, first, second string) string {
	t.Helper()
	kubectlBin, err := testenv.KubectlPath()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectlBin, "config", "view", "--flatten")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+first+string(os.PathListSeparator)+second)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl config view --flatten: %v", err)
	}
	return writeFile(t, "merged.kubeconfig", string(out))
}
