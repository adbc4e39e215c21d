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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// fixTimeout bounds one fix's command (a helm install included).
const fixTimeout = 2 * time.Minute

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error
)

// helm builds the Helm CLI of the e2e module's Helm SDK once: the test's
// real helm.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kbind-helm-")
		if err != nil {
			helmErr = err
			return
		}
		helmBin = filepath.Join(dir, "helm")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		helmErr = harness.Build(ctx, helmBin, "helm.sh/helm/v3/cmd/helm")
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmBin
}

// fixer runs the fixes doctor prints the way a user pastes them: each
// line through sh -c, comments dropped, with kubectl, kubectl-kbind (as
// kubectl kbind) and helm on PATH, KUBECONFIG the pair's kubeconfig (its
// contexts consumer and provider), in a directory with the checkout's charts/.
type fixer struct {
	env  []string
	root string
}

func newFixer(t *testing.T, kubeconfig string) *fixer {
	t.Helper()
	bin := t.TempDir()
	kubectlBin, err := testenv.KubectlPath()
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": kubectlBin, "kubectl-kbind": pluginBin, "helm": helm(t)} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A directory of its own (fixes write bundle.yaml) where charts/ is
	// the checkout's, as in a clone of kbind.
	root := t.TempDir()
	if err := os.Symlink(filepath.Join(repo, "charts"), filepath.Join(root, "charts")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	return &fixer{root: root, env: append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+"/usr/bin:/bin", "KUBECONFIG="+kubeconfig,
		"HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))}
}

var placeholder = regexp.MustCompile(`<[a-z][^<>]*>`)

// run executes each command line of fix; fill replaces placeholders (the
// one thing only the user knows, e.g. the provider kubeconfig file). A
// placeholder left, or a failing command, fails the test.
func (f *fixer) run(t *testing.T, fix string, fill map[string]string) {
	t.Helper()
	ran := 0
	for _, line := range strings.Split(fix, "\n") {
		command, _, _ := strings.Cut(line, "#")
		command = strings.TrimSpace(command)
		if command == "" {
			continue
		}
		for k, v := range fill {
			command = strings.ReplaceAll(command, k, v)
		}
		if p := placeholder.FindString(command); p != "" {
			t.Fatalf("the fix does not run as printed: %s in %q", p, line)
		}
		ctx, cancel := context.WithTimeout(context.Background(), fixTimeout)
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Env, cmd.Dir = f.env, f.root
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("$ %s\n%s", command, out)
		if err != nil {
			t.Fatalf("the fix fails as printed: %q: %v\n%s", command, err, out)
		}
		ran++
	}
	if ran == 0 {
		t.Fatalf("the fix has no command to run: %q", fix)
	}
}

// fixFor runs doctor until it reports check on the object named name, and
// returns that finding's fix (and the whole finding, for its text).
func fixFor(t *testing.T, kubeconfig string, args []string, check, name string) (fix, text string) {
	t.Helper()
	enginetest.EventuallyWithin(t, 60*time.Second, fmt.Sprintf("doctor %v reports %s on %s", args, check, name), func() error {
		r, _ := doctor(t, kubeconfig, args...)
		for _, f := range r.Findings {
			if f.Check == check && f.Object.Name == name {
				fix = f.Fix
				text = fmt.Sprintf("%s: %s | evidence: %s | fix: %s", f.Object.Kind, f.Problem, f.Evidence, f.Fix)
				return nil
			}
		}
		return fmt.Errorf("findings %v", r.problems())
	})
	logDoctor(t, kubeconfig, args...)
	return fix, text
}

// connectionToken is the bearer token of the kubeconfig the consumer's
// Connection "provider" uses (the grant bundle's Secret).
func connectionToken(t *testing.T, consumer string) string {
	t.Helper()
	kc, err := clientcmd.Load([]byte(decode(t, kubectl(t, consumer, "get", "secret", "-n", "kbind", "provider-kubeconfig", "-o", "jsonpath={.data.kubeconfig}"))))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range kc.AuthInfos {
		if u.Token != "" {
			return u.Token
		}
	}
	t.Fatal("the Connection's kubeconfig holds no token")
	return ""
}

// gone waits until doctor no longer reports check on the object named name.
func gone(t *testing.T, kubeconfig string, args []string, check, name string) {
	t.Helper()
	enginetest.EventuallyWithin(t, 60*time.Second, fmt.Sprintf("doctor %v no longer reports %s on %s", args, check, name), func() error {
		r, _ := doctor(t, kubeconfig, args...)
		for _, f := range r.Findings {
			if f.Check == check && f.Object.Name == name {
				return fmt.Errorf("still: %s", r.finding(check))
			}
		}
		return nil
	})
}

// startKonnectorWith is startKonnector with extra flags; stop ends it.
func startKonnectorWith(t *testing.T, kubeconfig string, extra ...string) (stop func()) {
	t.Helper()
	log := &enginetest.SyncBuffer{}
	cmd := exec.Command(konnectorBin, append([]string{"--kubeconfig", kubeconfig, "--health-probe-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "0", "--discovery-interval", "2s", "--heartbeat-interval", "2s"}, extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
			if t.Failed() {
				t.Logf("konnector %v log:\n%s", extra, log.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestDoctorFixesRun: each fix doctor prints, in the scenario that
// produces it, runs as printed (kubectl, kubectl kbind and helm through
// sh -c) and makes its finding go (docs/cli.md#doctor).
func TestDoctorFixesRun(t *testing.T) {
	t.Parallel() // its own pair and konnector
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("sprockets", "sprocket", "Sprocket", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	kc, provider, consumer := pair.KubeconfigPath, pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "team-a.yaml", mustPlugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org")))
	// Unprotected, whatever grant prints: the scenarios delete them.
	kubectl(t, consumer, "patch", "connection", "provider", "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`)
	kubectl(t, consumer, "patch", "clusterbinding", "provider", "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`)
	stopKonnector := startKonnectorWith(t, consumer)
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "clusterbinding/provider", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "w1.yaml", widget("default", "w1")))
	eventuallyGet(t, provider, "default/w1 on the provider", "widget", "-n", "kbind-team-a", "default.w1")
	fx := newFixer(t, kc)
	top := t // the konnector outlives a subtest that restarts it
	withProvider := []string{"--provider-context", "provider"}

	t.Run("pointed at the provider", func(t *testing.T) {
		args := []string{"--context", "provider"}
		fix, text := fixFor(t, kc, args, "cluster.provider", "current context")
		if !strings.Contains(text, "looks like a provider") || !strings.Contains(text, "consumer's kubeconfig") {
			t.Errorf("finding: %s", text)
		}
		fx.run(t, fix, nil)
		// Pointed at the consumer, as the fix says, it is gone.
		gone(t, kc, []string{"--context", "consumer"}, "cluster.provider", "current context")
		out, errOut, _ := plugin(t, "--kubeconfig", kc, "--context", "provider", "status")
		if !strings.Contains(out+errOut, "looks like a provider") {
			t.Errorf("status on the provider:\n%s%s", out, errOut)
		}
	})

	t.Run("a binding naming a Connection that does not exist", func(t *testing.T) {
		kubectl(t, consumer, "apply", "-f", writeFile(t, "lost.yaml", `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: lost}
spec:
  connectionRef: {name: nope}
  apis: [{name: widgets.example.org}]
`))
		fix, _ := fixFor(t, kc, withProvider, "binding.connection", "lost")
		fx.run(t, fix, nil)
		gone(t, kc, withProvider, "binding.connection", "lost")
	})

	t.Run("an API that is not exported", func(t *testing.T) {
		kubectl(t, consumer, "apply", "-f", writeFile(t, "more.yaml", `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: more}
spec:
  connectionRef: {name: provider}
  apis: [{name: sprockets.example.org}]
`))
		fix, _ := fixFor(t, kc, withProvider, "binding.notExported", "more")
		fx.run(t, fix, nil)
		gone(t, kc, withProvider, "binding.notExported", "more")
		kubectl(t, consumer, "delete", "clusterbinding", "more", "--timeout=60s")
	})

	t.Run("a Secret in a namespace the konnector may not read", func(t *testing.T) {
		kubectl(t, consumer, "create", "namespace", "team-x")
		kubectl(t, consumer, "-n", "team-x", "create", "secret", "generic", "elsewhere-kubeconfig", "--from-file=kubeconfig="+provider)
		kubectl(t, consumer, "apply", "-f", writeFile(t, "elsewhere.yaml", strings.Replace(connectionYAML("elsewhere", "elsewhere-kubeconfig"), "namespace: kbind", "namespace: team-x", 1)))
		args := append([]string{"elsewhere"}, withProvider...)
		fix, text := fixFor(t, kc, args, "connection.secret", "elsewhere")
		// What the Connection's condition says, never "does not exist".
		for _, want := range []string{"may not read Secret team-x/elsewhere-kubeconfig", "namespace team-x is not one of its allowed Secret namespaces (kbind)", "reason SecretNotFound"} {
			if !strings.Contains(text, want) {
				t.Errorf("finding lacks %q: %s", want, text)
			}
		}
		if strings.Contains(text, "does not exist") {
			t.Errorf("the finding says the Secret does not exist: %s", text)
		}
		// The konnector runs outside the cluster here: its flag, as the fix names it.
		flag := regexp.MustCompile(`--secret-namespaces=\S+`).FindString(fix)
		if flag != "--secret-namespaces=kbind,team-x" {
			t.Fatalf("fix names %q: %s", flag, fix)
		}
		stopKonnector()
		stopKonnector = startKonnectorWith(top, consumer, flag)
		gone(t, kc, args, "connection.secret", "elsewhere")
		kubectl(t, consumer, "delete", "connection", "elsewhere", "--timeout=60s")
	})

	t.Run("the Connection's Secret is missing then malformed", func(t *testing.T) {
		kubectl(t, consumer, "apply", "-f", writeFile(t, "missing.yaml", connectionYAML("missing", "missing-kubeconfig")))
		args := append([]string{"missing"}, withProvider...)
		fill := map[string]string{"<provider kubeconfig file>": provider}
		fix, _ := fixFor(t, kc, args, "connection.secret", "missing")
		fx.run(t, fix, fill)
		gone(t, kc, args, "connection.secret", "missing")
		// Malformed in place: the Secret now carries kbind's finalizer, so the fix replaces its data.
		kubectl(t, consumer, "-n", "kbind", "patch", "secret", "missing-kubeconfig", "--type=merge", "-p", `{"stringData":{"kubeconfig":"clusters: [not a kubeconfig"}}`)
		fix, _ = fixFor(t, kc, args, "connection.kubeconfig", "missing")
		fx.run(t, fix, fill)
		gone(t, kc, args, "connection.kubeconfig", "missing")
		kubectl(t, consumer, "delete", "connection", "missing", "--timeout=60s")
	})

	t.Run("a Kind instead of plural.group", func(t *testing.T) {
		kubectl(t, consumer, "apply", "-f", writeFile(t, "kind.yaml", `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: kind}
spec:
  connectionRef: {name: provider}
  apis: [{name: Widget}]
`))
		fix, _ := fixFor(t, kc, withProvider, "binding.apiName", "kind")
		fx.run(t, fix, nil)
		gone(t, kc, withProvider, "binding.apiName", "kind")
		kubectl(t, consumer, "delete", "clusterbinding", "kind", "--timeout=60s")
	})

	t.Run("a missing RBAC verb", func(t *testing.T) {
		kubectl(t, provider, "patch", "role", "-n", "kbind-team-a", "kbind-consumer-team-a", "--type=json",
			"-p", `[{"op":"replace","path":"/rules/0/verbs","value":["get","list","watch","create","update","patch"]}]`)
		fix, _ := fixFor(t, kc, withProvider, "connection.rbac", "provider")
		fx.run(t, fix, nil)
		gone(t, kc, withProvider, "connection.rbac", "provider")
	})

	t.Run("a foreign object on the provider", func(t *testing.T) {
		kubectl(t, provider, "apply", "-f", writeFile(t, "foreign.yaml", widget("kbind-team-a", "default.w9")))
		kubectl(t, consumer, "apply", "-f", writeFile(t, "w9.yaml", widget("default", "w9")))
		fix, _ := fixFor(t, kc, withProvider, "object.conflict", "w9")
		fx.run(t, fix, nil)
		gone(t, kc, withProvider, "object.conflict", "w9")
	})

	t.Run("the konnector runs outside the cluster: the Helm install", func(t *testing.T) {
		fix, _ := fixFor(t, kc, withProvider, "konnector.outside", "konnector")
		// The consumer's kbind CRDs were installed without Helm (as by the quickstart).
		for _, want := range []string{"--set 'rbac.boundResourceGroups={example.org}'", "--set installCRDs=false", "--kube-context=consumer"} {
			if !strings.Contains(fix, want) {
				t.Errorf("helm install lacks %s: %s", want, fix)
			}
		}
		fx.run(t, fix, nil)
		// The Deployment is there (no kubelet runs it here: never ready).
		gone(t, kc, withProvider, "konnector.outside", "konnector")
		fx.run(t, "helm uninstall konnector -n kbind --kube-context=consumer", nil)
	})

	t.Run("revoked then the binding deleted", func(t *testing.T) {
		token := connectionToken(t, consumer)
		mustPlugin(t, "--kubeconfig", provider, "revoke", "team-a")
		// revoke returns once the API server denies the consumer every
		// write; it answers the deleted ServiceAccount's token
		// Unauthorized once its token cache lets go of it (10 s). The
		// scenario is the refused credentials.
		cs, err := kubernetes.NewForConfig(tokenOnly(t, pair.Provider.Config.Host, pair.Provider.Config.CAData, token))
		if err != nil {
			t.Fatal(err)
		}
		enginetest.EventuallyWithin(t, 60*time.Second, "the revoked token Unauthorized", func() error {
			if _, err := cs.Discovery().ServerVersion(); !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		})
		kubectl(t, consumer, "delete", "clusterbinding", "provider", "--wait=false")
		args := append([]string{"--stuck-after=1s"}, withProvider...)
		fix, text := fixFor(t, kc, args, "clusterBinding.stuckDeleting", "provider")
		if !strings.Contains(text, "refuses the Connection's credentials") || !strings.Contains(fix, "provider copies STAY on the provider") {
			t.Errorf("finding: %s", text)
		}
		fx.run(t, fix, nil)
		enginetest.EventuallyWithin(t, 60*time.Second, "the ClusterBinding is gone", func() error {
			if out, _ := testenv.Kubectl(context.Background(), consumer, "get", "clusterbinding", "provider", "--ignore-not-found"); out != "" {
				return fmt.Errorf("still there: %s", out)
			}
			return nil
		})
		gone(t, kc, args, "clusterBinding.stuckDeleting", "provider")
		// What the fix said stays on the provider.
		kubectl(t, provider, "get", "widget", "-n", "kbind-team-a", "default.w1")

		// The credentials' own fix, once the API is bound again: grant
		// again and apply the bundle.
		kubectl(t, consumer, "apply", "-f", writeFile(t, "again.yaml", `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: again}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
`))
		fix, _ = fixFor(t, kc, withProvider, "connection.credentials", "provider")
		fx.run(t, fix, nil)
		gone(t, kc, withProvider, "connection.credentials", "provider")
	})
}
