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

// Command quickstart runs kbind's demo on one machine: a provider and a
// consumer cluster (local control planes; kind is used by the e2e suites
// where Docker exists), the example Widget API exported by the provider, the
// one-file setup applied on the consumer, the konnector as a host process,
// and a Widget that travels up with its status coming back.
//
//	make quickstart                                   # interactive; Ctrl-C tears down
//	make quickstart QUICKSTART_FLAGS=--check          # unattended, verifies each step
//	make quickstart QUICKSTART_FLAGS=--detach         # leaves everything running
//	make quickstart-down                              # stops what --detach left
//
// The kubeconfig with the contexts "provider" and "consumer" is always
// .quickstart/kubeconfig.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kbind/kbind/engine/test/testenv"
)

const dir = ".quickstart"

func main() {
	check := flag.Bool("check", false, "run unattended, verify each step, tear down, exit non-zero on any failure")
	detach := flag.Bool("detach", false, "run unattended and leave the clusters and the konnector running in the background")
	down := flag.Bool("down", false, "stop what --detach left running")
	konnector := flag.String("konnector", "bin/konnector", "the konnector binary")
	clusters := flag.String("clusters", envOr("KBIND_QUICKSTART_CLUSTERS", "auto"), "auto (kind when `docker info` and `kind` work, else local control planes), kind or local [env KBIND_QUICKSTART_CLUSTERS]")
	flag.Parse()

	var err error
	switch {
	case *down:
		err = stopDetached()
	case *detach && os.Getenv("KBIND_QUICKSTART_CHILD") == "":
		err = startDetached()
	default:
		err = run(*konnector, *clusters, *check, *detach)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nquickstart: FAILED: %v\n", err)
		os.Exit(1)
	}
}

type demo struct {
	kubeconfig string
	out        io.Writer
	check      bool
}

func (d *demo) step(format string, args ...any) {
	fmt.Fprintf(d.out, "\n==> "+format+"\n", args...)
}

// kubectl runs the project's kubectl against the quickstart kubeconfig,
// echoing the command as a user would type it.
func (d *demo) kubectl(ctx context.Context, args ...string) (string, error) {
	fmt.Fprintf(d.out, "$ kubectl %s\n", strings.Join(args, " "))
	out, err := testenv.Kubectl(ctx, d.kubeconfig, args...)
	fmt.Fprint(d.out, indent(out))
	return out, err
}

// plugin runs `kubectl kbind args...` with the project's kubectl, which
// finds the plugin built into binDir on PATH, as a user's kubectl would.
func (d *demo) plugin(ctx context.Context, binDir string, args ...string) error {
	fmt.Fprintf(d.out, "$ kubectl kbind %s\n", strings.Join(args, " "))
	kubectl, err := testenv.KubectlPath()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, kubectl, append(append([]string{"kbind"}, args...), "--kubeconfig", d.kubeconfig)...)
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	fmt.Fprint(d.out, indent(string(out)))
	if err != nil {
		return fmt.Errorf("kubectl kbind %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

// poll retries fn every 200 ms until it succeeds or the timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, fn func() error) error {
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = fn(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// pair is the demo's two clusters, whichever provider started them.
type pair struct {
	providerKubeconfig []byte // what the Connection's Secret holds
	consumerKubeconfig string // what the konnector runs with
	stop               func() error
}

// kindAvailable reports whether Docker runs and kind is installed.
func kindAvailable(ctx context.Context) bool {
	if exec.CommandContext(ctx, "docker", "info").Run() != nil {
		return false
	}
	return exec.CommandContext(ctx, "kind", "version").Run() == nil
}

// startLocal starts two local control planes and writes the kubeconfig
// with both contexts.
func startLocal(abs string) (*pair, error) {
	p, err := testenv.StartPair(testenv.PairOptions{Dir: abs})
	if err != nil {
		return nil, err
	}
	provider, err := serviceAccountKubeconfig(p.Provider)
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	return &pair{providerKubeconfig: provider, consumerKubeconfig: p.Consumer.KubeconfigPath, stop: p.Stop}, nil
}

// serviceAccountKubeconfig is the provider kubeconfig the demo's Connection
// uses on local control planes: a 30-day token of a ServiceAccount bound
// to cluster-admin, which the konnector renews itself. (The local control
// planes' own client certificates live 7 days, which kbind rightly reports
// as expiring.)
func serviceAccountKubeconfig(c *testenv.Cluster) ([]byte, error) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	const ns, name = "kube-system", "kbind-quickstart"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the demo's ServiceAccount: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("binding the demo's ServiceAccount: %w", err)
	}
	seconds := int64((720 * time.Hour).Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting the demo's token: %w", err)
	}
	cfg := &rest.Config{Host: c.Config.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData}}
	return testenv.KubeconfigFor("provider", cfg)
}

// startKind creates two kind clusters, writes .quickstart/kubeconfig with
// the contexts provider and consumer, and installs the kbind CRDs on the
// consumer. The konnector runs on the host, where kind's API server
// addresses are reachable.
func startKind(ctx context.Context, abs string) (*pair, error) {
	names := map[string]string{"provider": "kbind-provider", "consumer": "kbind-consumer"}
	files := map[string]string{}
	for ctxName, cluster := range names {
		files[ctxName] = filepath.Join(abs, ctxName+".kubeconfig")
		cmd := exec.CommandContext(ctx, "kind", "create", "cluster", "--name", cluster, "--kubeconfig", files[ctxName], "--wait", "120s")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("kind create cluster %s: %w", cluster, err)
		}
	}
	stop := func() error {
		var errs []error
		for _, cluster := range names {
			errs = append(errs, exec.Command("kind", "delete", "cluster", "--name", cluster).Run())
		}
		return errors.Join(errs...)
	}
	merged := clientcmdapi.NewConfig()
	for ctxName, file := range files {
		kc, err := clientcmd.LoadFromFile(file)
		if err != nil {
			_ = stop()
			return nil, err
		}
		src := kc.Contexts[kc.CurrentContext]
		merged.Clusters[ctxName] = kc.Clusters[src.Cluster]
		merged.AuthInfos[ctxName] = kc.AuthInfos[src.AuthInfo]
		merged.Contexts[ctxName] = &clientcmdapi.Context{Cluster: ctxName, AuthInfo: ctxName}
	}
	merged.CurrentContext = "consumer"
	if err := clientcmd.WriteToFile(*merged, filepath.Join(abs, "kubeconfig")); err != nil {
		_ = stop()
		return nil, err
	}
	provider, err := os.ReadFile(files["provider"])
	if err != nil {
		_ = stop()
		return nil, err
	}
	if out, err := testenv.Kubectl(ctx, filepath.Join(abs, "kubeconfig"), "--context=consumer", "apply", "-f", "api/crds/"); err != nil {
		_ = stop()
		return nil, fmt.Errorf("installing the kbind CRDs: %w: %s", err, out)
	}
	return &pair{providerKubeconfig: provider, consumerKubeconfig: files["consumer"], stop: stop}, nil
}

// run is the demo, in stages: two clusters, the exported Widget API, the
// one file applied on the consumer, the konnector, a Widget synced up and
// its status down, the kubectl plugin; with check, the deletion too and it
// returns, else it runs until interrupted.
func run(konnectorBin, clusters string, check, detached bool) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if _, err := os.Stat(konnectorBin); err != nil {
		return fmt.Errorf("%s missing: run `make build` (make quickstart does)", konnectorBin)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, _ := filepath.Abs(dir)
	d := &demo{kubeconfig: filepath.Join(abs, "kubeconfig"), out: os.Stdout, check: check}

	clusterPair, err := d.startClusters(ctx, abs, clusters)
	if err != nil {
		return err
	}
	defer func() {
		d.step("Tearing down")
		_ = clusterPair.stop()
	}()
	fmt.Fprintf(d.out, "kubeconfig with contexts provider and consumer: %s\n", filepath.Join(dir, "kubeconfig"))

	if err := d.exportWidgets(ctx); err != nil {
		return err
	}
	if err := d.applyQuickstart(ctx, abs, clusterPair.providerKubeconfig); err != nil {
		return err
	}
	k, closeLog, err := d.startKonnector(ctx, konnectorBin, abs, clusterPair.consumerKubeconfig, check || detached)
	if err != nil {
		return err
	}
	defer closeLog()
	defer func() { cancel(); _ = k.Wait() }()
	if err := d.kubectls(ctx,
		[]string{"--context=consumer", "wait", "--for=condition=Ready", "connection/demo-provider", "--timeout=90s"},
		[]string{"--context=consumer", "wait", "--for=condition=Ready", "clusterbinding/widgets", "--timeout=90s"},
		[]string{"--context=consumer", "get", "connections,clusterbindings"}); err != nil {
		return err
	}
	if err := d.syncWidget(ctx); err != nil {
		return err
	}
	if err := d.statusDown(ctx); err != nil {
		return err
	}
	binDir, err := d.showPlugin(ctx, konnectorBin)
	if err != nil {
		return err
	}
	if check {
		return d.checkDeletion(ctx)
	}
	d.printNext(binDir)
	if detached {
		fmt.Fprintf(d.out, "\nRunning in the background; stop it with: make quickstart-down\n")
		markReady()
	} else {
		fmt.Fprintf(d.out, "\nThe konnector logs above. Press Ctrl-C to tear everything down.\n")
	}
	<-ctx.Done()
	return nil
}

// kubectls runs each kubectl command in turn, stopping at the first that
// fails.
func (d *demo) kubectls(ctx context.Context, cmds ...[]string) error {
	for _, args := range cmds {
		if _, err := d.kubectl(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// startClusters starts the provider and the consumer cluster: with kind
// when asked for, or when auto and kind works; else local control planes
// in dir (started afresh).
func (d *demo) startClusters(ctx context.Context, abs, clusters string) (*pair, error) {
	if clusters == "kind" || (clusters == "auto" && kindAvailable(ctx)) {
		d.step("Starting a provider and a consumer cluster with kind")
		return startKind(ctx, abs)
	}
	if clusters != "local" && clusters != "auto" {
		return nil, fmt.Errorf("--clusters must be auto, kind or local, not %q", clusters)
	}
	d.step("Starting a provider and a consumer cluster (local control planes in %s)", dir)
	for _, c := range []string{"consumer", "provider"} {
		_ = os.RemoveAll(filepath.Join(abs, c))
	}
	return startLocal(abs)
}

// exportWidgets installs the example Widget CRD on the provider, labelled
// exported.
func (d *demo) exportWidgets(ctx context.Context) error {
	d.step("Exporting the example Widget API on the provider")
	return d.kubectls(ctx,
		[]string{"--context=provider", "apply", "-f", "examples/widgets-crd.yaml"},
		[]string{"--context=provider", "get", "crds", "-l", "core.kbind.io/exported=true"})
}

// applyQuickstart writes examples/quickstart.yaml with the provider's
// kubeconfig in it to abs and applies it on the consumer, in namespace
// kbind.
func (d *demo) applyQuickstart(ctx context.Context, abs string, providerKubeconfig []byte) error {
	d.step("Applying one file on the consumer: Secret kbind/demo-provider-kubeconfig, Connection demo-provider, ClusterBinding widgets")
	manifest, err := os.ReadFile("examples/quickstart.yaml")
	if err != nil {
		return err
	}
	kc := strings.ReplaceAll(strings.TrimSpace(string(providerKubeconfig)), "\n", "\n    ")
	applied := filepath.Join(abs, "quickstart.yaml")
	if err := os.WriteFile(applied, []byte(strings.Replace(string(manifest), "KUBECONFIG_PLACEHOLDER", kc, 1)), 0o600); err != nil {
		return err
	}
	return d.kubectls(ctx,
		[]string{"--context=consumer", "create", "namespace", "kbind"},
		[]string{"--context=consumer", "apply", "-f", filepath.Join(dir, "quickstart.yaml")})
}

// startKonnector starts the konnector against the consumer, stopped with
// an interrupt when ctx ends; its log goes to stdout, or with logToFile to
// konnector.log in abs, which closeLog closes once it has exited.
func (d *demo) startKonnector(ctx context.Context, konnectorBin, abs, consumerKubeconfig string, logToFile bool) (k *exec.Cmd, closeLog func(), err error) {
	d.step("Running the konnector against the consumer")
	closeLog = func() {}
	var logOut io.Writer = os.Stdout
	if logToFile {
		f, err := os.Create(filepath.Join(abs, "konnector.log"))
		if err != nil {
			return nil, nil, err
		}
		closeLog = func() { _ = f.Close() }
		logOut = f
		fmt.Fprintf(d.out, "konnector log: %s\n", filepath.Join(dir, "konnector.log"))
	}
	k = exec.CommandContext(ctx, konnectorBin, "--kubeconfig", consumerKubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0")
	k.Stdout, k.Stderr = logOut, logOut
	k.Cancel = func() error { return k.Process.Signal(os.Interrupt) }
	k.WaitDelay = 10 * time.Second
	if err := k.Start(); err != nil {
		closeLog()
		return nil, nil, err
	}
	return k, closeLog, nil
}

// syncWidget creates default/my-widget on the consumer and shows its copy
// on the provider, which must carry kbind's markers and the spec.
func (d *demo) syncWidget(ctx context.Context) error {
	d.step("Creating default/my-widget on the consumer")
	if _, err := d.kubectl(ctx, "--context=consumer", "apply", "-f", "examples/my-widget.yaml"); err != nil {
		return err
	}
	d.step("The copy on the provider, with kbind's ownership markers")
	err := poll(ctx, 30*time.Second, "the provider copy of default/my-widget", func() error {
		_, err := testenv.Kubectl(ctx, d.kubeconfig, "--context=provider", "-n", "default", "get", "widget", "my-widget")
		return err
	})
	if err != nil {
		return err
	}
	out, err := d.kubectl(ctx, "--context=provider", "-n", "default", "get", "widget", "my-widget", "-o",
		`jsonpath={.metadata.annotations}{"\n"}{.spec}{"\n"}`)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "core.kbind.io/consumer-object-uid") || !strings.Contains(out, `"color":"blue"`) {
		return fmt.Errorf("the provider copy lacks the markers or the spec:\n%s", out)
	}
	return nil
}

// statusDown patches the provider copy's status and waits for it on the
// consumer.
func (d *demo) statusDown(ctx context.Context) error {
	d.step("A status patched on the provider (the demo has no Widget controller) arrives on the consumer")
	if _, err := d.kubectl(ctx, "--context=provider", "-n", "default", "patch", "widget", "my-widget",
		"--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready"}}`); err != nil {
		return err
	}
	err := poll(ctx, 30*time.Second, "the status on the consumer", func() error {
		out, err := testenv.Kubectl(ctx, d.kubeconfig, "--context=consumer", "-n", "default", "get", "widget", "my-widget", "-o", "jsonpath={.status.phase}")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "Ready" {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = d.kubectl(ctx, "--context=consumer", "-n", "default", "get", "widgets")
	return err
}

// showPlugin runs kubectl kbind status and doctor, the plugin built next
// to the konnector (binDir, returned), once status counts the Widget.
func (d *demo) showPlugin(ctx context.Context, konnectorBin string) (binDir string, err error) {
	d.step("The kubectl plugin: one screen of status, and the troubleshooting guide as one command")
	binDir, err = filepath.Abs(filepath.Dir(konnectorBin))
	if err != nil {
		return "", err
	}
	err = poll(ctx, 60*time.Second, "kubectl kbind status counting the synced Widget", func() error {
		out, err := testenv.Kubectl(ctx, d.kubeconfig, "--context=consumer", "get", "clusterbinding", "widgets", "-o", "jsonpath={.status.boundAPIs[0].instances.synced}")
		if err != nil || strings.TrimSpace(out) != "1" {
			return fmt.Errorf("instances synced %q (%v)", out, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if err := d.plugin(ctx, binDir, "status", "--context=consumer"); err != nil {
		return "", err
	}
	// Exit 0: nothing wrong (the konnector runs outside the cluster: a note).
	if err := d.plugin(ctx, binDir, "doctor", "--context=consumer"); err != nil {
		return "", err
	}
	return binDir, nil
}

// checkDeletion deletes the consumer Widget, which must remove its
// provider copy first.
func (d *demo) checkDeletion(ctx context.Context) error {
	d.step("Deleting the consumer Widget removes the provider copy first")
	if _, err := d.kubectl(ctx, "--context=consumer", "-n", "default", "delete", "widget", "my-widget", "--timeout=60s"); err != nil {
		return err
	}
	out, err := testenv.Kubectl(ctx, d.kubeconfig, "--context=provider", "-n", "default", "get", "widget", "my-widget", "--ignore-not-found")
	if err != nil || strings.TrimSpace(out) != "" {
		return fmt.Errorf("the provider copy is still there: %v %s", err, out)
	}
	d.step("Quickstart check passed")
	return nil
}

// printNext prints what to try next with the kubectl kbind built in binDir
// and the quickstart kubeconfig.
func (d *demo) printNext(binDir string) {
	kubectl, _ := testenv.KubectlPath()
	fmt.Fprintf(d.out, `
==> Try next (the kubectl kbind built, the quickstart kubeconfig):
  export KUBECONFIG=%s PATH=%s:$PATH
  alias kubectl=%s
  kubectl kbind status --context=consumer
  kubectl kbind doctor --context=consumer
  kubectl --context=consumer get connections,clusterbindings
  kubectl --context=consumer get connection demo-provider -o yaml
  kubectl --context=consumer -n default get widgets
  kubectl --context=provider -n default get widget my-widget -o yaml
  kubectl --context=provider get leases -A -l core.kbind.io/managed=true
  kubectl --context=consumer -n default delete widget my-widget
`, d.kubeconfig, binDir, kubectl)
}

// Detached mode: the quickstart re-runs itself in a new session with its
// output in .quickstart/quickstart.log, waits until the demo is up, and
// leaves it running; quickstart-down signals it to tear down.

func pidFile() string   { return filepath.Join(dir, "quickstart.pid") }
func readyFile() string { return filepath.Join(dir, "ready") }

func markReady() { _ = os.WriteFile(readyFile(), []byte("ready\n"), 0o644) }

func startDetached() error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if pid, ok := runningPid(); ok {
		return fmt.Errorf("a detached quickstart already runs (pid %d); stop it with make quickstart-down", pid)
	}
	_ = os.Remove(readyFile())
	logf, err := os.Create(filepath.Join(dir, "quickstart.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), "KBIND_QUICKSTART_CHILD=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("quickstart: starting in the background (log: %s)\n", filepath.Join(dir, "quickstart.log"))
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			_ = os.Remove(pidFile())
			return fmt.Errorf("the detached quickstart exited (%v); see %s", err, filepath.Join(dir, "quickstart.log"))
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := os.Stat(readyFile()); err == nil {
			data, _ := os.ReadFile(filepath.Join(dir, "quickstart.log"))
			fmt.Print(string(data))
			return nil
		}
	}
	return errors.New("the detached quickstart did not come up within 10 minutes")
}

func runningPid() (int, bool) {
	data, err := os.ReadFile(pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, false
	}
	if syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}

func stopDetached() error {
	pid, ok := runningPid()
	if !ok {
		fmt.Println("quickstart: nothing is running")
		_ = os.Remove(pidFile())
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			_ = os.Remove(pidFile())
			_ = os.Remove(readyFile())
			fmt.Println("quickstart: stopped")
			return nil
		}
	}
	return fmt.Errorf("pid %d did not stop within 60 s", pid)
}
