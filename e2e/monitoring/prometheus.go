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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// Scrape jobs of the test's Prometheus: the rules are rendered with these
// as metrics.prometheusRule.job.
const (
	konnectorJob = "kbind-konnector"
	backendJob   = "kbind-backend"
)

// PrometheusDir builds (once, cached) the pinned Prometheus and promtool
// with tools/prometheus/build.sh and returns the directory holding both.
func PrometheusDir(t testing.TB) string {
	t.Helper()
	script, err := filepath.Abs("../../tools/prometheus/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// PrometheusConfig is a configuration that scrapes the konnector and the
// backend every second as static targets, evaluates every second and
// loads ruleFiles.
func PrometheusConfig(konnectorAddr, backendAddr string, ruleFiles ...string) string {
	cfg := map[string]any{
		"global": map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{
			map[string]any{"job_name": konnectorJob, "static_configs": []any{map[string]any{"targets": []any{konnectorAddr}}}},
			map[string]any{"job_name": backendJob, "static_configs": []any{map[string]any{"targets": []any{backendAddr}}}},
		},
	}
	if len(ruleFiles) > 0 {
		cfg["rule_files"] = ruleFiles
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return string(out)
}

// Prometheus is a Prometheus server run as a process for one test.
type Prometheus struct {
	URL string
	log *enginetest.SyncBuffer
}

// StartPrometheus runs the prometheus binary of dir with config, its TSDB
// in a temporary directory, and waits until /-/ready answers. It is stopped
// when the test ends (its log printed if the test failed).
func StartPrometheus(t *testing.T, dir, config string) *Prometheus {
	t.Helper()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := harness.FreeAddr(t)
	p := &Prometheus{URL: "http://" + addr, log: &enginetest.SyncBuffer{}}
	cmd := exec.Command(filepath.Join(dir, "prometheus"), "--config.file", file, "--storage.tsdb.path", filepath.Join(tmp, "data"),
		"--web.listen-address", addr, "--log.level", "warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.log.String())
		}
	})
	enginetest.EventuallyWithin(t, 60*time.Second, "Prometheus /-/ready", func() error {
		select {
		case <-done:
			return fmt.Errorf("prometheus exited: %v\n%s", cmd.ProcessState, p.log.String())
		default:
		}
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return p
}

// Series is one series of a query result: its labels and its samples'
// values (one for an instant query).
type Series struct {
	Labels map[string]string
	Values []float64
}

// RealValues counts the values that are numbers (not NaN, not ±Inf).
func (s Series) RealValues() int {
	n := 0
	for _, v := range s.Values {
		if v == v && v < 1e308 && v > -1e308 {
			n++
		}
	}
	return n
}

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// Query evaluates expr now (/api/v1/query).
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Series, error) {
	return p.get(ctx, "/api/v1/query", url.Values{"query": {expr}})
}

// QueryRange evaluates expr from start to end every step
// (/api/v1/query_range), as a Grafana panel does.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	return p.get(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

func (p *Prometheus) get(ctx context.Context, path string, params url.Values) ([]Series, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s %s: %s: %s", path, params.Get("query"), resp.Status, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s %s: %s: %s", path, params.Get("query"), r.ErrorType, r.Error)
	}
	var out []Series
	for _, res := range r.Data.Result {
		s := Series{Labels: res.Metric}
		samples := res.Values
		if res.Value != nil {
			samples = [][]any{res.Value}
		}
		for _, sample := range samples {
			if len(sample) != 2 {
				continue
			}
			str, _ := sample[1].(string)
			v, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("%s %s: sample %v: %w", path, params.Get("query"), sample, err)
			}
			s.Values = append(s.Values, v)
		}
		out = append(out, s)
	}
	return out, nil
}

// Firing are the names of the alerts firing now, sorted.
func (p *Prometheus) Firing(ctx context.Context) ([]string, error) {
	series, err := p.Query(ctx, `ALERTS{alertstate="firing"}`)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range series {
		if name := s.Labels["alertname"]; !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// RulesFile renders the PrometheusRule of charts/<chart> with values (its
// metrics.prometheusRule on) and writes its rule groups as a Prometheus rule
// file in dir; it returns the file's path and the names of its alerts.
func RulesFile(t *testing.T, chart, dir string, values map[string]any) (string, []string) {
	t.Helper()
	chrt, err := loader.Load("../../charts/" + chart)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := harness.RenderChart(chrt, "kbind", "kbind", values)
	if err != nil {
		t.Fatalf("rendering the %s chart with %v: %v", chart, values, err)
	}
	objs, err := harness.ManifestObjects(rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		spec, _ := o.Object["spec"].(map[string]any)
		groups, _ := spec["groups"].([]any)
		var alerts []string
		for _, g := range groups {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				if name, ok := r.(map[string]any)["alert"].(string); ok {
					alerts = append(alerts, name)
				}
			}
		}
		out, err := yaml.Marshal(map[string]any{"groups": groups})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, chart+"-rules.yaml")
		if err := os.WriteFile(file, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return file, alerts
	}
	t.Fatalf("the %s chart renders no PrometheusRule with %v", chart, values)
	return "", nil
}
