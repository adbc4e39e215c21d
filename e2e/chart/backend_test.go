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

package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

const backendChartDir = "../../charts/backend"

// renderBackend renders the backend chart as `helm install backend
// charts/backend -n kbind` would, without a cluster, by kind/name@namespace.
func renderBackend(t *testing.T, values map[string]any) (map[string]map[string]any, error) {
	t.Helper()
	c, err := loader.Load(backendChartDir)
	if err != nil {
		t.Fatal(err)
	}
	return renderChart(t, c, "backend", values)
}

func backendArgs(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	return containerArgs(t, objs, "backend")
}

// reaping are the values reaping needs: reap on and the exported groups.
func reaping(groups ...any) map[string]any {
	return map[string]any{"reap": true, "rbac": map[string]any{"reapGroups": groups}}
}

func TestBackendLint(t *testing.T) {
	t.Parallel()
	// Helm lints in a mode where a template's fail is only logged.
	lintChart(t, backendChartDir, nil, map[string]any{"reap": true}, reaping("example.org"))
}

func TestBackendRenderDefaults(t *testing.T) {
	t.Parallel()
	objs, err := renderBackend(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := backendArgs(t, objs)
	for _, want := range []string{"--namespace=kbind", "--leader-elect=false", "--stale-after=30m", "--reap=false", "--reap-interval=30s", "--reap-grace=10m",
		"--qps=50", "--burst=100", "--timeout=30s", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"} {
		if !strings.Contains(a, want) {
			t.Errorf("args %q lack %s", a, want)
		}
	}
	for _, k := range []string{"ServiceAccount/backend@kbind", "ClusterRole/backend", "ClusterRoleBinding/backend",
		"Role/backend-leader-election@kbind", "RoleBinding/backend-leader-election@kbind"} {
		if objs[k] == nil {
			t.Errorf("%s not rendered; rendered %v", k, keys(objs))
		}
	}
	// Report only: the backend may delete nothing.
	if rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"]); strings.Contains(rules, "delete") {
		t.Errorf("report-only RBAC grants delete: %s", rules)
	}
	if rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"]); !strings.Contains(rules, "resources:[leases] verbs:[get list watch patch]") {
		t.Errorf("the backend must read and annotate Leases: %s", rules)
	}
	if n := backendNotes(t, nil); !strings.Contains(n, "Reaping is OFF (report only)") || strings.Contains(n, "WARNING") {
		t.Errorf("report-only notes:\n%s", n)
	}
}

func backendNotes(t *testing.T, values map[string]any) string {
	t.Helper()
	c, err := loader.Load(backendChartDir)
	if err != nil {
		t.Fatal(err)
	}
	return notes(t, c, "backend", values)
}

func TestBackendRenderReap(t *testing.T) {
	t.Parallel()
	values := reaping("example.org")
	values["replicaCount"], values["staleAfter"] = 2, "1h"
	values["metrics"] = map[string]any{"service": map[string]any{"enabled": true}}
	objs, err := renderBackend(t, values)
	if err != nil {
		t.Fatal(err)
	}
	a := backendArgs(t, objs)
	for _, want := range []string{"--leader-elect=true", "--reap=true", "--stale-after=1h"} {
		if !strings.Contains(a, want) {
			t.Errorf("args %q lack %s", a, want)
		}
	}
	rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"])
	for _, want := range []string{
		"map[apiGroups:[example.org] resources:[*] verbs:[get list patch delete]]",
		"resources:[secrets configmaps] verbs:[get list patch delete]",
		"resources:[namespaces] verbs:[list]]",
		"resources:[leases] verbs:[get list watch patch delete]",
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("reap RBAC lacks %s: %s", want, rules)
		}
	}
	// Without rbac.namespaceCleanup: no wildcard anywhere, no namespace
	// deletion.
	if strings.Contains(rules, "apiGroups:[*]") || strings.Contains(rules, "resources:[namespaces] verbs:[list delete]") {
		t.Errorf("reap RBAC without namespaceCleanup: %s", rules)
	}
	if objs["Service/backend-metrics@kbind"] == nil {
		t.Error("metrics Service not rendered")
	}
	if n := backendNotes(t, values); !strings.Contains(n, "Reaping is ON") || !strings.Contains(n, "are kept (rbac.namespaceCleanup is false)") || strings.Contains(n, "WARNING") {
		t.Errorf("reap notes:\n%s", n)
	}
}

// TestBackendRenderNamespaceCleanup: listing everything (to prove a
// namespace empty) and deleting namespaces is its own opt-in.
func TestBackendRenderNamespaceCleanup(t *testing.T) {
	t.Parallel()
	values := reaping("example.org")
	values["rbac"].(map[string]any)["namespaceCleanup"] = true
	objs, err := renderBackend(t, values)
	if err != nil {
		t.Fatal(err)
	}
	rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"])
	for _, want := range []string{"resources:[namespaces] verbs:[list delete]", "map[apiGroups:[*] resources:[*] verbs:[list]]"} {
		if !strings.Contains(rules, want) {
			t.Errorf("namespaceCleanup RBAC lacks %s: %s", want, rules)
		}
	}
	if strings.Contains(rules, "apiGroups:[*] resources:[*] verbs:[list delete]") {
		t.Errorf("namespaceCleanup must not widen deletes: %s", rules)
	}
	if n := backendNotes(t, values); !strings.Contains(n, "are deleted once they hold nothing else") {
		t.Errorf("namespaceCleanup notes:\n%s", n)
	}
	// Report only: the switch grants nothing.
	objs, err = renderBackend(t, map[string]any{"rbac": map[string]any{"namespaceCleanup": true}})
	if err != nil {
		t.Fatal(err)
	}
	if rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"]); strings.Contains(rules, "delete") || strings.Contains(rules, "apiGroups:[*]") {
		t.Errorf("report-only RBAC with namespaceCleanup: %s", rules)
	}
}

// TestBackendRenderRequiresReapGroups: reaping has no default groups; it
// fails and says which value to set. Report only needs none.
func TestBackendRenderRequiresReapGroups(t *testing.T) {
	t.Parallel()
	for name, values := range map[string]map[string]any{
		"reap alone": {"reap": true},
		"empty list": reaping(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderBackend(t, values)
			if err == nil || !strings.Contains(err.Error(), "reap is true but rbac.reapGroups is empty: set it to the API groups you export to consumers") {
				t.Errorf("expected the missing-value message, got %v", err)
			}
		})
	}
	for _, group := range []string{"", "apps", "coordination.k8s.io", "core.kbind.io"} {
		_, err := renderBackend(t, reaping("example.org", group))
		if want := fmt.Sprintf("rbac.reapGroups: %q is a built-in API group", group); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("expected %q, got %v", want, err)
		}
	}
	if _, err := renderBackend(t, map[string]any{"rbac": map[string]any{"reapGroups": []any{}}}); err != nil {
		t.Errorf("report only needs no reap groups: %v", err)
	}
}

// TestBackendRenderWildcardReapGroups: "*" is the user's explicit choice; it
// renders, and the notes warn.
func TestBackendRenderWildcardReapGroups(t *testing.T) {
	t.Parallel()
	values := reaping("*")
	objs, err := renderBackend(t, values)
	if err != nil {
		t.Fatal(err)
	}
	if rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"]); !strings.Contains(rules, "map[apiGroups:[*] resources:[*] verbs:[get list patch delete]]") {
		t.Errorf("wildcard rule: %s", rules)
	}
	if n := backendNotes(t, values); !strings.Contains(n, "WARNING: rbac.reapGroups contains \"*\": the backend may delete EVERY resource of EVERY API group") {
		t.Errorf("notes lack the wildcard warning:\n%s", n)
	}
}

func TestBackendSchemaRejectsBadValues(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"typo":                 {map[string]any{"staleAfterr": "1h"}, "additional properties 'staleAfterr' not allowed"},
		"wrong type":           {map[string]any{"reap": "yes"}, "at '/reap': got string, want boolean"},
		"bad duration":         {map[string]any{"staleAfter": "soon"}, "at '/staleAfter': 'soon' does not match pattern"},
		"group not text":       {map[string]any{"rbac": map[string]any{"reapGroups": []any{1}}}, "at '/rbac/reapGroups/0'"},
		"cleanup not bool":     {map[string]any{"rbac": map[string]any{"namespaceCleanup": "yes"}}, "at '/rbac/namespaceCleanup'"},
		"nested typo":          {map[string]any{"client": map[string]any{"qsp": 5}}, "at '/client': additional properties 'qsp' not allowed"},
		"zero replicas":        {map[string]any{"replicaCount": 0}, "at '/replicaCount': minimum: got 0, want 1"},
		"negative burst":       {map[string]any{"client": map[string]any{"burst": -1}}, "at '/client/burst'"},
		"bad pull policy":      {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"},
		"duplicate reap group": {reaping("example.org", "example.org"), "at '/rbac/reapGroups'"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderBackend(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("expected a schema error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// marked is a provider object kbind wrote for consumer: the managed and
// consumer-cluster-uid markers, and the annotations its kind needs.
func marked(kind, apiVersion, namespace, name, consumer string, annotations map[string]string, rest string) string {
	ann := fmt.Sprintf("core.kbind.io/consumer-cluster-uid: %s\n", consumer)
	for k, v := range annotations {
		ann += fmt.Sprintf("    %s: %q\n", k, v)
	}
	ns := ""
	if namespace != "" {
		ns = "\n  namespace: " + namespace
	}
	return fmt.Sprintf(`---
apiVersion: %s
kind: %s
metadata:
  name: %s%s
  labels:
    core.kbind.io/managed: "true"
    core.kbind.io/consumer-cluster-uid: %s
  annotations:
    %s%s
`, apiVersion, kind, name, ns, consumer, ann, rest)
}

// consumerObjects are what a konnector leaves on the provider for consumer:
// a namespace kbind created, a Widget copy and a related ConfigMap in it, and
// a heartbeat Lease in kbind that nobody renews.
func consumerObjects(consumer, namespace string) string {
	return marked("Namespace", "v1", "", namespace, consumer, nil, "") +
		marked("Widget", "example.org/v1alpha1", namespace, "w", consumer, map[string]string{"core.kbind.io/consumer-object-uid": "o-" + consumer}, "spec: {size: 1}") +
		marked("ConfigMap", "v1", namespace, "related", consumer, map[string]string{"core.kbind.io/related-binding": "b/0"}, "data: {color: blue}") +
		marked("Lease", "coordination.k8s.io/v1", "kbind", "provider-"+consumer, consumer, map[string]string{"core.kbind.io/connection": "provider"},
			"spec: {holderIdentity: "+consumer+", leaseDurationSeconds: 60, renewTime: \"2026-01-01T00:00:00.000000Z\"}")
}

// TestBackendChartOnARealAPIServer installs the backend chart with reaping
// on a real API server and runs the backend binary as the chart's
// ServiceAccount. Without rbac.namespaceCleanup the reaper may not list
// every resource in a namespace, so it keeps the namespace kbind created for
// the stale consumer and reaps everything else, with no deletion refused;
// after `helm upgrade --set rbac.namespaceCleanup=true` such a namespace
// goes too.
func TestBackendChartOnARealAPIServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	provider := testenv.StartClusterT(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	kc := provider.KubeconfigPath
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := testenv.Kubectl(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return out
	}
	apply := func(manifest string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "objects.yaml")
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		kubectl("apply", "-f", file)
	}
	gone := func(kind, namespace, name string) bool {
		t.Helper()
		out := kubectl("get", kind, "-n", namespace, "--ignore-not-found", "-o", "name", name)
		return strings.TrimSpace(out) == ""
	}
	phase := func(namespace string) string {
		t.Helper()
		return kubectl("get", "namespace", namespace, "-o", "jsonpath={.status.phase}")
	}

	cfg := helmConfig(t, kc, "provider")
	c, err := loader.Load(backendChartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "backend", "kbind", true
	rel, err := install.Run(c, reaping("example.org"))
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if !strings.Contains(rel.Info.Notes, "are kept (rbac.namespaceCleanup is false)") {
		t.Errorf("helm install notes:\n%s", rel.Info.Notes)
	}
	asSA := filepath.Join(t.TempDir(), "backend-sa.kubeconfig")
	if err := harness.WriteImpersonating(kc, asSA, "system:serviceaccount:kbind:backend"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "backend")
	if err := harness.Build(ctx, bin, "github.com/kbind/kbind/backend/cmd/backend"); err != nil {
		t.Fatal(err)
	}

	apply(consumerObjects("consumer-a", "team-a"))
	log := &enginetest.SyncBuffer{}
	bctx, cancel := context.WithCancel(ctx)
	b := exec.CommandContext(bctx, bin, "--kubeconfig", asSA, "--reap", "--stale-after", "2s", "--reap-interval", "500ms", "--reap-grace", "1s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	b.Stdout, b.Stderr = log, log
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = b.Wait()
		if t.Failed() {
			t.Logf("backend log:\n%s", log.String())
		}
	}()

	// The Lease goes last, once the pass is done: then the namespace's fate
	// is settled.
	enginetest.EventuallyWithin(t, 60*time.Second, "consumer-a reaped", func() error {
		for _, o := range [][3]string{{"widgets.example.org", "team-a", "w"}, {"configmap", "team-a", "related"}, {"lease", "kbind", "provider-consumer-a"}} {
			if !gone(o[0], o[1], o[2]) {
				return fmt.Errorf("%s %s/%s still there", o[0], o[1], o[2])
			}
		}
		return nil
	})
	if p := phase("team-a"); p != "Active" {
		t.Errorf("namespace team-a is %q: without rbac.namespaceCleanup it must be kept", p)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = "kbind"
	values := reaping("example.org")
	values["rbac"].(map[string]any)["namespaceCleanup"] = true
	rel, err = upgrade.Run("backend", c, values)
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if !strings.Contains(rel.Info.Notes, "are deleted once they hold nothing else") {
		t.Errorf("helm upgrade notes:\n%s", rel.Info.Notes)
	}
	apply(consumerObjects("consumer-b", "team-b"))
	enginetest.EventuallyWithin(t, 60*time.Second, "consumer-b reaped with its namespace", func() error {
		for _, o := range [][3]string{{"widgets.example.org", "team-b", "w"}, {"configmap", "team-b", "related"}, {"lease", "kbind", "provider-consumer-b"}} {
			if !gone(o[0], o[1], o[2]) {
				return fmt.Errorf("%s %s/%s still there", o[0], o[1], o[2])
			}
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if p := phase("team-b"); p != "Terminating" {
			return fmt.Errorf("namespace team-b is %q", p)
		}
		return nil
	})
	if p := phase("team-a"); p != "Active" {
		t.Errorf("namespace team-a is %q: consumer-a was forgotten with its Lease", p)
	}
	for _, refused := range []string{"Not allowed to delete", "is forbidden: User"} {
		if strings.Contains(log.String(), refused) {
			t.Errorf("the chart's RBAC refused the backend a deletion:\n%s", harness.GrepLines(log.String(), refused))
		}
	}
}

// helmConfig is a Helm SDK configuration against the kubeconfig's context,
// release namespace kbind.
func helmConfig(t *testing.T, kubeconfig, context string) *action.Configuration {
	t.Helper()
	cfg, err := harness.HelmConfig(kubeconfig, context, "kbind")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
