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
	"context"
	"fmt"
	"time"
)

// Baseline is the provider before any consumer: a sample and its idle
// rates over a window, which every Row subtracts.
type Baseline struct {
	Sample
	// APIServerCPURate and EtcdCPURate are CPU seconds per second;
	// RequestRate requests per second.
	APIServerCPURate, EtcdCPURate, RequestRate float64
}

// Row is the provider's cost per consumer with Consumers connected and
// idle, over an idle window, beyond the Baseline.
type Row struct {
	Consumers int `json:"consumers"`
	Clusters  int `json:"consumer_clusters"`
	// Per consumer.
	Watches                float64 `json:"watches_per_consumer"`
	KonnectorRequestsMin   float64 `json:"konnector_requests_per_min_per_consumer"`
	APIServerRequestsMin   float64 `json:"apiserver_requests_per_min_per_consumer"`
	WatchEventsMin         float64 `json:"watch_events_per_min_per_consumer"`
	APIServerMilliCPU      float64 `json:"apiserver_millicpu_per_consumer"`
	APIServerKiB           float64 `json:"apiserver_rss_kib_per_consumer"`
	EtcdMilliCPU           float64 `json:"etcd_millicpu_per_consumer"`
	EtcdKeys               float64 `json:"etcd_keys_per_consumer"`
	EtcdKiB                float64 `json:"etcd_kib_per_consumer"`
	TotalWatches           float64 `json:"watches"`
	TotalAPIServerRSSMiB   float64 `json:"apiserver_rss_mib"`
	TotalAPIServerMilliCPU float64 `json:"apiserver_millicpu"`
	TotalEtcdKeys          float64 `json:"etcd_keys"`
	TotalEtcdMiB           float64 `json:"etcd_mib"`
	IdleS                  float64 `json:"idle_s"`
}

// Base samples the provider over an idle window before any consumer
// connects.
func (e *Env) Base(ctx context.Context, idle time.Duration) (Baseline, error) {
	first, last, err := e.window(ctx, idle)
	if err != nil {
		return Baseline{}, err
	}
	secs := last.At.Sub(first.At).Seconds()
	return Baseline{Sample: last,
		APIServerCPURate: (last.APIServerCPU - first.APIServerCPU) / secs,
		EtcdCPURate:      (last.EtcdCPU - first.EtcdCPU) / secs,
		RequestRate:      serverRequests(first, last) / secs,
	}, nil
}

// Measure samples the provider over an idle window with the consumers
// connected now and returns the cost per consumer beyond base.
func (e *Env) Measure(ctx context.Context, base Baseline, idle time.Duration) (Row, error) {
	first, last, err := e.window(ctx, idle)
	if err != nil {
		return Row{}, err
	}
	return row(e.consumers, len(e.clusters), base, first, last), nil
}

// window samples the provider at both ends of an idle window.
func (e *Env) window(ctx context.Context, idle time.Duration) (first, last Sample, err error) {
	if first, err = e.Sample(ctx); err != nil {
		return first, last, err
	}
	if err = sleep(ctx, idle); err != nil {
		return first, last, err
	}
	last, err = e.Sample(ctx)
	return first, last, err
}

// row is the arithmetic of Measure: rates over [first, last], levels at
// last, both beyond base and divided by n.
func row(n, clusters int, base Baseline, first, last Sample) Row {
	secs := last.At.Sub(first.At).Seconds()
	per := func(v float64) float64 { return v / float64(n) }
	apiCPU := (last.APIServerCPU-first.APIServerCPU)/secs - base.APIServerCPURate
	return Row{
		Consumers: n, Clusters: clusters, IdleS: secs,
		Watches:                per(last.Watches - base.Watches),
		KonnectorRequestsMin:   per((last.KonnectorRequests - first.KonnectorRequests) / secs * 60),
		APIServerRequestsMin:   per((serverRequests(first, last)/secs - base.RequestRate) * 60),
		WatchEventsMin:         per((last.WatchEvents - first.WatchEvents) / secs * 60),
		APIServerMilliCPU:      per(apiCPU * 1000),
		APIServerKiB:           per((last.APIServerRSS - base.APIServerRSS) * 1024),
		EtcdMilliCPU:           per(((last.EtcdCPU-first.EtcdCPU)/secs - base.EtcdCPURate) * 1000),
		EtcdKeys:               per(last.EtcdKeys - base.EtcdKeys),
		EtcdKiB:                per((last.EtcdBytes - base.EtcdBytes) / 1024),
		TotalWatches:           last.Watches,
		TotalAPIServerRSSMiB:   last.APIServerRSS,
		TotalAPIServerMilliCPU: (last.APIServerCPU - first.APIServerCPU) / secs * 1000,
		TotalEtcdKeys:          last.EtcdKeys,
		TotalEtcdMiB:           last.EtcdBytes / (1 << 20),
	}
}

// serverRequests are the requests the API server counted between two
// samples, less the bench's own.
func serverRequests(first, last Sample) float64 {
	return (last.Requests - first.Requests) - (last.BenchRequests - first.BenchRequests)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("idle window cut short: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
