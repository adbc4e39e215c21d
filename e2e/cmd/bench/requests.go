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

package main

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// requestCounts are the konnector's client requests so far, by API server
// host and HTTP method: client-go's rest_client_requests_total, read from
// the konnector's own metrics endpoint (so the bench sees every request the
// konnector makes — reads, writes, discovery, watch starts — without an
// audit log slowing the API servers).
type requestCounts map[string]float64 // "host METHOD" -> count

func scrapeRequests(metricsAddr string) (requestCounts, error) {
	out := requestCounts{}
	err := scrapeMetrics(metricsAddr, func(line string) error {
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			return nil
		}
		end := strings.LastIndex(line, "}")
		labels, value := line[len("rest_client_requests_total{"):end], strings.TrimSpace(line[end+1:])
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("parsing %q: %w", line, err)
		}
		var host, method string
		for _, kv := range strings.Split(labels, ",") {
			k, val, _ := strings.Cut(kv, "=")
			val = strings.Trim(val, `"`)
			switch k {
			case "host":
				host = val
			case "method":
				method = val
			}
		}
		out[host+" "+method] += v
		return nil
	})
	return out, err
}

// scrapeMetrics reads the konnector's metrics endpoint and calls fn with
// each line; an error from fn ends the read.
func scrapeMetrics(metricsAddr string, fn func(line string) error) error {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return fmt.Errorf("reading the konnector's metrics: %w", err)
	}
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		if err := fn(scanner.Text()); err != nil {
			return err
		}
	}
	return scanner.Err()
}

// since is the difference c - before.
func (c requestCounts) since(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// of sums the counts to host (as in a rest.Config's Host URL), all methods
// or only writes.
func (c requestCounts) of(hostURL string, writesOnly bool) float64 {
	host := hostURL
	if u, err := url.Parse(hostURL); err == nil && u.Host != "" {
		host = u.Host
	}
	sum := 0.0
	for k, v := range c {
		h, method, _ := strings.Cut(k, " ")
		if h != host || (writesOnly && (method == "GET" || method == "HEAD")) {
			continue
		}
		sum += v
	}
	return sum
}

// String lists the counts, e.g. "127.0.0.1:4431 GET 10".
func (c requestCounts) String() string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, c[k]))
	}
	return strings.Join(parts, ", ")
}
