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

package gettingstarted

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var pluginBin, konnectorBin string

func TestMain(m *testing.M) {
	if isHelm() {
		os.Exit(helmMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	harness.RunWithBinaries(m, map[*string]string{
		&pluginBin:    "github.com/kbind/kbind/cli/cmd/kubectl-kbind",
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
	})
}

const (
	page = "../../docs/getting-started.md"
	root = "../.."
	// blockTimeout bounds one block: its own waits are at most 2m.
	blockTimeout = 4 * time.Minute
	// settle bounds the checks that poll after a block (the konnector
	// reacts to a change within seconds; its periodic pass is 30 s).
	settle = 90 * time.Second
)

// run is one block's result.
type run struct {
	stdout, stderr string
	code           int
}

// world is what the steps see: the clusters, the page's blocks, and the
// working directory and environment of its commands.
type world struct {
	t                *testing.T // the top-level test: what lives across steps is cleaned up with it
	pair             *testenv.Pair
	crdsExist        *testenv.Cluster // a consumer whose kbind CRDs were installed without Helm
	dir, providerURL string
	env              []string
	blocks           map[string]block
	chartVersion     string
}

// step is what the test does around one e2e:<step> block of the page.
type step struct {
	// before runs ahead of the block.
	before func(t *testing.T, w *world)
	// kubeconfig, when set, replaces the pair's for this block.
	kubeconfig func(w *world) string
	// fails: the page says the block's command fails.
	fails bool
	// retry: the block only reads; run it again until check passes.
	retry bool
	// check asserts what the page says the block did.
	check func(t *testing.T, w *world, r run) error
}

// TestGettingStarted follows docs/getting-started.md.
//
// Convention: every ```sh block of the page carries a second word.
// `e2e:<step>` blocks are run by this test in the page's order, each with
// `bash -e -o pipefail` in one working directory (charts/ and examples/
// of this tree are there, as in a checkout; files a block writes stay for
// the next), with KUBECONFIG holding the contexts provider and consumer and
// a PATH of real kubectl (the control plane's), the built kubectl-kbind
// and helm (Helm's install code: helm_test.go). The placeholder
// <provider-server> is replaced by the provider's URL; any other
// placeholder fails the test. After each block the step of the same name
// below checks what the page says happened; a block without a step, or a
// step without a block, fails the test. `no-e2e:<reason>` blocks are not
// run: registry (your registry), example (the example API's setup: the
// test installs the Widget CRD on the provider, unexported) and pod.
//
// Pod: the test's API servers have no kubelet, so the konnector cannot run
// as the chart's Pod. After the helm install the test runs the built
// konnector binary as a process with the args of the Deployment the
// release holds (its metrics and probe addresses moved to free ports),
// impersonating the chart's ServiceAccount, so the chart's RBAC is what
// it gets. Blocks that need the Pod itself (rollout status, doctor's
// konnector check) are no-e2e:pod; `make test-images` (e2e/images) runs
// the chart's Deployment in Docker as a kubelet would.
func TestGettingStarted(t *testing.T) {
	t.Parallel()
	blocks := pageBlocks(t)
	steps := gettingStartedSteps()
	var onPage []string
	for _, b := range blocks {
		if b.Step() != "" {
			onPage = append(onPage, b.Step())
		}
	}
	if sorted := slices.Sorted(slices.Values(stepOrder)); !slices.Equal(onPage, stepOrder) || !slices.Equal(keys(steps), sorted) {
		t.Fatalf("the page's e2e blocks %v, the test's order %v and its steps %v differ: give each e2e:<step> block its checks, in the page's order", onPage, stepOrder, keys(steps))
	}

	w := setUp(t, blocks)
	for _, b := range blocks {
		name := b.Step()
		if name == "" {
			t.Logf("not run, line %d (%s): %s", b.Line, b.Tag, firstLine(b.Body))
			continue
		}
		s := steps[name]
		if !t.Run(name, func(t *testing.T) {
			if s.before != nil {
				s.before(t, w)
			}
			kubeconfig := w.pair.KubeconfigPath
			if s.kubeconfig != nil {
				kubeconfig = s.kubeconfig(w)
			}
			deadline := time.Now().Add(settle)
			for {
				r := w.run(t, b, kubeconfig)
				if s.fails != (r.code != 0) {
					t.Fatalf("line %d: exit %d, the page says it %s\nstdout:\n%s\nstderr:\n%s", b.Line, r.code, map[bool]string{true: "fails", false: "succeeds"}[s.fails], r.stdout, r.stderr)
				}
				err := s.check(t, w, r)
				if err == nil {
					return
				}
				if !s.retry || time.Now().After(deadline) {
					t.Fatalf("line %d: %v\nstdout:\n%s\nstderr:\n%s", b.Line, err, r.stdout, r.stderr)
				}
				time.Sleep(2 * time.Second) // a read-only block, run again until the konnector caught up
			}
		}) {
			break // the later steps build on this one
		}
	}
}

// stepOrder is the order of the page's e2e blocks.
var stepOrder = []string{"install", "install-crds-exist", "export", "grant", "apply", "verify", "widget", "status", "delete-refused", "still-there", "unbind", "teardown"}

func gettingStartedSteps() map[string]step {
	return map[string]step{
		"install": {check: func(t *testing.T, w *world, r run) error {
			if !strings.Contains(r.stdout, "STATUS: deployed") {
				return errors.New("the release is not deployed")
			}
			// The chart installed kbind's CRDs (the consumer had none).
			if by := w.kubectl(t, "consumer", "get", "crd", "connections.core.kbind.io", "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}`); by != "Helm" {
				return fmt.Errorf("connections.core.kbind.io is managed by %q, not by the release", by)
			}
			// The image of the release: the chart's appVersion (section 1).
			if image := w.kubectl(t, "consumer", "-n", "kbind", "get", "deployment", "konnector", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); image != "ghcr.io/kbind/konnector:"+w.chartVersion {
				return fmt.Errorf("the Deployment runs %s, not ghcr.io/kbind/konnector:%s", image, w.chartVersion)
			}
			w.startKonnector(t)
			return nil
		}},
		"install-crds-exist": {
			// The page: on a consumer whose kbind CRDs exist without Helm,
			// the first command stops, saying so.
			before: func(t *testing.T, w *world) {
				r := w.run(t, w.blocks["install"], w.crdsExist.KubeconfigPath)
				if want := "exists and cannot be imported into the current release: invalid ownership metadata"; r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, `CustomResourceDefinition "`) {
					t.Fatalf("the install block on a consumer with kbind's CRDs: exit %d, want the refusal %q:\n%s%s", r.code, want, r.stdout, r.stderr)
				}
			},
			kubeconfig: func(w *world) string { return w.crdsExist.KubeconfigPath },
			check: func(_ *testing.T, w *world, r run) error {
				if !strings.Contains(r.stdout, "STATUS: deployed") {
					return errors.New("the release is not deployed")
				}
				out, err := testenv.Kubectl(context.Background(), w.crdsExist.KubeconfigPath, "get", "crd", "connections.core.kbind.io", "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}`)
				if err != nil || out != "" {
					return fmt.Errorf("the existing CRD is left as it was: managed-by %q, %v", out, err)
				}
				_, err = testenv.Kubectl(context.Background(), w.crdsExist.KubeconfigPath, "-n", "kbind", "get", "deployment", "konnector")
				return err
			},
		},
		"export": {check: func(t *testing.T, w *world, r run) error {
			if l := w.kubectl(t, "provider", "get", "crd", "widgets.example.org", "-o", `jsonpath={.metadata.labels.core\.kbind\.io/exported}`); l != "true" {
				return fmt.Errorf("widgets.example.org labelled exported=%q", l)
			}
			if !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "widgets.example.org") {
				return errors.New("export --list does not show widgets.example.org")
			}
			return nil
		}},
		"grant": {check: func(t *testing.T, w *world, r run) error {
			if !strings.Contains(r.stderr, "granted team-a (Namespace isolation, namespace kbind-team-a)") {
				return errors.New("grant's summary is missing")
			}
			objs := w.bundle(t)
			secret, conn, cb := objs["Secret/kbind/provider-kubeconfig"], objs["Connection/provider"], objs["ClusterBinding/provider"]
			if secret == nil || conn == nil || cb == nil || len(objs) != 3 {
				return fmt.Errorf("team-a.yaml holds %v; the page says the Secret kbind/provider-kubeconfig, the Connection provider and the ClusterBinding provider", keys(objs))
			}
			if apis, _, _ := unstructured.NestedSlice(cb.Object, "spec", "apis"); fmt.Sprint(apis) != "[map[name:widgets.example.org]]" {
				return fmt.Errorf("the ClusterBinding binds %v", apis)
			}
			if server := kubeconfigServer(t, secret); server != w.providerURL {
				return fmt.Errorf("the bundle's kubeconfig names server %q, not the --server given (%s)", server, w.providerURL)
			}
			t.Run("bundle-protected", func(t *testing.T) {
				for _, o := range []*unstructured.Unstructured{conn, cb} {
					if p, _, _ := unstructured.NestedBool(o.Object, "spec", "deletionProtection"); !p {
						t.Errorf("%s %s: spec.deletionProtection is not true", o.GetKind(), o.GetName())
					}
				}
				if l := secret.GetLabels()[kbindv1alpha1.DeletionProtectionLabel]; l != "true" {
					t.Errorf("the Secret is labelled %s=%q", kbindv1alpha1.DeletionProtectionLabel, l)
				}
			})
			t.Run("grant-loopback-warning", func(t *testing.T) {
				if !strings.Contains(r.stderr, "loopback") {
					t.Errorf("grant wrote the loopback address %s without a warning:\n%s", w.providerURL, r.stderr)
				}
			})
			return nil
		}},
		"apply": {check: func(t *testing.T, w *world, r run) error {
			for _, want := range []string{"secret/provider-kubeconfig created", "connection.core.kbind.io/provider created", "clusterbinding.core.kbind.io/provider created"} {
				if !strings.Contains(r.stdout, want) {
					return fmt.Errorf("the output lacks %q", want)
				}
			}
			// The consumer CRD from the provider's schema.
			enginetest.EventuallyWithin(t, settle, "the consumer CRD widgets.example.org", func() error {
				_, err := w.kubectlErr("consumer", "get", "crd", "widgets.example.org")
				return err
			})
			return nil
		}},
		"verify": {retry: true, check: func(t *testing.T, w *world, r run) error {
			for _, want := range []string{"connection.core.kbind.io/provider", "clusterbinding.core.kbind.io/provider", "Namespace kbind-team-a", "ClusterBinding/provider", "widgets.example.org"} {
				if !strings.Contains(r.stdout, want) {
					return fmt.Errorf("the output lacks %q", want)
				}
			}
			if !regexp.MustCompile(`(?m)^team-a .* connected$`).MatchString(r.stdout) {
				return errors.New("consumers does not show team-a connected")
			}
			if ready := w.kubectl(t, "consumer", "get", "kbconn,kbcb", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}`); ready != "True True " {
				return fmt.Errorf("Ready: %q", ready)
			}
			return nil
		}},
		"widget": {check: func(t *testing.T, w *world, _ run) error {
			if size := w.kubectl(t, "provider", "-n", "kbind-team-a", "get", "widget", "default.my-widget", "-o", "jsonpath={.spec.size}"); size != "3" {
				return fmt.Errorf("the provider copy's spec.size is %q, the consumer's 3", size)
			}
			return nil
		}},
		"status": {check: func(t *testing.T, w *world, _ run) error {
			if phase := w.kubectl(t, "consumer", "-n", "default", "get", "widget", "my-widget", "-o", "jsonpath={.status.phase}"); phase != "Ready" {
				return fmt.Errorf("the consumer's status.phase is %q", phase)
			}
			return nil
		}},
		"delete-refused": {fails: true,
			// The refusal counts the objects from the binding's status,
			// which its periodic pass (30 s) refreshes: wait until it
			// counts the Widget, to check the count.
			before: func(t *testing.T, w *world) {
				enginetest.EventuallyWithin(t, settle, "the ClusterBinding's status counts the Widget", func() error {
					if n := w.kubectl(t, "consumer", "get", "kbcb", "provider", "-o", "jsonpath={.status.boundAPIs[0].instances.total}"); n != "1" {
						return fmt.Errorf("status.boundAPIs[0].instances.total is %q", n)
					}
					return nil
				})
			},
			check: func(_ *testing.T, w *world, r run) error {
				for _, refused := range []string{`secrets "provider-kubeconfig"`, `connections.core.kbind.io "provider"`, `clusterbindings.core.kbind.io "provider"`} {
					if !strings.Contains(r.stderr, refused+" is forbidden") {
						return fmt.Errorf("the deletion of %s is not refused", refused)
					}
				}
				for _, want := range []string{"deletionProtection", "widgets.example.org: 1 objects", "the consumer CRD widgets.example.org", "Orphan", "kubectl kbind unbind provider"} {
					if !strings.Contains(r.stderr, want) {
						return fmt.Errorf("the refusal does not say %q", want)
					}
				}
				return w.nothingDeleting()
			}},
		"still-there": {retry: true, check: func(_ *testing.T, w *world, r run) error {
			if !strings.Contains(r.stdout, "connection.core.kbind.io/provider") || !strings.Contains(r.stdout, "my-widget") {
				return errors.New("the output lacks the Connection or the Widget")
			}
			return w.nothingDeleting()
		}},
		"unbind": {check: func(t *testing.T, w *world, r run) error {
			// It showed what goes before deleting it.
			if !strings.Contains(r.stdout+r.stderr, "widgets.example.org") {
				return errors.New("unbind does not say what goes")
			}
			enginetest.EventuallyWithin(t, settle, "the provider copy and the consumer's Widget CRD are gone", func() error {
				for _, o := range [][]string{{"provider", "-n", "kbind-team-a", "get", "widget", "default.my-widget"}, {"consumer", "get", "crd", "widgets.example.org"}} {
					if _, err := w.kubectlErr(o[0], o[1:]...); err == nil || !strings.Contains(err.Error(), "NotFound") {
						return fmt.Errorf("%v on the %s: %v", o[1:], o[0], err)
					}
				}
				return nil
			})
			return nil
		}},
		"teardown": {check: func(t *testing.T, w *world, r run) error {
			for _, args := range [][]string{{"get", "connection", "provider"}, {"-n", "kbind", "get", "secret", "provider-kubeconfig"}, {"-n", "kbind", "get", "deployment", "konnector"}} {
				if _, err := w.kubectlErr("consumer", args...); err == nil || !strings.Contains(err.Error(), "NotFound") {
					return fmt.Errorf("%v: still there (%v)", args, err)
				}
			}
			// helm uninstall keeps kbind's CRDs.
			w.kubectl(t, "consumer", "get", "crd", "connections.core.kbind.io", "clusterbindings.core.kbind.io", "bindings.core.kbind.io", "-o", "name")
			if !strings.Contains(r.stdout, "ServiceAccount kbind/kbind-consumer-team-a deleted") {
				return errors.New("revoke did not delete team-a's ServiceAccount")
			}
			return nil
		}},
	}
}

// nothingDeleting: the bundle's objects, the Widget and its provider copy
// are there and none is being deleted.
func (w *world) nothingDeleting() error {
	for _, o := range []struct{ ctx, what string }{
		{"consumer", "connection/provider"}, {"consumer", "clusterbinding/provider"}, {"consumer", "secret/provider-kubeconfig -n kbind"},
		{"consumer", "crd/widgets.example.org"}, {"consumer", "widget/my-widget -n default"}, {"provider", "widget/default.my-widget -n kbind-team-a"},
	} {
		args := append([]string{"get"}, strings.Fields(o.what)...)
		ts, err := w.kubectlErr(o.ctx, append(args, "-o", "jsonpath={.metadata.deletionTimestamp}")...)
		if err != nil {
			return fmt.Errorf("%s on the %s: %v", o.what, o.ctx, err)
		}
		if ts != "" {
			return fmt.Errorf("%s on the %s is being deleted (since %s)", o.what, o.ctx, ts)
		}
	}
	return nil
}

func pageBlocks(t *testing.T) []block {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseBlocks(string(data))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	return blocks
}

// setUp starts the clusters and prepares the working directory and the
// commands' environment.
func setUp(t *testing.T, blocks []block) *world {
	t.Helper()
	w := &world{t: t, blocks: map[string]block{}}
	for _, b := range blocks {
		if b.Step() != "" {
			w.blocks[b.Step()] = b
		}
	}
	chrt, err := loader.Load(filepath.Join(root, "charts", "konnector"))
	if err != nil {
		t.Fatal(err)
	}
	w.chartVersion = chrt.Metadata.AppVersion

	// The example API of the page, as a provider serves it before export:
	// examples/widgets-crd.yaml without the export label.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	data, err := os.ReadFile(filepath.Join(root, "examples", "widgets-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	delete(crd.Labels, kbindv1alpha1.ExportedLabel)

	// A consumer with kbind's CRDs installed without Helm, for the page's
	// second install, started beside the pair.
	crdsExistDir := t.TempDir()
	var crdsExistErr error
	crdsExistDone := make(chan struct{})
	go func() {
		defer close(crdsExistDone)
		w.crdsExist, crdsExistErr = testenv.StartCluster(testenv.ConsumerContext, testenv.ClusterOptions{Dir: crdsExistDir, InstallKbindCRDs: true})
	}()
	t.Cleanup(func() { // also when the pair fails to start
		<-crdsExistDone
		if w.crdsExist != nil {
			_ = w.crdsExist.Stop()
		}
	})
	// The pair's consumer has no kbind CRDs: the chart installs them.
	w.pair = testenv.StartPairT(t, testenv.PairOptions{KbindCRDs: []*apiextensionsv1.CustomResourceDefinition{}, ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	<-crdsExistDone
	if crdsExistErr != nil {
		t.Fatal(crdsExistErr)
	}
	w.providerURL = w.pair.Provider.Config.Host

	// The working directory: a checkout's charts/ and examples/.
	w.dir = t.TempDir()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"charts", "examples"} {
		if err := os.Symlink(filepath.Join(abs, d), filepath.Join(w.dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	// PATH: kubectl, kubectl-kbind, helm.
	bin := t.TempDir()
	kubectl, err := testenv.KubectlPath()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": kubectl, "kubectl-kbind": pluginBin, "helm": self} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	w.env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "helm-config"), "HELM_DATA_HOME="+filepath.Join(home, "helm-data"))
	return w
}

// run runs a block of the page with bash in the working directory.
func (w *world) run(t *testing.T, b block, kubeconfig string) run {
	t.Helper()
	script, err := substitute(b.Body, map[string]string{"<provider-server>": w.providerURL})
	if err != nil {
		t.Fatalf("line %d: %v", b.Line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = w.dir, append(append([]string(nil), w.env...), "KUBECONFIG="+kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r := run{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("line %d: %v", b.Line, err)
	}
	t.Logf("line %d, exit %d:\n%s\n--- stdout:\n%s--- stderr:\n%s", b.Line, r.code, strings.TrimSpace(script), r.stdout, r.stderr)
	return r
}

// kubectlErr runs kubectl against the pair's cluster (context) consumer or
// provider.
func (w *world) kubectlErr(cluster string, args ...string) (string, error) {
	return testenv.Kubectl(context.Background(), w.pair.KubeconfigPath, append([]string{"--context", cluster}, args...)...)
}

func (w *world) kubectl(t *testing.T, cluster string, args ...string) string {
	t.Helper()
	out, err := w.kubectlErr(cluster, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startKonnector runs the konnector binary with the args of the
// Deployment the release holds, impersonating the chart's ServiceAccount:
// the Pod the API servers here cannot run.
func (w *world) startKonnector(t *testing.T) {
	t.Helper()
	cfg, err := harness.HelmConfig(w.pair.KubeconfigPath, "consumer", "kbind")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := action.NewGet(cfg).Run("konnector")
	if err != nil {
		t.Fatal(err)
	}
	d, err := harness.Deployment(rel.Manifest, "konnector")
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) > 0 || len(c.Env) > 0 || len(c.EnvFrom) > 0 {
		t.Fatalf("the chart's container has a command or an environment this test does not reproduce: %v %v %v", c.Command, c.Env, c.EnvFrom)
	}
	asSA := filepath.Join(t.TempDir(), "konnector.kubeconfig")
	if err := harness.WriteImpersonating(w.pair.KubeconfigPath, asSA, "system:serviceaccount:kbind:"+d.Spec.Template.Spec.ServiceAccountName); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + asSA}
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			args = append(args, "--metrics-bind-address="+harness.FreeAddr(t)) // Start adds the probe address
		case strings.HasPrefix(a, "--health-probe-bind-address="):
		default:
			args = append(args, a)
		}
	}
	// Started for the whole test, not this step.
	harness.StartProcessT(w.t, konnectorBin, filepath.Join(w.t.TempDir(), "konnector.log"), args...)
}

// bundle reads team-a.yaml, the bundle grant wrote, by kind/namespace/name.
func (w *world) bundle(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.dir, "team-a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.ManifestObjects(string(data))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		if o.GetNamespace() != "" {
			key = o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		}
		out[key] = o
	}
	return out
}

// kubeconfigServer is the server of the kubeconfig in a bundle's Secret
// (never logged: it holds the token).
func kubeconfigServer(t *testing.T, secret *unstructured.Unstructured) string {
	t.Helper()
	raw, ok, _ := unstructured.NestedString(secret.Object, "stringData", "kubeconfig")
	if !ok {
		enc, _, _ := unstructured.NestedString(secret.Object, "data", "kubeconfig")
		data, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatal("the bundle's Secret holds no readable kubeconfig")
		}
		raw = string(data)
	}
	kc, err := clientcmd.Load([]byte(raw))
	if err != nil {
		t.Fatal("the bundle's kubeconfig does not parse")
	}
	for _, c := range kc.Clusters {
		return c.Server
	}
	return ""
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
