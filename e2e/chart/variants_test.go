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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// prometheusOperator is the prometheus-operator release whose
// ServiceMonitor and PrometheusRule CRDs the variants with
// metrics.serviceMonitor.enabled and metrics.prometheusRule.enabled are
// checked against; its module, fetched through the Go module proxy,
// carries the CRDs under example/prometheus-operator-crd.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// operatorCRD returns a CRD file (e.g. monitoring.coreos.com_servicemonitors.yaml)
// of the pinned prometheus-operator module (go mod download: the module
// cache, or the proxy the first time).
func operatorCRD(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", prometheusOperator).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", prometheusOperator, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", prometheusOperator, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "example", "prometheus-operator-crd", file)
}

// TestEveryVariantAcceptedByTheAPIServer renders the konnector and backend
// charts for each supported shape of values and has a real API server
// validate every object (kubectl apply --dry-run=server): schemas of
// built-in kinds, the CRDs the chart ships, the ServiceMonitor and
// PrometheusRule against prometheus-operator's CRDs, RBAC (escalation checks included: the
// applying user must hold what a Role grants, so the checks run as admin).
func TestEveryVariantAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := cluster.Get(t)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := testenv.Kubectl(ctx, c.KubeconfigPath, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	for _, crd := range []string{"servicemonitors", "prometheusrules"} {
		kubectl("apply", "--server-side", "-f", operatorCRD(t, "monitoring.coreos.com_"+crd+".yaml"))
		enginetest.EventuallyWithin(t, 60*time.Second, "the "+crd+" CRD established", func() error {
			out, err := testenv.Kubectl(ctx, c.KubeconfigPath, "get", "crd", crd+".monitoring.coreos.com",
				"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if strings.TrimSpace(out) != "True" {
				return fmt.Errorf("Established=%q", out)
			}
			return nil
		})
	}
	// Namespaces the variants name (the release's and the Secret namespaces).
	for _, ns := range []string{"kbind", "tenants"} {
		ensureNamespace(t, c.KubeconfigPath, ns)
	}

	groups := []any{"example.org"}
	cases := []struct {
		chart, name string
		values      map[string]any
		kinds       []string // kinds the variant must render
	}{
		{"konnector", "defaults", bound(groups...), []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}},
		{"konnector", "HA: replicas and leader election and PDB", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups},
			"replicaCount": 2, "podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 1}}, []string{"PodDisruptionBudget", "Role"}},
		{"konnector", "narrowed RBAC: two groups and Secret namespaces and no related resources and an existing ServiceAccount",
			map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org", "widgets.example.com"}, "relatedResources": false},
				"secretNamespaces": []any{"kbind", "tenants"}, "serviceAccount": map[string]any{"create": false, "name": "konnector-sa"}, "installCRDs": false},
			[]string{"Deployment", "Role", "RoleBinding"}},
		{"konnector", "related resources", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups, "relatedResources": true}}, []string{"ClusterRole"}},
		{"konnector", "ServiceMonitor", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups},
			"metrics": map[string]any{"service": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}}},
			[]string{"Service", "ServiceMonitor"}},
		{"konnector", "Grafana dashboard", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups},
			"metrics": map[string]any{"dashboards": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "kbind"}}}},
			[]string{"ConfigMap", "Deployment"}},
		{"konnector", "metrics off and a pinned image and scheduling", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups},
			"metrics": map[string]any{"enabled": false}, "image": map[string]any{"tag": "0.1.0-rc.1", "pullPolicy": "Always"},
			"nodeSelector": map[string]any{"kubernetes.io/os": "linux"}, "tolerations": []any{map[string]any{"key": "dedicated", "operator": "Exists"}},
			"resources":      map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi"}},
			"podAnnotations": map[string]any{"example.org/a": "b"}, "extraArgs": []any{"--binding-resync=1m"}}, []string{"Deployment"}},
		{"backend", "defaults: report only", map[string]any{}, []string{"Deployment", "ServiceAccount", "ClusterRole"}},
		{"backend", "reaper with namespace cleanup", map[string]any{"reap": true, "rbac": map[string]any{"reapGroups": groups, "namespaceCleanup": true}}, []string{"ClusterRole", "ClusterRoleBinding"}},
		{"backend", "HA with metrics Service", map[string]any{"replicaCount": 2, "metrics": map[string]any{"service": map[string]any{"enabled": true}}}, []string{"Service", "Role"}},
		{"konnector", "PrometheusRule with defaults", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups},
			"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}, []string{"PrometheusRule"}},
		{"konnector", "PrometheusRule and ServiceMonitor with labels and a job and short thresholds", map[string]any{"rbac": map[string]any{"boundResourceGroups": groups},
			"metrics": map[string]any{"service": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true},
				"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}, "job": "kbind-konnector",
					"alerts": map[string]any{"KbindHeartbeatStale": map[string]any{"for": "0s", "seconds": 5}, "KbindSyncFailures": map[string]any{"for": "10s", "window": "30s"}}}}},
			[]string{"Service", "ServiceMonitor", "PrometheusRule"}},
		{"backend", "ServiceMonitor and PrometheusRule", map[string]any{"metrics": map[string]any{"service": map[string]any{"enabled": true},
			"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}}}, []string{"Service", "ServiceMonitor", "PrometheusRule"}},
		{"backend", "PrometheusRule with a job and short thresholds and reaping", map[string]any{"reap": true, "rbac": map[string]any{"reapGroups": groups},
			"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true, "job": "kbind-backend",
				"alerts": map[string]any{"KbindConsumerStale": map[string]any{"for": "0s", "seconds": 2.5}, "KbindReapFailing": map[string]any{"for": "5s", "window": "20s"}}}}},
			[]string{"PrometheusRule"}},
		{"backend", "Grafana dashboard", map[string]any{"metrics": map[string]any{"dashboards": map[string]any{"enabled": true, "labels": map[string]any{"grafana_dashboard": "1", "team": "platform"}}}},
			[]string{"ConfigMap", "Deployment"}},
	}
	for _, tc := range cases {
		t.Run(tc.chart+": "+tc.name, func(t *testing.T) {
			chrt, err := loader.Load("../../charts/" + tc.chart)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := renderRelease(t, chrt, tc.chart, tc.values)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			for _, kind := range tc.kinds {
				if !strings.Contains(rel.Manifest, "\nkind: "+kind+"\n") {
					t.Errorf("the variant renders no %s", kind)
				}
			}
			// kubectl -f splits at commas: no test names with commas.
			file := filepath.Join(t.TempDir(), "manifest.yaml")
			if err := os.WriteFile(file, []byte(rel.Manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := testenv.Kubectl(ctx, c.KubeconfigPath, "apply", "--dry-run=server", "-f", file)
			if err != nil {
				t.Fatalf("the API server refuses the %s chart with %v: %v\n%s", tc.chart, tc.values, err, out)
			}
			if n := strings.Count(out, "(server dry run)"); n == 0 {
				t.Errorf("no object checked:\n%s", out)
			} else {
				t.Logf("%d objects accepted", n)
			}
		})
	}
}

// TestChartsShareTheAppVersion: `make image` tags both images with the
// konnector chart's appVersion, and each chart runs the image tagged with
// its own appVersion; they must be the same release.
func TestChartsShareTheAppVersion(t *testing.T) {
	t.Parallel()
	versions := map[string]string{}
	for _, name := range []string{"konnector", "backend", "consumer-access"} {
		chrt, err := loader.Load("../../charts/" + name)
		if err != nil {
			t.Fatal(err)
		}
		versions[name] = chrt.Metadata.AppVersion
	}
	if versions["konnector"] == "" || versions["backend"] != versions["konnector"] || versions["consumer-access"] != versions["konnector"] {
		t.Errorf("the charts' appVersions differ: %v", versions)
	}
}
