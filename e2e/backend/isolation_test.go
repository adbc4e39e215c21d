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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// grantAccess installs the consumer-access chart on the provider for
// consumer name with the isolation values, and returns a kubeconfig that
// authenticates with a token of the chart's ServiceAccount — exactly the
// permissions docs/isolation.md lists.
func grantAccess(t *testing.T, provider *testenv.Cluster, name string, isolation map[string]any, apis ...any) []byte {
	t.Helper()
	helmInstall(t, provider, "consumer-access", "consumer-"+name,
		map[string]any{"consumer": name, "isolation": isolation, "related": []any{"secrets"}, "relatedClusterWide": true, "apis": apis})
	kc := provider.KubeconfigPath
	token := strings.TrimSpace(kubectl(t, kc, "-n", "kbind", "create", "token", "kbind-consumer-"+name, "--duration=1h"))
	out, err := testenv.KubeconfigFor("provider", &rest.Config{Host: provider.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: provider.Config.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isolatedConsumer starts a consumer cluster with a konnector and two
// Connections to the provider: "tenant" (Namespace isolation in
// tenant-<name>) binding Widgets, and "prefixed" (Prefixed with prefix
// <name>) binding Gadgets and ClusterGadgets; both copy the Secret
// db-credentials up.
func isolatedConsumer(t *testing.T, name string, tenant, prefixed []byte) (*testenv.Cluster, *process) {
	t.Helper()
	c := startCluster(t, "consumer-"+name, testenv.ClusterOptions{InstallKbindCRDs: true})
	kubectl(t, c.KubeconfigPath, "create", "namespace", "kbind")
	k := start(t, "konnector "+name, konnectorBin, "--kubeconfig", c.KubeconfigPath,
		"--health-probe-bind-address", harness.FreeAddr(t), "--metrics-bind-address", "0", "--heartbeat-interval", "1s")
	binding := func(api, connection string, related bool) string {
		out := fmt.Sprintf("---\napiVersion: core.kbind.io/v1alpha1\nkind: ClusterBinding\nmetadata: {name: %s}\nspec:\n  connectionRef: {name: %s}\n  apis: [{name: %s}]\n", api, connection, api)
		if connection == "prefixed" {
			// A Prefixed grant reads no Events unless the provider admin
			// lets it read every Event (docs/isolation.md#permissions).
			out += "  providerEvents: Ignore\n"
		}
		if related {
			out += "  relatedResources:\n  - {resource: secrets, direction: FromConsumer, selector: {names: [db-credentials]}}\n"
		}
		return out
	}
	apply(t, c.KubeconfigPath,
		enginetest.ConnectionManifestWith("tenant", "tenant", tenant, fmt.Sprintf("  isolation: {mode: Namespace, namespace: tenant-%s}\n", name))+
			binding("widgets.example.org", "tenant", true)+"---\n"+
			enginetest.ConnectionManifestWith("prefixed", "prefixed", prefixed, fmt.Sprintf("  isolation: {mode: Prefixed, prefix: %s}\n", name))+
			binding("gadgets.example.org", "prefixed", true)+binding("clustergadgets.example.org", "prefixed", false))
	for _, cb := range []string{"widgets.example.org", "gadgets.example.org", "clustergadgets.example.org"} {
		kubectl(t, c.KubeconfigPath, "wait", "--for=condition=Ready", "clusterbinding/"+cb, "--timeout=60s")
	}
	// Every consumer has the same namespaces, names and Secret.
	apply(t, c.KubeconfigPath, `apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Secret
metadata: {name: db-credentials, namespace: default}
stringData: {owner: `+name+`}
---
apiVersion: example.org/v1alpha1
kind: ClusterGadget
metadata: {name: c1}
spec: {owner: `+name+`}
`+sameObjects("Widget", name)+sameObjects("Gadget", name))
	return c, k
}

func sameObjects(kind, owner string) string {
	out := ""
	for _, k := range [][2]string{{"default", "db"}, {"team-a", "w1"}} {
		out += fmt.Sprintf("---\napiVersion: example.org/v1alpha1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec: {owner: %s}\n", kind, k[1], k[0], owner)
	}
	return out
}

// copiesOf are the provider objects of consumer name (cluster UID uid),
// as providerState names them.
func copiesOf(name, uid string) []string {
	return []string{
		"widgets.example.org tenant-" + name + "/default.db", "widgets.example.org tenant-" + name + "/team-a.w1",
		"gadgets.example.org " + name + "-default/db", "gadgets.example.org " + name + "-team-a/w1",
		"clustergadgets.example.org /" + name + "-c1",
		"secrets tenant-" + name + "/default.db-credentials", "secrets " + name + "-default/db-credentials",
		"leases.coordination.k8s.io tenant-" + name + "/tenant-" + uid[:10], "leases.coordination.k8s.io " + name + "/prefixed-" + uid[:10],
	}
}

var isolationKinds = []string{"widgets.example.org", "gadgets.example.org", "clustergadgets.example.org", "secrets", "leases.coordination.k8s.io"}

// TestIsolatedConsumersOnOneProvider: two consumer clusters with the same
// namespaces, names and Secret, each with a Namespace-isolated and a
// Prefixed Connection authenticated by a ServiceAccount token that holds
// only the consumer-access chart's permissions. Both sync and get their
// own status back; deleting on one side never touches the other; A's
// credentials are refused on B's namespaces; and once A's konnector is
// gone the backend reaps exactly A's copies, prefixed namespaces and
// Leases.
func TestIsolatedConsumersOnOneProvider(t *testing.T) {
	t.Parallel() // its own provider, consumers and processes
	began := time.Now()
	provider := startCluster(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clustergadgets", "clustergadget", "ClusterGadget", "example.org", apiextensionsv1.ClusterScoped, true),
	}})
	pkc := provider.KubeconfigPath
	saKubeconfig := asServiceAccount(t, provider)
	widgets := map[string]any{"group": "example.org", "resources": []any{"widgets"}}
	gadgets := map[string]any{"group": "example.org", "resources": []any{"gadgets", "clustergadgets"}}
	kubeconfigs := map[string][2][]byte{}
	for _, name := range []string{"a", "b"} {
		kubeconfigs[name] = [2][]byte{
			grantAccess(t, provider, name+"-ns", map[string]any{"mode": "Namespace", "namespace": "tenant-" + name}, widgets),
			grantAccess(t, provider, name+"-pre", map[string]any{"mode": "Prefixed", "prefix": name}, gadgets),
		}
	}
	a, konnectorA := isolatedConsumer(t, "a", kubeconfigs["a"][0], kubeconfigs["a"][1])
	b, _ := isolatedConsumer(t, "b", kubeconfigs["b"][0], kubeconfigs["b"][1])
	uidA, uidB := clusterUID(t, a), clusterUID(t, b)

	var state map[string]bool
	eventually(t, settle+10*time.Second, "both consumers' copies, related Secrets and Leases on the provider", func() error {
		state = providerState(t, pkc, isolationKinds...)
		for _, want := range append(copiesOf("a", uidA), copiesOf("b", uidB)...) {
			if !state[want] {
				return fmt.Errorf("no %s", want)
			}
		}
		return nil
	})
	t.Logf("both consumers synced %s after start; the provider holds:\n%s", time.Since(began), strings.Join(sorted(state), "\n"))
	for _, name := range []string{"a", "b"} {
		if got := kubectl(t, pkc, "get", "gadget", "-n", name+"-default", "db", "-o", "jsonpath={.spec.owner}"); got != name {
			t.Errorf("%s-default/db has the spec of %q", name, got)
		}
	}

	// Each consumer gets its own status back.
	for _, name := range []string{"a", "b"} {
		kubectl(t, pkc, "patch", "widget", "-n", "tenant-"+name, "default.db", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready-`+name+`"}}`)
		kubectl(t, pkc, "patch", "gadget", "-n", name+"-default", "db", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready-`+name+`"}}`)
	}
	for name, c := range map[string]*testenv.Cluster{"a": a, "b": b} {
		for _, kind := range []string{"widget", "gadget"} {
			eventually(t, settle, name+"'s "+kind+" status", func() error {
				if got := kubectl(t, c.KubeconfigPath, "get", kind, "-n", "default", "db", "-o", "jsonpath={.status.phase}"); got != "Ready-"+name {
					return fmt.Errorf("status.phase %q", got)
				}
				return nil
			})
		}
	}

	// A's credentials are refused on B's namespaces: reads and writes under
	// Namespace isolation, writes under Prefixed.
	refusals := map[string][]string{
		"tenant":   {"get", "widgets", "-n", "tenant-b"},
		"prefixed": {"delete", "gadget", "-n", "b-default", "db"},
	}
	for i, conn := range []string{"tenant", "prefixed"} {
		path := filepath.Join(t.TempDir(), conn+".kubeconfig")
		writeFile(t, path, kubeconfigs["a"][i])
		out, err := testenv.Kubectl(t.Context(), path, refusals[conn]...)
		if err == nil || !strings.Contains(err.Error()+out, "forbidden") {
			t.Errorf("consumer A's %s credentials: kubectl %s: %v %s, want forbidden", conn, strings.Join(refusals[conn], " "), err, out)
		} else {
			t.Logf("consumer A's %s credentials: kubectl %s: %s", conn, strings.Join(refusals[conn], " "), firstLine(err.Error()+" "+out))
		}
	}

	// Deleting on A never touches B.
	kubectl(t, a.KubeconfigPath, "delete", "widget", "-n", "default", "db", "--wait=false")
	kubectl(t, a.KubeconfigPath, "delete", "gadget", "-n", "default", "db", "--wait=false")
	eventually(t, settle, "A's default/db copies deleted", func() error {
		state = providerState(t, pkc, isolationKinds...)
		for _, gone := range []string{"widgets.example.org tenant-a/default.db", "gadgets.example.org a-default/db"} {
			if state[gone] || state[gone+" terminating"] {
				return fmt.Errorf("%s still there", gone)
			}
		}
		return nil
	})
	for _, keep := range copiesOf("b", uidB) {
		if !state[keep] {
			t.Errorf("B's %s is gone after A deleted its default/db", keep)
		}
	}

	// A's konnector goes away for good: the backend reaps exactly A.
	konnectorA.stop()
	stopped := time.Now()
	probe := harness.FreeAddr(t)
	start(t, "backend", backendBin, "--kubeconfig", saKubeconfig, "--reap", "--stale-after", staleAfter.String(), "--reap-interval", reapInterval.String(), "--reap-grace", reapGrace.String(),
		"--health-probe-bind-address", probe, "--metrics-bind-address", "0")
	// Stale a window after the backend started, its copies marked and
	// deleted a grace later, the rest on the next passes: staleAfter +
	// reapGrace + settle.
	eventually(t, staleAfter+reapGrace+settle, "consumer A reaped", func() error {
		state = providerState(t, pkc, isolationKinds...)
		for _, gone := range copiesOf("a", uidA) {
			if state[gone] || state[gone+" terminating"] {
				return fmt.Errorf("%s still there", gone)
			}
		}
		for _, ns := range []string{"a-default", "a-team-a"} {
			if !state["namespaces "+ns+" terminating"] {
				return fmt.Errorf("namespace %s not deleted", ns)
			}
		}
		return nil
	})
	t.Logf("consumer A reaped %s after its konnector stopped", time.Since(stopped))
	for _, keep := range append(copiesOf("b", uidB), "namespaces tenant-a", "namespaces tenant-b", "namespaces b-default", "namespaces b-team-a") {
		if !state[keep] {
			t.Errorf("%s: gone or terminating, must stay", keep)
		}
	}
	t.Logf("after reaping A the provider holds:\n%s", strings.Join(sorted(state), "\n"))
	t.Logf("whole test took %s", time.Since(began))
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
