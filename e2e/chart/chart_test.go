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
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
	helmrelease "helm.sh/helm/v3/pkg/release"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

const chartDir = "../../charts/konnector"

func load(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders the konnector chart as `helm install konnector
// charts/konnector -n kbind` would, without a cluster, and returns the
// manifests by kind/name@namespace.
func render(t *testing.T, values map[string]any) (map[string]map[string]any, error) {
	t.Helper()
	return renderChart(t, load(t), "konnector", values)
}

// bound are the values every konnector install needs: the bound API groups.
func bound(groups ...any) map[string]any {
	return map[string]any{"rbac": map[string]any{"boundResourceGroups": groups}}
}

// renderRelease renders chrt as release in kbind, client-only, as
// `helm install --dry-run` would.
func renderRelease(t *testing.T, chrt *chart.Chart, release string, values map[string]any) (*helmrelease.Release, error) {
	t.Helper()
	return harness.RenderChart(chrt, release, "kbind", values)
}

// notes are the release notes (NOTES.txt) helm install prints.
func notes(t *testing.T, chrt *chart.Chart, release string, values map[string]any) string {
	t.Helper()
	rel, err := renderRelease(t, chrt, release, values)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Info.Notes
}

// renderChart renders chrt as release in kbind, client-only.
func renderChart(t *testing.T, chrt *chart.Chart, release string, values map[string]any) (map[string]map[string]any, error) {
	t.Helper()
	rel, err := renderRelease(t, chrt, release, values)
	if err != nil {
		return nil, err
	}
	objs, err := harness.ManifestObjects(rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, obj := range objs {
		key := fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName())
		if ns := obj.GetNamespace(); ns != "" {
			key += "@" + ns
		}
		out[key] = obj.Object
	}
	return out, nil
}

func args(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	return containerArgs(t, objs, "konnector")
}

// containerArgs joins the args of the first container, named like the
// Deployment name in kbind.
func containerArgs(t *testing.T, objs map[string]map[string]any, name string) string {
	t.Helper()
	d := objs["Deployment/"+name+"@kbind"]
	if d == nil {
		t.Fatalf("no Deployment %s in kbind; rendered %v", name, keys(objs))
	}
	containers := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	c := containers[0].(map[string]any)
	if c["name"] != name {
		t.Errorf("container %v", c["name"])
	}
	var out []string
	for _, a := range c["args"].([]any) {
		out = append(out, a.(string))
	}
	return strings.Join(out, " ")
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// lintChart runs `helm lint --strict` on the chart in dir with each set of
// values; a warning or an error fails the test.
func lintChart(t *testing.T, dir string, values ...map[string]any) {
	t.Helper()
	lint := action.NewLint()
	lint.Strict = true
	for _, v := range values {
		res := lint.Run([]string{dir}, v)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %s %v: %s", dir, v, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("helm lint %s %v: %v", dir, v, err)
		}
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	// Helm lints in a mode where a template's fail is only logged, so the
	// chart lints without its required value too.
	lintChart(t, chartDir, nil, bound("example.org"))
}

// TestRenderRequiresBoundGroups: there is no default set of bound groups;
// an install without them fails and says which value to set.
func TestRenderRequiresBoundGroups(t *testing.T) {
	t.Parallel()
	for name, values := range map[string]map[string]any{
		"defaults":   nil,
		"empty list": bound(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, values)
			if err == nil || !strings.Contains(err.Error(), "rbac.boundResourceGroups is empty: set it to the API groups of the APIs you bind") {
				t.Errorf("expected the missing-value message, got %v", err)
			}
		})
	}
	// Without RBAC objects there is nothing to narrow.
	if _, err := render(t, map[string]any{"rbac": map[string]any{"create": false}}); err != nil {
		t.Errorf("rbac.create=false needs no bound groups: %v", err)
	}
}

// TestRenderRefusesBuiltInGroups: kbind never binds Kubernetes' own API
// groups or its own, so the chart grants nothing there.
func TestRenderRefusesBuiltInGroups(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", "apps", "batch", "extensions", "policy", "autoscaling", "k8s.io",
		"rbac.authorization.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io", "core.kbind.io"} {
		t.Run(group, func(t *testing.T) {
			_, err := render(t, bound("example.org", group))
			if want := fmt.Sprintf("rbac.boundResourceGroups: %q is a built-in API group", group); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("expected %q, got %v", want, err)
			}
		})
	}
	for _, group := range []string{"example.org", "k8s.io.example.org", "apps.example.org", "core.kcp.io"} {
		if _, err := render(t, bound(group)); err != nil {
			t.Errorf("%s must be accepted: %v", group, err)
		}
	}
}

func TestRenderDefaults(t *testing.T) {
	t.Parallel()
	values := bound("example.org")
	objs, err := render(t, values)
	if err != nil {
		t.Fatal(err)
	}
	a := args(t, objs)
	for _, want := range []string{"--namespace=kbind", "--secret-namespaces=kbind", "--leader-elect=false", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--provider-compression=true"} {
		if !strings.Contains(a, want) {
			t.Errorf("args %q lack %s", a, want)
		}
	}
	labels := objs["Deployment/konnector@kbind"]["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["app.kubernetes.io/instance"] != "konnector" || labels["app.kubernetes.io/name"] != "konnector" {
		t.Errorf("labels %v", labels)
	}
	for _, k := range []string{"ServiceAccount/konnector@kbind", "ClusterRole/konnector", "ClusterRoleBinding/konnector",
		"Role/konnector-leader-election@kbind", "RoleBinding/konnector-leader-election@kbind", "Role/konnector-secrets@kbind",
		"CustomResourceDefinition/connections.core.kbind.io"} {
		if objs[k] == nil {
			t.Errorf("%s not rendered; rendered %v", k, keys(objs))
		}
	}
	crd := objs["CustomResourceDefinition/connections.core.kbind.io"]
	if crd["metadata"].(map[string]any)["annotations"].(map[string]any)["helm.sh/resource-policy"] != "keep" {
		t.Error("CRDs must be kept on uninstall")
	}
	// Least privilege: the bound groups only, with the verbs the syncer
	// uses (create and delete for imported objects, docs/import.md), and no
	// cluster-wide Secret or ConfigMap rule; the kubeconfig Secret Role
	// stays.
	rules := fmt.Sprint(objs["ClusterRole/konnector"]["rules"])
	if !strings.Contains(rules, "map[apiGroups:[example.org] resources:[*] verbs:[get list watch create update patch delete]]") {
		t.Errorf("the bound-group rule: %s", rules)
	}
	if strings.Contains(rules, "apiGroups:[*]") || strings.Contains(rules, "secrets") || strings.Contains(rules, "configmaps") {
		t.Errorf("default RBAC grants more than the bound groups: %s", rules)
	}
	if r := fmt.Sprint(objs["Role/konnector-secrets@kbind"]["rules"]); !strings.Contains(r, "resources:[secrets] verbs:[get list watch create update patch delete]") {
		t.Errorf("the kubeconfig Secret Role: %s", r)
	}
	if n := notes(t, load(t), "konnector", values); strings.Contains(n, "WARNING") {
		t.Errorf("default notes warn:\n%s", n)
	}
}

func TestRenderOptions(t *testing.T) {
	t.Parallel()
	values := map[string]any{
		"replicaCount":        2,
		"rbac":                map[string]any{"boundResourceGroups": []any{"example.org", "b.example.org"}, "relatedResources": true},
		"installCRDs":         false,
		"metrics":             map[string]any{"service": map[string]any{"enabled": true}},
		"podDisruptionBudget": map[string]any{"enabled": true},
		"secretNamespaces":    []any{"kbind", "platform"},
		"provider":            map[string]any{"compression": false},
	}
	objs, err := render(t, values)
	if err != nil {
		t.Fatal(err)
	}
	if a := args(t, objs); !strings.Contains(a, "--leader-elect=true") || !strings.Contains(a, "--secret-namespaces=kbind,platform") {
		t.Errorf("more than one replica must force leader election: %s", a)
	}
	if a := args(t, objs); !strings.Contains(a, "--provider-compression=false") {
		t.Errorf("provider.compression=false: %s", a)
	}
	rules := fmt.Sprint(objs["ClusterRole/konnector"]["rules"])
	if strings.Contains(rules, "apiGroups:[*]") || !strings.Contains(rules, "apiGroups:[example.org b.example.org]") {
		t.Errorf("bound groups: %s", rules)
	}
	if !strings.Contains(rules, "resources:[secrets configmaps] verbs:[get list watch create update patch delete]") {
		t.Errorf("rbac.relatedResources must add the Secret/ConfigMap rule: %s", rules)
	}
	for _, k := range []string{"Service/konnector-metrics@kbind", "PodDisruptionBudget/konnector@kbind", "Role/konnector-secrets@platform"} {
		if objs[k] == nil {
			t.Errorf("%s not rendered", k)
		}
	}
	if objs["CustomResourceDefinition/connections.core.kbind.io"] != nil {
		t.Error("installCRDs=false still renders CRDs")
	}
	n := notes(t, load(t), "konnector", values)
	if !strings.Contains(n, "WARNING: rbac.relatedResources is true: the konnector can read, create, update and delete every\nSecret and ConfigMap in every namespace") {
		t.Errorf("notes lack the relatedResources warning:\n%s", n)
	}
	if strings.Contains(n, "boundResourceGroups contains") {
		t.Errorf("notes warn about a wildcard that is not there:\n%s", n)
	}
}

// TestRenderWildcardGroups: "*" is the user's explicit choice; it renders,
// and the notes say loudly what it grants.
func TestRenderWildcardGroups(t *testing.T) {
	t.Parallel()
	values := bound("*")
	objs, err := render(t, values)
	if err != nil {
		t.Fatal(err)
	}
	if rules := fmt.Sprint(objs["ClusterRole/konnector"]["rules"]); !strings.Contains(rules, "map[apiGroups:[*] resources:[*] verbs:[get list watch create update patch delete]]") {
		t.Errorf("wildcard rule: %s", rules)
	}
	if n := notes(t, load(t), "konnector", values); !strings.Contains(n, "WARNING: rbac.boundResourceGroups contains \"*\": the konnector can get, list, watch, create, update, patch and delete\nEVERY resource of EVERY API group in this cluster") {
		t.Errorf("notes lack the wildcard warning:\n%s", n)
	}
}

// TestSchemaRejectsBadValues: values.schema.json refuses bad values with a
// message naming the value and what is wrong with it.
func TestSchemaRejectsBadValues(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"typo":             {map[string]any{"replicas": 2}, "additional properties 'replicas' not allowed"},
		"wrong type":       {map[string]any{"replicaCount": "two"}, "at '/replicaCount': got string, want integer"},
		"bad policy":       {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		"zero workers":     {map[string]any{"workers": 0}, "at '/workers': minimum: got 0, want 1"},
		"group not text":   {bound(1), "at '/rbac/boundResourceGroups/0'"},
		"duplicate groups": {bound("example.org", "example.org"), "at '/rbac/boundResourceGroups'"},
		"related not bool": {map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org"}, "relatedResources": "yes"}}, "at '/rbac/relatedResources'"},
		"bad timeout":      {map[string]any{"provider": map[string]any{"timeout": "soon"}}, "at '/provider/timeout': 'soon' does not match pattern"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("expected a schema error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestChartOnARealAPIServer applies the rendered chart to a real consumer
// API server and runs the konnector binary impersonating the chart's
// ServiceAccount: a missing RBAC rule fails the sync below.
func TestChartOnARealAPIServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	kc := pair.KubeconfigPath
	// `helm install konnector charts/konnector -n kbind --create-namespace`,
	// through the Helm SDK against the consumer. The consumer already has
	// the CRDs (testenv installs them). The bound groups are the Widgets'
	// only; the binding copies a related ConfigMap, so the related rule is
	// switched on.
	cfg := helmConfig(t, kc, "consumer")
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "konnector", "kbind", true
	rel, err := install.Run(load(t), map[string]any{"installCRDs": false, "rbac": map[string]any{"boundResourceGroups": []any{"example.org"}, "relatedResources": true}})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if !strings.Contains(rel.Info.Notes, "WARNING: rbac.relatedResources is true") {
		t.Errorf("helm install notes lack the relatedResources warning:\n%s", rel.Info.Notes)
	}
	out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "-n", "kbind", "get", "deployment", "-l", "app.kubernetes.io/instance=konnector", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "deployment.apps/konnector" {
		t.Fatalf("the guide's deployment lookup: %v %q", err, out)
	}

	// The konnector as the chart's ServiceAccount.
	asSA := filepath.Join(t.TempDir(), "as-sa.kubeconfig")
	if err := harness.WriteImpersonating(pair.Consumer.KubeconfigPath, asSA, "system:serviceaccount:kbind:konnector"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "konnector")
	if err := harness.Build(ctx, bin, "github.com/kbind/kbind/konnector/cmd/konnector"); err != nil {
		t.Fatal(err)
	}
	log := &enginetest.SyncBuffer{}
	kctx, cancel := context.WithCancel(ctx)
	k := exec.CommandContext(kctx, bin, "--kubeconfig", asSA, "--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0")
	k.Stdout, k.Stderr = log, log
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = k.Wait()
		if t.Failed() {
			t.Logf("konnector log:\n%s", log.String())
		}
	}()

	setup := enginetest.ConnectionManifest("provider", pair.Provider.Kubeconfig) + `---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: widgets}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: configmaps, direction: FromConsumer, selector: {names: [widget-config]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: widget-config, namespace: default}
data: {color: blue}
`
	file := filepath.Join(t.TempDir(), "setup.yaml")
	if err := os.WriteFile(file, []byte(setup), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "apply", "-f", file); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, args := range [][]string{
		{"--context=consumer", "wait", "--for=condition=Ready", "connection/provider", "--timeout=60s"},
		{"--context=consumer", "wait", "--for=condition=Ready", "clusterbinding/widgets", "--timeout=60s"},
		{"--context=consumer", "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=60s"},
	} {
		if out, err := testenv.Kubectl(ctx, kc, args...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	widget := filepath.Join(t.TempDir(), "widget.yaml")
	if err := os.WriteFile(widget, []byte("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {a: b}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "apply", "-f", widget); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	enginetest.EventuallyWithin(t, 60*time.Second, "the Widget and the ConfigMap on the provider", func() error {
		for _, what := range [][]string{{"widget", "w"}, {"configmap", "widget-config"}} {
			if _, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "get", what[0], what[1]); err != nil {
				return err
			}
		}
		return nil
	})
	// The Lease is written with the provider credential, not the chart's RBAC.
	if strings.Contains(log.String(), "forbidden") {
		t.Errorf("the chart's RBAC refused the konnector something:\n%s", harness.GrepLines(log.String(), "forbidden"))
	}
}
