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

package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmrelease "helm.sh/helm/v3/pkg/release"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// images returns the registry and tag `make test-images` built the images
// with; without KBIND_TEST_IMAGES=1 the test is skipped (make test needs
// only Go), with it a missing Docker engine fails the test.
func images(t *testing.T) (registry, tag string) {
	t.Helper()
	if os.Getenv("KBIND_TEST_IMAGES") != "1" {
		t.Skip("the image tests run under `make test-images` (KBIND_TEST_IMAGES=1, needs Docker)")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("KBIND_TEST_IMAGES=1 needs a running Docker engine: %v: %s", err, out)
	}
	registry, tag = os.Getenv("KBIND_IMAGE_REGISTRY"), os.Getenv("KBIND_IMAGE_TAG")
	if registry == "" || tag == "" {
		t.Fatal("KBIND_IMAGE_REGISTRY and KBIND_IMAGE_TAG name the images make test-images built")
	}
	return registry, tag
}

// installChart is `helm install <release> charts/<release> -n kbind
// --create-namespace` against the kubeconfig's context (`helm upgrade` once
// installed); it checks the chart runs the image the build made (appVersion
// = image tag) and returns the Pod template of its Deployment.
func installChart(t *testing.T, kubeconfig, kubeContext, release, image string, values map[string]any) corev1.PodSpec {
	t.Helper()
	chrt, err := loader.Load("../../charts/" + release)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.HelmConfig(kubeconfig, kubeContext, "kbind")
	if err != nil {
		t.Fatal(err)
	}
	var rel *helmrelease.Release
	if _, err := cfg.Releases.Last(release); err == nil {
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = "kbind"
		rel, err = upgrade.Run(release, chrt, values)
		if err != nil {
			t.Fatalf("helm upgrade %s: %v", release, err)
		}
	} else {
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = release, "kbind", true
		rel, err = install.Run(chrt, values)
		if err != nil {
			t.Fatalf("helm install %s: %v", release, err)
		}
	}
	d, err := harness.Deployment(rel.Manifest, release)
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	if got := pod.Containers[0].Image; got != image {
		t.Fatalf("the %s chart (appVersion %s) runs image %s; make image built %s", release, chrt.Metadata.AppVersion, got, image)
	}
	return pod
}

// writeServiceAccount writes what the kubelet mounts for a Pod of the
// ServiceAccount: a token from the TokenRequest API, the API server's CA,
// the namespace. Readable by the container's non-root user.
func writeServiceAccount(t *testing.T, cfg *rest.Config, namespace, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	dir := filepath.Join(t.TempDir(), "serviceaccount")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": cfg.CAData, "namespace": []byte(namespace)} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil { //nolint:gosec // the kubelet's projected-volume mode; the container's user must read it
			t.Fatal(err)
		}
	}
	return dir
}

// inCluster is the input of kubeletRun for a Pod of the chart's
// ServiceAccount talking to the API server cfg points at.
func inCluster(t *testing.T, cfg *rest.Config, pod corev1.PodSpec, name string) runInput {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return runInput{
		Name: name, Namespace: "kbind",
		ServiceAccountDir: writeServiceAccount(t, cfg, "kbind", pod.ServiceAccountName),
		APIHost:           u.Hostname(), APIPort: u.Port(),
	}
}

// container is a running `docker run` of a Pod's container.
type container struct {
	t    *testing.T
	name string
	run  podRun
}

// start runs the container, after checking the chart's ports are free on
// this host (the container uses the host network). It is removed, its log
// shown on failure, when the test ends.
func start(t *testing.T, run podRun, name string) *container {
	t.Helper()
	for portName, port := range run.Ports {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(int(port)))
		if err != nil {
			t.Fatalf("the chart's %s port %d is taken on this machine (the container runs on the host network): %v", portName, port, err)
		}
		_ = l.Close()
	}
	_ = exec.Command("docker", "rm", "-f", name).Run()
	t.Logf("docker %s", strings.Join(run.Args, " "))
	if out, err := exec.Command("docker", run.Args...).CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v: %s", err, out)
	}
	c := &container{t: t, name: name, run: run}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", name, c.logs())
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})
	return c
}

func (c *container) logs() string {
	out, err := exec.Command("docker", "logs", c.name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("docker logs: %v: %s", err, out)
	}
	return string(out)
}

// get is an HTTP GET of the container's port and path, as the kubelet's
// probes and Prometheus do (host network: the container port is the
// host's).
func (c *container) get(port int32, path string) (int, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// probesPass waits until the chart's readiness and liveness probes, on the
// ports and paths the Deployment names, both succeed.
func (c *container) probesPass(pod corev1.PodSpec) {
	c.t.Helper()
	spec := pod.Containers[0]
	for what, probe := range map[string]*corev1.Probe{"readiness": spec.ReadinessProbe, "liveness": spec.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			c.t.Fatalf("the chart has no HTTP %s probe", what)
		}
		port, err := probePort(probe.HTTPGet.Port, c.run.Ports)
		if err != nil {
			c.t.Fatal(err)
		}
		enginetest.EventuallyWithin(c.t, 90*time.Second, what+" probe "+probe.HTTPGet.Path, func() error {
			code, body, err := c.get(port, probe.HTTPGet.Path)
			if err != nil {
				return err
			}
			if code < 200 || code >= 400 {
				return fmt.Errorf("HTTP %d: %s", code, body)
			}
			return nil
		})
	}
}

// metricsServe checks the chart's metrics port serves the build info of
// binary at the image's tag.
func (c *container) metricsServe(binary, tag string) {
	c.t.Helper()
	port, ok := c.run.Ports["metrics"]
	if !ok {
		c.t.Fatalf("the container has no port named metrics (it has %v)", c.run.Ports)
	}
	code, body, err := c.get(port, "/metrics")
	if err != nil || code != http.StatusOK {
		c.t.Fatalf("GET /metrics on the chart's metrics port: %d %v", code, err)
	}
	for _, want := range []string{`kbind_build_info{binary="` + binary + `"`, `version="` + tag + `"`} {
		if !strings.Contains(body, want) {
			c.t.Errorf("/metrics lacks %s:\n%s", want, harness.GrepLines(body, "kbind_build_info"))
		}
	}
}

// stopsCleanly is the kubelet's stop: SIGTERM, SIGKILL after the grace
// period. The binary must exit 0 before it.
func (c *container) stopsCleanly() time.Duration {
	c.t.Helper()
	start := time.Now()
	if out, err := exec.Command("docker", "stop", "-t", strconv.FormatInt(c.run.GracePeriodSeconds, 10), c.name).CombinedOutput(); err != nil {
		c.t.Fatalf("docker stop: %v: %s", err, out)
	}
	took := time.Since(start)
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.ExitCode}} {{.State.OOMKilled}}", c.name).CombinedOutput()
	if err != nil {
		c.t.Fatalf("docker inspect: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "0 false" {
		c.t.Errorf("after SIGTERM: exit code and OOM %q, want \"0 false\"", got)
	}
	if took >= time.Duration(c.run.GracePeriodSeconds)*time.Second {
		c.t.Errorf("SIGTERM took %s, not within the grace period of %ds", took, c.run.GracePeriodSeconds)
	}
	return took
}

func applyManifest(t *testing.T, kubeconfig, kubeContext, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(context.Background(), kubeconfig, "--context="+kubeContext, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply: %v: %s", err, out)
	}
}

// TestKonnectorImage runs the konnector image as the chart's Deployment,
// in-cluster against the consumer as the chart's ServiceAccount, and syncs
// a Widget to the provider: with the chart's defaults, then upgraded to
// leader election and another metrics port.
func TestKonnectorImage(t *testing.T) {
	registry, tag := images(t)
	ctx := context.Background()
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	kc := pair.KubeconfigPath
	base := map[string]any{"installCRDs": false, "rbac": map[string]any{"boundResourceGroups": []any{"example.org"}}}
	variants := []struct {
		name   string
		values map[string]any
		leader bool
	}{
		{"defaults", base, false},
		{"leader election and metrics on 9090", map[string]any{"installCRDs": false, "rbac": base["rbac"],
			"leaderElect": true, "metrics": map[string]any{"port": 9090}}, true},
	}
	for i, v := range variants {
		ok := t.Run(v.name, func(t *testing.T) {
			pod := installChart(t, kc, "consumer", "konnector", registry+"/konnector:"+tag, v.values)
			in := inCluster(t, pair.Consumer.Config, pod, "kbind-test-konnector")
			run, err := kubeletRun(pod, "konnector", in)
			if err != nil {
				t.Fatal(err)
			}
			c := start(t, run, "kbind-test-konnector")
			c.probesPass(pod)
			if i == 0 {
				applyManifest(t, kc, "consumer", enginetest.ConnectionManifest("provider", pair.Provider.Kubeconfig)+`---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: widgets}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
`)
				for _, args := range [][]string{
					{"--context=consumer", "wait", "--for=condition=Ready", "connection/provider", "--timeout=90s"},
					{"--context=consumer", "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=60s"},
				} {
					if out, err := testenv.Kubectl(ctx, kc, args...); err != nil {
						t.Fatalf("%v: %s", err, out)
					}
				}
			}
			widget := fmt.Sprintf("w%d", i)
			applyManifest(t, kc, "consumer", "apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: "+widget+", namespace: default}\nspec: {a: b}\n")
			enginetest.EventuallyWithin(t, 90*time.Second, "Widget "+widget+" on the provider", func() error {
				_, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "get", "widget", widget)
				return err
			})
			c.metricsServe("konnector", tag)

			log := c.logs()
			want := []string{
				`"configuration":"in-cluster: API server https://` + net.JoinHostPort(in.APIHost, in.APIPort) + `, ServiceAccount token ` + serviceAccountDir + `/token"`,
				`"user":"system:serviceaccount:kbind:` + pod.ServiceAccountName + `"`,
				`"version":"` + tag + `"`,
				// 90% of the chart's 512Mi memory limit, read from the container's cgroup.
				`"goMemoryLimit":483183820`,
			}
			if v.leader {
				want = append(want, `"msg":"Successfully acquired lease","lock":"kbind/konnector.kbind.io"`)
			}
			for _, w := range want {
				if !strings.Contains(log, w) {
					t.Errorf("the konnector's log lacks %s", w)
				}
			}
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, `"consumer cluster"`) || strings.Contains(l, `"starting"`) || strings.Contains(l, "acquired lease") {
					t.Logf("konnector log: %s", l)
				}
			}
			if strings.Contains(log, "forbidden") {
				t.Errorf("the chart's RBAC refused the konnector something:\n%s", harness.GrepLines(log, "forbidden"))
			}
			t.Logf("SIGTERM to exit: %s", c.stopsCleanly())
			if v.leader {
				// Released on the way out: a new Pod takes over at once.
				out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "-n", "kbind", "get", "lease", "konnector.kbind.io", "-o", "jsonpath={.spec.holderIdentity}")
				if err != nil || strings.TrimSpace(out) != "" {
					t.Errorf("the leader election Lease after SIGTERM: holder %q, %v; want it released", out, err)
				}
			}
		})
		if !ok {
			return
		}
	}
}

// staleConsumer is what a konnector that stopped heartbeating left on the
// provider: a Widget copy and a Lease nobody renews.
const staleConsumer = `apiVersion: example.org/v1alpha1
kind: Widget
metadata:
  name: w
  namespace: default
  labels:
    core.kbind.io/managed: "true"
    core.kbind.io/consumer-cluster-uid: consumer-a
  annotations:
    core.kbind.io/consumer-cluster-uid: consumer-a
    core.kbind.io/consumer-object-uid: o-1
spec: {size: 1}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: provider-consumer-a
  namespace: kbind
  labels:
    core.kbind.io/managed: "true"
    core.kbind.io/consumer-cluster-uid: consumer-a
  annotations:
    core.kbind.io/connection: provider
    core.kbind.io/consumer-cluster-uid: consumer-a
spec: {holderIdentity: consumer-a, leaseDurationSeconds: 60, renewTime: "2026-01-01T00:00:00.000000Z"}
`

// TestBackendImage runs the backend image as the chart's Deployment,
// in-cluster against the provider as the chart's ServiceAccount: in
// report-only mode (the default) it marks a Lease nobody renews stale and
// deletes nothing; upgraded to reap, it deletes what the stale consumer
// left behind, its Lease last.
func TestBackendImage(t *testing.T) {
	registry, tag := images(t)
	ctx := context.Background()
	provider := testenv.StartClusterT(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	kc := provider.KubeconfigPath
	exists := func(kind, namespace, name string) bool {
		out, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", namespace, "get", kind, name, "--ignore-not-found", "-o", "name")
		if err != nil {
			t.Fatalf("kubectl get %s: %v", kind, err)
		}
		return strings.TrimSpace(out) != ""
	}
	variants := []struct {
		name   string
		values map[string]any
		reap   bool
	}{
		{"defaults: report only", map[string]any{"staleAfter": "3s"}, false},
		{"reap", map[string]any{"staleAfter": "3s", "reap": true, "reapInterval": "1s", "reapGrace": "2s", "rbac": map[string]any{"reapGroups": []any{"example.org"}}}, true},
	}
	for i, v := range variants {
		ok := t.Run(v.name, func(t *testing.T) {
			pod := installChart(t, kc, "provider", "backend", registry+"/backend:"+tag, v.values)
			in := inCluster(t, provider.Config, pod, "kbind-test-backend")
			run, err := kubeletRun(pod, "backend", in)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				applyManifest(t, kc, "provider", staleConsumer)
			}
			c := start(t, run, "kbind-test-backend")
			c.probesPass(pod)
			if v.reap {
				enginetest.EventuallyWithin(t, 60*time.Second, "the stale consumer reaped", func() error {
					for _, o := range [][3]string{{"widgets.example.org", "default", "w"}, {"lease", "kbind", "provider-consumer-a"}} {
						if exists(o[0], o[1], o[2]) {
							return fmt.Errorf("%s %s/%s still there", o[0], o[1], o[2])
						}
					}
					return nil
				})
			} else {
				enginetest.EventuallyWithin(t, 60*time.Second, "the Lease marked stale", func() error {
					out, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "kbind", "get", "lease", "provider-consumer-a",
						"-o", `jsonpath={.metadata.annotations.core\.kbind\.io/stale-since}`)
					if err != nil {
						return err
					}
					if strings.TrimSpace(out) == "" {
						return errors.New("no core.kbind.io/stale-since annotation yet")
					}
					return nil
				})
				if !exists("lease", "kbind", "provider-consumer-a") || !exists("widgets.example.org", "default", "w") {
					t.Errorf("report-only mode deleted something")
				}
			}
			c.metricsServe("backend", tag)
			log := c.logs()
			for _, want := range []string{
				`"configuration":"in-cluster: API server https://` + net.JoinHostPort(in.APIHost, in.APIPort) + `, ServiceAccount token ` + serviceAccountDir + `/token"`,
				`"user":"system:serviceaccount:kbind:` + pod.ServiceAccountName + `"`,
			} {
				if !strings.Contains(log, want) {
					t.Errorf("the backend's log lacks %s", want)
				}
			}
			for _, refused := range []string{"forbidden", "Not allowed"} {
				if strings.Contains(log, refused) {
					t.Errorf("the chart's RBAC refused the backend something:\n%s", harness.GrepLines(log, refused))
				}
			}
			t.Logf("SIGTERM to exit: %s", c.stopsCleanly())
		})
		if !ok {
			return
		}
	}
}
