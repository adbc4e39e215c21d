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
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kbind/kbind/e2e/harness"
)

// dashboards are the Grafana dashboards the charts ship, with the template
// variables each must define (besides the data source).
var dashboards = []struct {
	chart, file string
	variables   []string
}{
	{"konnector", "kbind-konnector.json", []string{"job", "connection", "api"}},
	{"backend", "kbind-backend.json", []string{"job", "consumer"}},
}

// grafanaBuiltins are the variables Grafana itself defines that the
// dashboards use.
var grafanaBuiltins = map[string]bool{"__rate_interval": true, "__interval": true}

// TestDashboardsAreWellFormed: each dashboard parses, its panel ids are
// unique, every panel names the datasource variable and has a query, and
// every variable a query uses is defined. Whether the queries return data
// is e2e/monitoring's (against a real Prometheus).
func TestDashboardsAreWellFormed(t *testing.T) {
	t.Parallel()
	for _, dash := range dashboards {
		t.Run(dash.chart, func(t *testing.T) {
			d, err := harness.LoadDashboard("../../charts/" + dash.chart + "/files/dashboards/" + dash.file)
			if err != nil {
				t.Fatal(err)
			}
			if d.UID == "" || d.Title == "" || d.SchemaVersion < 39 {
				t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and schemaVersion >= 39", d.UID, d.Title, d.SchemaVersion)
			}
			defined := map[string]bool{}
			for _, v := range d.Templating.List {
				if defined[v.Name] {
					t.Errorf("variable %s defined twice", v.Name)
				}
				defined[v.Name] = true
				switch v.Type {
				case "datasource":
					if v.QueryString() != "prometheus" {
						t.Errorf("variable %s: a datasource variable of type %q, want prometheus", v.Name, v.QueryString())
					}
				case "query":
					if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
						t.Errorf("variable %s: datasource %+v, want the $datasource variable", v.Name, v.Datasource)
					}
					if _, ok := harness.LabelValuesSelector(v.QueryString()); !ok {
						t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.QueryString())
					}
				}
			}
			for _, want := range append([]string{"datasource"}, dash.variables...) {
				if !defined[want] {
					t.Errorf("no template variable %s", want)
				}
			}
			ids := map[int]string{}
			queries := 0
			for _, p := range d.AllPanels() {
				if prev, ok := ids[p.ID]; ok || p.ID == 0 {
					t.Errorf("panel %q: id %d missing or already used by %q", p.Title, p.ID, prev)
				}
				ids[p.ID] = p.Title
				if p.Type == "row" {
					continue
				}
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q: datasource %+v, want the $datasource variable", p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					queries++
					if strings.TrimSpace(tg.Expr) == "" {
						t.Errorf("panel %q query %s: empty expr", p.Title, tg.RefID)
					}
					if tg.RefID == "" || refs[tg.RefID] {
						t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
					}
					refs[tg.RefID] = true
					if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
						t.Errorf("panel %q query %s: datasource %+v, want the $datasource variable", p.Title, tg.RefID, tg.Datasource)
					}
					for _, v := range harness.Variables(tg.Expr) {
						if !defined[v] && !grafanaBuiltins[v] {
							t.Errorf("panel %q query %s uses $%s, which the dashboard does not define", p.Title, tg.RefID, v)
						}
					}
					if strings.Contains(tg.Expr, "rate(") && !strings.Contains(tg.Expr, "[$__rate_interval]") {
						t.Errorf("panel %q query %s: a rate or increase without [$__rate_interval]: %s", p.Title, tg.RefID, tg.Expr)
					}
				}
			}
			t.Logf("%d panels, %d queries", len(ids), queries)
		})
	}
}

// TestDashboardConfigMapHoldsTheFile: with metrics.dashboards.enabled the
// chart renders the dashboard file itself (one source, no copy) into a
// ConfigMap with Grafana's sidecar label; off by default; refused with
// metrics off.
func TestDashboardConfigMapHoldsTheFile(t *testing.T) {
	t.Parallel()
	for _, dash := range dashboards {
		t.Run(dash.chart, func(t *testing.T) {
			chrt, err := loader.Load("../../charts/" + dash.chart)
			if err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile("../../charts/" + dash.chart + "/files/dashboards/" + dash.file)
			if err != nil {
				t.Fatal(err)
			}
			base := map[string]any{}
			if dash.chart == "konnector" {
				base["rbac"] = map[string]any{"boundResourceGroups": []any{"example.org"}}
			}
			with := func(dashboards map[string]any, metricsOn bool) map[string]any {
				v := map[string]any{"metrics": map[string]any{"enabled": metricsOn, "dashboards": dashboards}}
				if r, ok := base["rbac"]; ok {
					v["rbac"] = r
				}
				return v
			}

			rel, err := renderRelease(t, chrt, "kbind", base)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(rel.Manifest, "-dashboard\n") {
				t.Errorf("a dashboard ConfigMap by default:\n%s", rel.Manifest)
			}

			rel, err = renderRelease(t, chrt, "kbind", with(map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "kbind"}}, true))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := harness.ManifestObjects(rel.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, o := range objs {
				if o.GetKind() != "ConfigMap" || !strings.HasSuffix(o.GetName(), "-dashboard") {
					continue
				}
				found = true
				data, _, _ := unstructured.NestedString(o.Object, "data", dash.file)
				if data != strings.TrimRight(string(file), "\n") {
					t.Errorf("ConfigMap %s: data[%s] is not the dashboard file (%d bytes, file %d)", o.GetName(), dash.file, len(data), len(file))
				}
				if o.GetLabels()["grafana_dashboard"] != "1" {
					t.Errorf("ConfigMap %s labels %v: no grafana_dashboard: \"1\"", o.GetName(), o.GetLabels())
				}
				if o.GetAnnotations()["grafana_folder"] != "kbind" {
					t.Errorf("ConfigMap %s annotations %v: no grafana_folder", o.GetName(), o.GetAnnotations())
				}
			}
			if !found {
				t.Fatalf("no dashboard ConfigMap with metrics.dashboards.enabled:\n%s", rel.Manifest)
			}

			_, err = renderRelease(t, chrt, "kbind", with(map[string]any{"enabled": true}, false))
			if err == nil || !strings.Contains(err.Error(), "metrics.dashboards.enabled needs metrics.enabled") {
				t.Errorf("dashboards on with metrics off: %v, want the chart to refuse it", err)
			}
		})
	}
}
