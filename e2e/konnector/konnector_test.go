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

package konnector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var konnectorBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
	})
}

// startKonnector runs the binary against the consumer and returns its
// probe address and log.
func startKonnector(t *testing.T, kubeconfig string, args ...string) (probeAddr, metricsAddr string, log *enginetest.SyncBuffer) {
	t.Helper()
	probeAddr, metricsAddr = harness.FreeAddr(t), harness.FreeAddr(t)
	log = &enginetest.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, konnectorBin, append([]string{
		"--kubeconfig", kubeconfig, "--health-probe-bind-address", probeAddr, "--metrics-bind-address", metricsAddr,
	}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("konnector log:\n%s", log.String())
		}
	})
	return probeAddr, metricsAddr, log
}

func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	enginetest.EventuallyWithin(t, timeout, what, check)
}

const manifest = `apiVersion: v1
kind: Secret
metadata: {name: demo-provider-kubeconfig, namespace: kbind}
stringData:
  kubeconfig: |
%s
---
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: demo-provider}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: demo-provider-kubeconfig}
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: widgets}
spec:
  connectionRef: {name: demo-provider}
  apis: [{name: widgets.example.org}]
`

func TestConnectionThroughTheBinary(t *testing.T) {
	t.Parallel() // its own pair and konnector
	ctx := context.Background()
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{widgets()}})
	kc := pair.KubeconfigPath
	if _, err := testenv.Kubectl(ctx, kc, "--context=consumer", "create", "namespace", "kbind"); err != nil {
		t.Fatal(err)
	}
	probe, metricsAddr, log := startKonnector(t, pair.Consumer.KubeconfigPath)
	eventually(t, 30*time.Second, "/readyz", func() error {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get("http://" + probe + path)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", path, resp.Status)
			}
		}
		return nil
	})

	indented := "    " + strings.ReplaceAll(strings.TrimSpace(string(pair.Provider.Kubeconfig)), "\n", "\n    ")
	file := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(manifest, indented)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "apply", "-f", file); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "wait", "--for=condition=Ready", "connection/demo-provider", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "get", "connection", "demo-provider",
		"-o", `jsonpath={.status.activeSchemaSource}{"\n"}{.status.exportedAPIs}{"\n"}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "CRD" || !strings.Contains(lines[1], `"name":"widgets.example.org"`) {
		t.Errorf("source and exports:\n%s", out)
	}
	out, err = testenv.Kubectl(ctx, kc, "--context=consumer", "get", "connections")
	if err != nil || !strings.Contains(out, "demo-provider") || !strings.Contains(out, "True") {
		t.Errorf("kubectl get connections: %v\n%s", err, out)
	}

	// The ClusterBinding brings the provider's schema to the consumer.
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Ready: the API is delivered; Synced: its syncer syncs.
	for _, cond := range []string{"Ready", "Synced"} {
		if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "wait", "--for=condition="+cond, "clusterbinding/widgets", "--timeout=60s"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	out, err = testenv.Kubectl(ctx, kc, "--context=consumer", "get", "crd", "widgets.example.org",
		"-o", `jsonpath={.metadata.labels.core\.kbind\.io/managed} {.metadata.annotations.core\.kbind\.io/connection} {.spec.versions[0].schema.openAPIV3Schema.properties.spec.x-kubernetes-preserve-unknown-fields}`)
	if err != nil || strings.TrimSpace(out) != "true demo-provider true" {
		t.Errorf("consumer CRD markers and schema: %v %q", err, out)
	}

	// A Widget applied on the consumer shows up on the provider, with both
	// ownership annotations, on the watch event: within eventDriven, a
	// third of the konnector's shortest periodic pass (binding resync and
	// discovery, both 30 s by default; the syncer itself has none), so a
	// copy a periodic pass made instead would miss it two times in three.
	// It typically takes well under a second (logged below); the bound is
	// not a latency target (make bench measures those), so a busy machine
	// cannot break it.
	eventDriven := min(engine.DefaultBindingResync, engine.DefaultDiscoveryInterval) / 3
	widget := filepath.Join(t.TempDir(), "widget.yaml")
	if err := os.WriteFile(widget, []byte("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: my-widget, namespace: default}\nspec: {size: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "-n", "default", "apply", "-f", widget); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	applied := time.Now()
	var copyAnnotations string
	eventually(t, eventDriven, "the provider copy", func() error {
		out, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "get", "widget", "my-widget", "-o",
			`jsonpath={.metadata.annotations.core\.kbind\.io/consumer-cluster-uid} {.metadata.annotations.core\.kbind\.io/consumer-object-uid} {.spec.size}`)
		if err != nil {
			return err
		}
		copyAnnotations = strings.TrimSpace(out)
		return nil
	})
	t.Logf("provider copy after %s: %q", time.Since(applied), copyAnnotations)
	if took := time.Since(applied); took > eventDriven {
		t.Errorf("the provider copy took %s (more than %s: not written on the watch event)", took, eventDriven)
	}
	if fields := strings.Fields(copyAnnotations); len(fields) != 3 || fields[2] != "3" {
		t.Errorf("provider copy markers and spec: %q", copyAnnotations)
	}
	// A status patched on the provider shows on the consumer.
	if out, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "patch", "widget", "my-widget",
		"--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready"}}`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	eventually(t, 10*time.Second, "status on the consumer", func() error {
		out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "-n", "default", "get", "widget", "my-widget", "-o", "jsonpath={.status.phase}")
		if err != nil || strings.TrimSpace(out) != "Ready" {
			return fmt.Errorf("phase %q (%v)", out, err)
		}
		return nil
	})
	// kbind's metrics (docs/metrics.md).
	eventually(t, 10*time.Second, "kbind metrics", func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`kbind_sync_duration_seconds_bucket{direction="up"`,
			`kbind_sync_duration_seconds_bucket{direction="down"`,
			`kbind_syncs_total{api="Widget.example.org",connection="demo-provider",result="synced"}`,
			`kbind_sync_latency_seconds_bucket{connection="demo-provider",direction="up"`,
			`kbind_sync_latency_seconds_bucket{connection="demo-provider",direction="down"`,
			`kbind_objects{api="Widget.example.org",connection="demo-provider",state="synced"} 1`,
			`kbind_objects{api="Widget.example.org",connection="demo-provider",state="conflict"} 0`,
			// A new Connection, seen by one konnector from its creation.
			"kbind_connection_time_to_ready_seconds_count 1",
			`kbind_connection_ready{connection="demo-provider"} 1`,
			`kbind_heartbeat_age_seconds{connection="demo-provider"}`,
		} {
			if !strings.Contains(string(body), want) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
		}
		return nil
	})

	// Deleting the consumer Widget removes the provider copy first.
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "-n", "default", "delete", "widget", "my-widget", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "get", "widget", "my-widget", "--ignore-not-found"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("the provider copy outlived the consumer object: %v %q", err, out)
	}

	// The heartbeat Lease on the provider, found the way the guide finds it,
	// renews every 30 s (heartbeat.Interval, the konnector's default). Two
	// renewTimes, both stamped by the konnector, are apart by one jittered
	// wait plus the previous renewal's request: at least
	// Jittered(Interval, 0) = 27 s, at most Jittered(Interval, 1) = 33 s
	// plus RenewTimeout(Interval, 0) = 7.5 s; 2 s of slack either side for
	// the konnector's scheduling (the same slack as
	// engine/connection's heartbeat bound): [25 s, 42.5 s].
	const slack = 2 * time.Second
	minGap := heartbeat.Jittered(heartbeat.Interval, 0) - slack
	maxGap := heartbeat.Jittered(heartbeat.Interval, 1) + heartbeat.RenewTimeout(heartbeat.Interval, 0) + slack
	type lease struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			RenewTime metav1.MicroTime `json:"renewTime"`
		} `json:"spec"`
	}
	readLeases := func() ([]lease, error) {
		out, err := testenv.Kubectl(ctx, kc, "--context=provider", "get", "leases", "-A", "-l", "core.kbind.io/managed=true", "-o", "json")
		if err != nil {
			return nil, err
		}
		var list struct{ Items []lease }
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	var first lease
	eventually(t, 30*time.Second, "heartbeat Lease", func() error {
		leases, err := readLeases()
		if err != nil || len(leases) != 1 {
			return fmt.Errorf("%d leases (%v)", len(leases), err)
		}
		first = leases[0]
		return nil
	})
	if first.Metadata.Namespace != "kbind" || !strings.HasPrefix(first.Metadata.Name, "demo-provider-") {
		t.Errorf("lease %s/%s", first.Metadata.Namespace, first.Metadata.Name)
	}
	// The first Lease read may be the renewal's own: the next one is due at
	// most maxGap after it; 15 s more for the polls and kubectl.
	eventually(t, maxGap+15*time.Second, "a renewal about 30 s later", func() error {
		leases, err := readLeases()
		if err != nil || len(leases) != 1 {
			return fmt.Errorf("%d leases (%v)", len(leases), err)
		}
		gap := leases[0].Spec.RenewTime.Sub(first.Spec.RenewTime.Time)
		if gap == 0 {
			return fmt.Errorf("not renewed yet")
		}
		t.Logf("renewed after %s", gap)
		if gap < minGap || gap > maxGap {
			t.Errorf("renewed after %s, want about 30s (in [%s, %s])", gap, minGap, maxGap)
		}
		return nil
	})

	// The konnector never logs the kubeconfig.
	for _, field := range []string{"client-key-data", "client-certificate-data"} {
		if strings.Contains(log.String(), field) {
			t.Errorf("konnector log mentions %s", field)
		}
	}
}

func widgets() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true)
}
