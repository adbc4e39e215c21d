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

package monitoring

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kbind/kbind/e2e/harness"
)

// contract are the alert names, per chart and rule group, that the
// dashboards' e2e test, docs/metrics.md and operators' routing rely on: a
// rename or a missing alert fails TestAlertNames.
var contract = map[string]struct {
	group  string
	alerts []string
}{
	"konnector": {"kbind-konnector", []string{"KbindKonnectorDown", "KbindConnectionNotReady", "KbindHeartbeatStale",
		"KbindCredentialRenewalFailing", "KbindCredentialsExpiring", "KbindSyncFailures", "KbindConflicts",
		"KbindProviderEventsDropped", "KbindSyncerNotReady"}},
	"backend": {"kbind-backend", []string{"KbindBackendDown", "KbindConsumerStale", "KbindReapFailing"}},
}

// The releases the charts are rendered as (namespace kbind): the rules'
// default job is then konnector-metrics and backend-metrics, the names the
// unit tests' up series carry.
var releases = map[string]string{"konnector": "konnector", "backend": "backend"}

// ruleGroups are the spec.groups of a rendered PrometheusRule.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// renderRules renders the chart with its default values and
// metrics.prometheusRule.enabled, as `helm template` does, and returns the
// PrometheusRule's spec: a Prometheus rule file.
func renderRules(t *testing.T, chartName string) []byte {
	t.Helper()
	rule := renderPrometheusRule(t, chartName, map[string]any{"enabled": true}, true)
	if rule == nil {
		t.Fatalf("the %s chart renders no PrometheusRule with metrics.prometheusRule.enabled", chartName)
	}
	spec, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// renderPrometheusRule renders the chart with metrics.enabled and the given
// metrics.prometheusRule values and returns its PrometheusRule, nil when
// it renders none.
func renderPrometheusRule(t *testing.T, chartName string, prometheusRule map[string]any, metrics bool) *unstructured.Unstructured {
	t.Helper()
	chrt, err := loader.Load("../../charts/" + chartName)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"metrics": map[string]any{"enabled": metrics, "prometheusRule": prometheusRule}}
	if chartName == "konnector" {
		values["rbac"] = map[string]any{"boundResourceGroups": []any{"example.org"}}
	}
	rel, err := harness.RenderChart(chrt, releases[chartName], "kbind", values)
	if err != nil {
		t.Fatalf("render %s: %v", chartName, err)
	}
	objs, err := harness.ManifestObjects(rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var rule *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		if rule != nil {
			t.Fatalf("the %s chart renders more than one PrometheusRule", chartName)
		}
		rule = o
	}
	return rule
}

// TestPrometheusRuleValues: the rules are off by default and with metrics
// off; job, labels, `for`, severity, thresholds and windows are the values'.
func TestPrometheusRuleValues(t *testing.T) {
	t.Parallel() // pure: no cluster, writes only to t.TempDir
	for chartName := range contract {
		if renderPrometheusRule(t, chartName, map[string]any{}, true) != nil {
			t.Errorf("%s: a PrometheusRule by default", chartName)
		}
		if renderPrometheusRule(t, chartName, map[string]any{"enabled": true}, false) != nil {
			t.Errorf("%s: a PrometheusRule with metrics.enabled false", chartName)
		}
	}
	for _, tc := range []struct {
		chart  string
		alerts map[string]any
		want   map[string]string // alert: a part of its rendered rule
	}{
		{"konnector", map[string]any{
			"KbindHeartbeatStale":           map[string]any{"for": "0s", "severity": "page", "seconds": 5},
			"KbindCredentialRenewalFailing": map[string]any{"window": "40s"},
			"KbindSyncFailures":             map[string]any{"window": "30s"},
			"KbindProviderEventsDropped":    map[string]any{"window": "20s"},
		}, map[string]string{
			"KbindKonnectorDown":            `up{job="kbind-konnector"} == 0 or absent(up{job="kbind-konnector"})`,
			"KbindHeartbeatStale":           `kbind_heartbeat_age_seconds > 5 for=0s severity=page`,
			"KbindCredentialRenewalFailing": `[40s]`,
			"KbindSyncFailures":             `[30s]`,
			"KbindProviderEventsDropped":    `[20s]`,
		}},
		{"backend", map[string]any{
			"KbindConsumerStale": map[string]any{"for": "1s", "seconds": 2.5},
			"KbindReapFailing":   map[string]any{"window": "20s"},
		}, map[string]string{
			"KbindBackendDown":   `up{job="kbind-backend"} == 0 or absent(up{job="kbind-backend"})`,
			"KbindConsumerStale": `kbind_backend_consumer_renewal_age_seconds > 2.5 for=1s severity=warning`,
			"KbindReapFailing":   `[20s]`,
		}},
	} {
		rule := renderPrometheusRule(t, tc.chart, map[string]any{"enabled": true, "job": "kbind-" + tc.chart,
			"labels": map[string]any{"release": "prometheus"}, "alerts": tc.alerts}, true)
		if rule == nil {
			t.Fatalf("%s: no PrometheusRule", tc.chart)
		}
		if rule.GetLabels()["release"] != "prometheus" || rule.GetLabels()["app.kubernetes.io/instance"] != releases[tc.chart] {
			t.Errorf("%s: labels %v", tc.chart, rule.GetLabels())
		}
		spec, err := yaml.Marshal(rule.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		rendered := map[string]string{}
		for _, g := range parseRules(t, spec).Groups {
			for _, r := range g.Rules {
				rendered[r.Alert] = fmt.Sprintf("%s for=%s severity=%s", r.Expr, r.For, r.Labels["severity"])
			}
		}
		for alert, part := range tc.want {
			if !strings.Contains(rendered[alert], part) {
				t.Errorf("%s: %s is %q, want it to contain %q", tc.chart, alert, rendered[alert], part)
			}
		}
	}
}

func parseRules(t *testing.T, spec []byte) ruleGroups {
	t.Helper()
	var g ruleGroups
	if err := yaml.UnmarshalStrict(spec, &g); err != nil {
		t.Fatalf("the PrometheusRule's spec is not a rule file: %v\n%s", err, spec)
	}
	return g
}

// promtool is $KBIND_PROMTOOL, else the promtool tools/prometheus/build.sh
// builds once (the Makefile passes it; a plain go test builds it the first
// time).
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KBIND_PROMTOOL"); p != "" {
		return p
	}
	out, err := exec.Command("../../tools/prometheus/build.sh").Output()
	if err != nil {
		t.Fatalf("tools/prometheus/build.sh: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "promtool")
}

// TestAlertRules renders each chart's PrometheusRule into a rule file, has
// promtool check it, and runs the chart's unit tests
// (testdata/<chart>.rules_test.yaml) against it: for every alert a series
// that fires it, at the time its `for` allows, with its labels and
// annotations, and a healthy one that stays silent. The unit-test files
// name the rule file <chart>.rules.yaml, written next to a copy of them.
func TestAlertRules(t *testing.T) {
	t.Parallel() // pure: no cluster, writes only to t.TempDir
	tool := promtool(t)
	for chartName := range contract {
		t.Run(chartName, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			rules := filepath.Join(dir, chartName+".rules.yaml")
			if err := os.WriteFile(rules, renderRules(t, chartName), 0o600); err != nil {
				t.Fatal(err)
			}
			tests, err := os.ReadFile(filepath.Join("testdata", chartName+".rules_test.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			testFile := filepath.Join(dir, chartName+".rules_test.yaml")
			if err := os.WriteFile(testFile, tests, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", testFile}} {
				out, err := exec.Command(tool, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("promtool %s %s: %v\n%s", args[0], args[1], err, out)
				}
				t.Logf("promtool %s %s:\n%s", args[0], args[1], out)
			}
		})
	}
}

// TestAlertNames: each chart's rules are exactly the contract's alerts in
// its group, each with a severity and the three annotations; and each
// alert's unit tests hold at least one case where it fires and one where
// it stays silent.
func TestAlertNames(t *testing.T) {
	t.Parallel() // pure: no cluster, writes only to t.TempDir
	for chartName, want := range contract {
		t.Run(chartName, func(t *testing.T) {
			g := parseRules(t, renderRules(t, chartName))
			var got []string
			for _, group := range g.Groups {
				if group.Name != want.group {
					t.Errorf("rule group %q, want %q", group.Name, want.group)
				}
				for _, r := range group.Rules {
					got = append(got, r.Alert)
					if r.Labels["severity"] == "" {
						t.Errorf("%s has no severity", r.Alert)
					}
					for _, a := range []string{"summary", "description", "runbook_url"} {
						if r.Annotations[a] == "" {
							t.Errorf("%s has no %s", r.Alert, a)
						}
					}
				}
			}
			if !slices.Equal(sorted(got), sorted(want.alerts)) {
				t.Errorf("the %s chart's alerts are %v, the contract's %v", chartName, got, want.alerts)
			}

			data, err := os.ReadFile(filepath.Join("testdata", chartName+".rules_test.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var unit struct {
				Tests []struct {
					AlertRuleTests []struct {
						Alertname string `json:"alertname"`
						ExpAlerts []any  `json:"exp_alerts"`
					} `json:"alert_rule_test"`
				} `json:"tests"`
			}
			if err := yaml.Unmarshal(data, &unit); err != nil {
				t.Fatal(err)
			}
			fires, silent := map[string]bool{}, map[string]bool{}
			for _, tc := range unit.Tests {
				for _, a := range tc.AlertRuleTests {
					if len(a.ExpAlerts) > 0 {
						fires[a.Alertname] = true
					} else {
						silent[a.Alertname] = true
					}
				}
			}
			for _, name := range want.alerts {
				if !fires[name] || !silent[name] {
					t.Errorf("%s: testdata/%s.rules_test.yaml must test it firing (%v) and silent (%v)", name, chartName, fires[name], silent[name])
				}
			}
		})
	}
}

// TestAlertRunbooks: every runbook_url is the default runbookBaseURL and
// an anchor a heading of docs/troubleshooting.md produces on GitHub.
func TestAlertRunbooks(t *testing.T) {
	t.Parallel() // pure: no cluster, writes only to t.TempDir
	anchors := headingAnchors(t, "../../docs/troubleshooting.md")
	const base = "https://github.com/kbind/kbind/blob/main/docs/troubleshooting.md#"
	for chartName := range contract {
		for _, group := range parseRules(t, renderRules(t, chartName)).Groups {
			for _, r := range group.Rules {
				url := r.Annotations["runbook_url"]
				anchor, ok := strings.CutPrefix(url, base)
				switch {
				case !ok:
					t.Errorf("%s: runbook_url %q is not %s<anchor>", r.Alert, url, base)
				case !anchors[anchor]:
					t.Errorf("%s: docs/troubleshooting.md has no heading with anchor #%s (%s)", r.Alert, anchor, url)
				}
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives the Markdown headings of a
// file: lower case, punctuation dropped (letters, digits, spaces, - and _
// kept), spaces to -, and -1, -2 … appended to repeats. Headings in code
// blocks do not count.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	anchors, seen := map[string]bool{}, map[string]int{}
	heading := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		slug := githubSlug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors
}

func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestGithubSlug(t *testing.T) {
	t.Parallel() // pure: no cluster, writes only to t.TempDir
	for heading, want := range map[string]string{
		"Start here: `kubectl kbind doctor`":                      "start-here-kubectl-kbind-doctor",
		"An API is missing, or the binding says `APINotExported`": "an-api-is-missing-or-the-binding-says-apinotexported",
		"The Connection is not Ready":                             "the-connection-is-not-ready",
		"KbindReapFailing":                                        "kbindreapfailing",
		"Keep_under score & 2 spaces":                             "keep_under-score--2-spaces",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
