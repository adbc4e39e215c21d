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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Herd is a provider API server restart with every consumer connected.
type Herd struct {
	Consumers int     `json:"consumers"`
	DownS     float64 `json:"down_s"`
	// NotReady is the most Connections seen not Ready while the API
	// server was down.
	NotReady int `json:"not_ready_max"`
	// RecoveredS is from the API server serving again until every
	// Connection is Ready and every change made while it was down (as
	// many new objects per consumer as it made at the start) is on the
	// provider.
	RecoveredS float64 `json:"recovered_s"`
	// Requests the API server answered until then, their peak and mean
	// rate per second, and how many were answered 429: the konnectors',
	// the bench's own left out.
	Requests  float64 `json:"requests"`
	PeakRPS   float64 `json:"peak_rps"`
	MeanRPS   float64 `json:"mean_rps"`
	Throttled float64 `json:"throttled"`
	// Lists and WatchStarts are the LIST and WATCH requests among them:
	// lists mean informers listed again rather than resumed their watches.
	Lists       float64 `json:"lists"`
	WatchStarts float64 `json:"watch_starts"`
	// ByRequest breaks the requests down by "<verb> <resource> <code>"
	// (the bench's own LISTs of the exported APIs included), and
	// WatchEvents are the watch events the API server sent until then:
	// informers that resumed their watches are sent the changes only,
	// informers that listed again every object once more.
	ByRequest        map[string]float64 `json:"by_request"`
	WatchEvents      float64            `json:"watch_events"`
	EventsByResource map[string]float64 `json:"watch_events_by_resource"`
	// SentBytes are the bytes the API server sent meanwhile, by "watch
	// <resource>" and "response <resource>" (the bench's own lists
	// included).
	SentBytes map[string]float64 `json:"sent_bytes"`
}

// RestartHerd stops the provider API server for down, creating as many
// objects per consumer meanwhile as each made at the start, starts it
// again and measures the recovery.
func (e *Env) RestartHerd(ctx context.Context, down time.Duration, timeout time.Duration) (Herd, error) {
	h := Herd{Consumers: e.consumers}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	ready, err := e.watchReadiness(watchCtx)
	if err != nil {
		return h, err
	}
	if err := e.Provider.StopComponent(testenv.APIServer); err != nil {
		return h, err
	}
	stopped := time.Now()
	if err := e.createObjects(ctx, 0, e.consumers, "pending"); err != nil {
		return h, err
	}
	// Read at least once: creating the objects may take longer than down.
	for {
		h.NotReady = max(h.NotReady, ready.notReady())
		if time.Since(stopped) >= down {
			break
		}
		if err := sleep(ctx, min(2*time.Second, down-time.Since(stopped))); err != nil {
			return h, err
		}
	}
	h.DownS = time.Since(stopped).Seconds()
	if err := e.Provider.StartComponent(testenv.APIServer); err != nil {
		return h, err
	}
	serving := time.Now()
	benchAtStart := Sample{BenchRequests: float64(e.provider.requests.Load()), BenchLists: float64(e.provider.lists.Load()),
		BenchThrottled: float64(e.provider.throttled.Load())}
	e.opts.Logf("provider API server serving again after %.0f s down; waiting for %d consumers", h.DownS, e.consumers)
	var last Sample
	// At most every 2 s, but for the final one: the provider's metrics are
	// large, and producing and parsing them would load what is measured.
	sample := func(final bool) {
		if !final && !last.At.IsZero() && time.Since(last.At) < 2*time.Second {
			return
		}
		s, err := e.Sample(ctx)
		if err != nil {
			return // not serving metrics yet
		}
		if !last.At.IsZero() {
			h.PeakRPS = max(h.PeakRPS, serverRequests(last, s)/s.At.Sub(last.At).Seconds())
		}
		last = s
	}
	// First every Connection Ready, followed by a watch of each consumer
	// cluster's Connections (no list per poll); then the objects on the
	// provider, one list per exported API and poll, every 2 s: the bench's
	// own load stays small next to what it measures, and its requests are
	// subtracted from it.
	err = poll(ctx, timeout, func() (bool, error) {
		sample(false)
		return ready.notReady() == 0, nil
	})
	if err == nil {
		err = pollEvery(ctx, 2*time.Second, timeout, func() (bool, error) {
			sample(false)
			counts, err := e.providerCounts(ctx)
			if err != nil {
				return false, nil //nolint:nilerr // poll again
			}
			for i := range e.consumers {
				if counts["kbind-"+Consumer(i)] < 2*e.opts.Objects {
					return false, nil
				}
			}
			return true, nil
		})
	}
	h.RecoveredS = time.Since(serving).Seconds()
	if err != nil {
		return h, fmt.Errorf("recovery after the provider API server restart: %w", err)
	}
	sample(true)
	// The restarted API server counts from 0; the bench's own requests
	// since it served are left out.
	h.Requests = last.Requests - (last.BenchRequests - benchAtStart.BenchRequests)
	h.Lists = last.Lists - (last.BenchLists - benchAtStart.BenchLists)
	h.Throttled = last.Throttled - (last.BenchThrottled - benchAtStart.BenchThrottled)
	h.WatchStarts = last.WatchStarts
	h.ByRequest, h.WatchEvents, h.EventsByResource, h.SentBytes = last.ByRequest, last.WatchEvents, last.EventsByResource, last.SentBytes
	h.MeanRPS = h.Requests / last.At.Sub(serving).Seconds()
	return h, nil
}

// readiness follows the Connections of every consumer cluster, keeping of
// each whether it is Ready.
type readiness struct {
	stores []toolscache.Store
}

// watchReadiness starts a watch of the Connections of every consumer
// cluster, until ctx ends, and returns once each has listed them.
func (e *Env) watchReadiness(ctx context.Context) (*readiness, error) {
	r := &readiness{}
	var synced []toolscache.InformerSynced
	for _, c := range e.clusters {
		inf := dynamicinformer.NewFilteredDynamicInformer(c.clients.dyn, kbindv1alpha1.GroupVersion.WithResource("connections"), "", 0, toolscache.Indexers{}, nil).Informer()
		if err := inf.SetTransform(readyOnly); err != nil {
			return nil, err
		}
		go inf.RunWithContext(ctx)
		r.stores = append(r.stores, inf.GetStore())
		synced = append(synced, inf.HasSynced)
	}
	syncCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), synced...) {
		return nil, fmt.Errorf("listing the consumers' Connections: %w", syncCtx.Err())
	}
	return r, nil
}

// readyOnly keeps of a Connection its name and whether it is Ready.
func readyOnly(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	ready := false
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == string(kbindv1alpha1.ConditionReady) && m["status"] == "True" {
			ready = true
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": u.GetName(), "resourceVersion": u.GetResourceVersion()},
		"ready":    ready,
	}}, nil
}

// notReady counts the Connections whose Ready condition is not True.
func (r *readiness) notReady() int {
	n := 0
	for _, s := range r.stores {
		for _, item := range s.List() {
			if u, ok := item.(*unstructured.Unstructured); !ok || u.Object["ready"] != true {
				n++
			}
		}
	}
	return n
}
