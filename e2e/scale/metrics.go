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

package scale

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kbind/kbind/engine/test/testenv"
)

// Sample is what the provider's processes and metrics say at one moment.
type Sample struct {
	At time.Time
	// CPU is seconds of CPU time since the process started; RSS its
	// resident memory in MiB.
	APIServerCPU, APIServerRSS float64
	EtcdCPU, EtcdRSS           float64
	// Watches are the open watches (apiserver_longrunning_requests of
	// verb WATCH).
	Watches float64
	// Requests are apiserver_request_total, Throttled those of them
	// answered 429, Lists those of verb LIST and WatchStarts of verb WATCH.
	Requests, Throttled, Lists, WatchStarts float64
	// ByRequest are apiserver_request_total by "<verb> <resource> <code>",
	// the exported APIs' resources counted as one.
	ByRequest map[string]float64
	// WatchEvents are the watch events sent (apiserver_watch_events_total),
	// APIEvents those of the exported APIs by resource.
	WatchEvents float64
	APIEvents   map[string]float64
	// EventsByResource are the watch events by resource, the exported
	// APIs' counted as one.
	EventsByResource map[string]float64
	// SentBytes are the bytes the API server sent, by "watch <resource>"
	// (apiserver_watch_events_sizes) and "response <resource>"
	// (apiserver_response_sizes: lists and gets), the exported APIs'
	// counted as one.
	SentBytes map[string]float64
	// EtcdKeys are the keys in etcd (etcd_debugging_mvcc_keys_total), and
	// EtcdBytes the bytes its database uses
	// (etcd_mvcc_db_total_size_in_use_in_bytes).
	EtcdKeys, EtcdBytes float64
	// KonnectorRequests are the konnectors' requests to the provider
	// (their rest_client_requests_total for its host), summed.
	KonnectorRequests float64
	// BenchRequests, BenchLists and BenchThrottled are the bench's own
	// requests to the provider so far (this sample's metrics read
	// included), its LISTs and its answers of 429.
	BenchRequests, BenchLists, BenchThrottled float64
}

// Sample reads the provider's processes and metrics, and the konnectors'.
func (e *Env) Sample(ctx context.Context) (Sample, error) {
	s := Sample{At: time.Now(), APIEvents: map[string]float64{}, ByRequest: map[string]float64{}, EventsByResource: map[string]float64{},
		SentBytes: map[string]float64{}}
	var err error
	if s.APIServerCPU, s.APIServerRSS, err = processUsage(e.Provider, testenv.APIServer); err != nil {
		return s, err
	}
	if s.EtcdCPU, s.EtcdRSS, err = processUsage(e.Provider, testenv.Etcd); err != nil {
		return s, err
	}
	raw, err := e.provider.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	s.BenchRequests, s.BenchLists, s.BenchThrottled = float64(e.provider.requests.Load()), float64(e.provider.lists.Load()), float64(e.provider.throttled.Load())
	if err != nil {
		return s, fmt.Errorf("reading the provider API server's metrics: %w", err)
	}
	err = eachSeries(bytes.NewReader(raw), s.addAPIServer)
	if err != nil {
		return s, err
	}
	if err := scrape(ctx, e.Provider.EtcdURL()+"/metrics", func(name string, _ map[string]string, v float64) {
		switch name {
		case "etcd_debugging_mvcc_keys_total":
			s.EtcdKeys += v
		case "etcd_mvcc_db_total_size_in_use_in_bytes":
			s.EtcdBytes += v
		}
	}); err != nil {
		return s, err
	}
	host := e.Provider.Config.Host
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		host = u.Host
	}
	for _, c := range e.clusters {
		if c.konnector == nil {
			continue
		}
		if err := scrape(ctx, "http://"+c.metricsAddr+"/metrics", func(name string, labels map[string]string, v float64) {
			if name == "rest_client_requests_total" && labels["host"] == host {
				s.KonnectorRequests += v
			}
		}); err != nil {
			return s, err
		}
	}
	return s, nil
}

// processUsage reads a control-plane process's CPU seconds (user and
// system) and resident MiB from /proc.
func processUsage(c *testenv.Cluster, comp testenv.Component) (cpu, rssMiB float64, err error) {
	pid, err := c.PID(comp)
	if err != nil {
		return 0, 0, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid ...": utime and stime are the 12th and 13th
	// fields after the command, in clock ticks (100 per second on Linux).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			rssMiB = kb / 1024
		}
	}
	return (utime + stime) / 100, rssMiB, nil
}

func scrape(ctx context.Context, u string, fn func(name string, labels map[string]string, v float64)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading metrics from %s: %w", u, err)
	}
	defer resp.Body.Close()
	return eachSeries(resp.Body, fn)
}

// eachSeries calls fn with every sample of a Prometheus text exposition.
func eachSeries(r io.Reader, fn func(name string, labels map[string]string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		fn(name, labels, value)
	}
	return sc.Err()
}

// parseSample splits `name{k="v",...} value` (no timestamp).
func parseSample(line string) (string, map[string]string, float64, bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	series := line[:sp]
	brace := strings.IndexByte(series, '{')
	if brace < 0 {
		return series, nil, v, true
	}
	labels := map[string]string{}
	rest := strings.TrimSuffix(series[brace+1:], "}")
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
			return "", nil, 0, false
		}
		key := rest[:eq]
		rest = rest[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		labels[key] = val.String()
		rest = strings.TrimPrefix(rest[min(i+1, len(rest)):], ",")
	}
	return series[:brace], labels, v, true
}

// addAPIServer adds one series of the provider API server's metrics.
func (s *Sample) addAPIServer(name string, labels map[string]string, v float64) {
	resource := labels["resource"]
	if labels["group"] == Group {
		resource = "<exported APIs>"
	}
	switch {
	case name == "apiserver_longrunning_requests" && labels["verb"] == "WATCH":
		s.Watches += v
	case name == "apiserver_request_total":
		s.Requests += v
		s.ByRequest[labels["verb"]+" "+resource+" "+labels["code"]] += v
		if labels["code"] == "429" {
			s.Throttled += v
		}
		switch labels["verb"] {
		case "LIST":
			s.Lists += v
		case "WATCH":
			s.WatchStarts += v
		}
	case name == "apiserver_watch_events_sizes_sum":
		s.SentBytes["watch "+resource] += v
	case name == "apiserver_response_sizes_sum":
		s.SentBytes["response "+resource] += v
	case name == "apiserver_watch_events_total":
		s.WatchEvents += v
		s.EventsByResource[resource] += v
		if labels["group"] == Group {
			s.APIEvents[labels["resource"]+labels["kind"]] += v
		}
	}
}
