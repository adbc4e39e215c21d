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
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kbind/kbind/e2e/scale"
)

// consumersOptions are the flags of the provider-scale mode (--consumers).
type consumersOptions struct {
	sizes      string
	perCluster int
	objects    int
	idle       time.Duration
	herdDown   time.Duration
	konnector  string
	plugin     string
	fsync      bool
	keep       string
	jsonOut    string
	// profiles, when set, receives the CPU profile and heap of the first
	// konnector over each idle window.
	profiles string
	// schemaKiB pads each exported CRD's schema (scale.Options.SchemaKiB).
	schemaKiB int
}

// runConsumers connects consumers to one provider in steps (each size of
// --consumers), measures the provider's cost per idle consumer at each,
// then restarts the provider API server with the largest number connected
// (--herd-down > 0) and measures the recovery.
func runConsumers(o consumersOptions) error {
	ctx := context.Background()
	dir, err := o.keep, os.MkdirAll(o.keep, 0o755)
	if o.keep == "" {
		dir, err = os.MkdirTemp("", "kbind-bench-consumers-")
		defer func() { _ = os.RemoveAll(dir) }()
	}
	if err != nil {
		return err
	}
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return err
		}
	}
	var sizes []int
	for _, s := range strings.Split(o.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return fmt.Errorf("bad --consumers %q: increasing numbers, at least 1", o.sizes)
		}
		sizes = append(sizes, n)
	}
	opts := scale.Options{Dir: dir, PerCluster: o.perCluster, Objects: o.objects, Konnector: o.konnector, Plugin: o.plugin, SchemaKiB: o.schemaKiB,
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }}
	if !o.fsync {
		opts.EtcdArgs = map[string][]string{"unsafe-no-fsync": {"true"}}
	}
	env, err := scale.Start(opts)
	if err != nil {
		return err
	}
	defer env.Stop()
	base, err := env.Base(ctx, o.idle)
	if err != nil {
		return err
	}
	var rows []scale.Row
	for _, n := range sizes {
		start := time.Now()
		if err := env.Grow(ctx, n); err != nil {
			return fmt.Errorf("connecting %d consumers: %w", n, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %d consumers connected and synced (%.0f s); idle window %s\n", n, time.Since(start).Seconds(), o.idle)
		stopProfile := cpuProfile(env.Pprof(), o.profiles, fmt.Sprintf("consumers-n%d", n), min(o.idle, 30*time.Second))
		r, err := env.Measure(ctx, base, o.idle)
		stopProfile()
		if err != nil {
			return err
		}
		if o.profiles != "" {
			if err := heapProfile(env.Pprof(), o.profiles, fmt.Sprintf("consumers-n%d", n)); err != nil {
				fmt.Fprintf(os.Stderr, "bench: heap profile: %v\n", err)
			}
		}
		rows = append(rows, r)
		// Each row as soon as it is measured: the largest N takes long.
		data, _ := json.Marshal(r)
		fmt.Fprintf(os.Stderr, "bench: row %s\n", data)
	}
	var herd *scale.Herd
	if o.herdDown > 0 {
		h, err := env.RestartHerd(ctx, o.herdDown, 15*time.Minute)
		if err != nil {
			return err
		}
		herd = &h
	}
	printConsumers(rows, herd, base, o)
	if o.jsonOut != "" {
		data, _ := json.MarshalIndent(map[string]any{"consumers": rows, "herd": herd, "baseline": base}, "", "  ")
		return os.WriteFile(o.jsonOut, data, 0o644)
	}
	return nil
}

func printConsumers(rows []scale.Row, herd *scale.Herd, base scale.Baseline, o consumersOptions) {
	fmt.Printf("\nOne provider, many consumers: Namespace isolation, one API and %d objects each, %d consumers per consumer cluster (one konnector each), idle window %s, etcd fsync %v, exported schemas padded to %d KiB\n",
		o.objects, o.perCluster, o.idle, o.fsync, o.schemaKiB)
	fmt.Printf("provider before any consumer: API server %.0f MiB RSS, %.0f millicores idle; etcd %.0f keys, %.1f MiB\n",
		base.APIServerRSS, base.APIServerCPURate*1000, base.EtcdKeys, base.EtcdBytes/(1<<20))
	fmt.Println("per consumer, beyond that:")
	fmt.Printf("%6s %8s %8s %11s %11s %10s %9s %9s %9s %9s %8s | %8s %9s %9s %8s\n",
		"N", "clusters", "watches", "kon req/m", "api req/m", "events/m", "api mCPU", "api KiB", "etcd mCPU", "etcd keys", "etcd KiB",
		"watches", "api MiB", "api mCPU", "etcd MiB")
	for _, r := range rows {
		fmt.Printf("%6d %8d %8.2f %11.2f %11.2f %10.2f %9.2f %9.0f %9.2f %9.1f %8.1f | %8.0f %9.0f %9.0f %8.1f\n",
			r.Consumers, r.Clusters, r.Watches, r.KonnectorRequestsMin, r.APIServerRequestsMin, r.WatchEventsMin,
			r.APIServerMilliCPU, r.APIServerKiB, r.EtcdMilliCPU, r.EtcdKeys, r.EtcdKiB,
			r.TotalWatches, r.TotalAPIServerRSSMiB, r.TotalAPIServerMilliCPU, r.TotalEtcdMiB)
	}
	if herd != nil {
		fmt.Printf("\nprovider API server restart with %d consumers: down %.0f s (up to %d Connections not Ready); every Connection Ready and every change made meanwhile synced %.1f s after it served again; %.0f requests (%.0f LIST, %.0f WATCH), peak %.0f/s, mean %.0f/s, %.0f answered 429\n",
			herd.Consumers, herd.DownS, herd.NotReady, herd.RecoveredS, herd.Requests, herd.Lists, herd.WatchStarts, herd.PeakRPS, herd.MeanRPS, herd.Throttled)
		fmt.Println("requests by verb, resource and code (the exported APIs as one; the bench's own LISTs included):")
		printByCount(herd.ByRequest)
		fmt.Printf("watch events sent meanwhile, %.0f, by resource:\n", herd.WatchEvents)
		printByCount(herd.EventsByResource)
		fmt.Println("KiB sent meanwhile, by watch events and responses (lists, gets) and resource:")
		kib := map[string]float64{}
		for k, v := range herd.SentBytes {
			kib[k] = v / 1024
		}
		printByCount(kib)
	}
}

// printByCount prints counts, largest first.
func printByCount(counts map[string]float64) {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b)) })
	for _, k := range keys {
		fmt.Printf("  %6.0f %s\n", counts[k], k)
	}
}
