package scale

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
}

// RestartHerd stops the provider API server for down, creating as many
// objects per consumer meanwhile as each made at the start, starts it
// again and measures the recovery.
func (e *Env) RestartHerd(ctx context.Context, down time.Duration, timeout time.Duration) (Herd, error) {
	h := Herd{Consumers: e.consumers}
	if err := e.Provider.StopComponent(testenv.APIServer); err != nil {
		return h, err
	}
	stopped := time.Now()
	if err := e.createObjects(ctx, 0, e.consumers, "pending"); err != nil {
		return h, err
	}
	for time.Since(stopped) < down {
		if n, err := e.notReady(ctx); err == nil {
			h.NotReady = max(h.NotReady, n)
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
	sample := func() {
		s, err := e.Sample(ctx)
		if err != nil {
			return // not serving metrics yet
		}
		if !last.At.IsZero() {
			h.PeakRPS = max(h.PeakRPS, serverRequests(last, s)/s.At.Sub(last.At).Seconds())
		}
		last = s
	}
	// First every Connection Ready, read on the consumer clusters only;
	// then the objects on the provider, one list per exported API and
	// poll, every 2 s: the bench's own load stays small next to what it
	// measures, and is subtracted from it.
	err := poll(ctx, timeout, func() (bool, error) {
		sample()
		n, err := e.notReady(ctx)
		return err == nil && n == 0, nil
	})
	if err == nil {
		err = pollEvery(ctx, 2*time.Second, timeout, func() (bool, error) {
			sample()
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
	sample()
	// The restarted API server counts from 0; the bench's own requests
	// since it served are left out.
	h.Requests = last.Requests - (last.BenchRequests - benchAtStart.BenchRequests)
	h.Lists = last.Lists - (last.BenchLists - benchAtStart.BenchLists)
	h.Throttled = last.Throttled - (last.BenchThrottled - benchAtStart.BenchThrottled)
	h.WatchStarts = last.WatchStarts
	h.ByRequest, h.WatchEvents, h.EventsByResource = last.ByRequest, last.WatchEvents, last.EventsByResource
	h.MeanRPS = h.Requests / last.At.Sub(serving).Seconds()
	return h, nil
}

// notReady counts the Connections on every consumer cluster whose Ready
// condition is not True.
func (e *Env) notReady(ctx context.Context) (int, error) {
	n := 0
	for _, c := range e.clusters {
		list, err := c.clients.dyn.Resource(kbindv1alpha1.GroupVersion.WithResource("connections")).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, item := range list.Items {
			conn := &kbindv1alpha1.Connection{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, conn); err != nil {
				return 0, err
			}
			if !meta.IsStatusConditionTrue(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)) {
				n++
			}
		}
	}
	return n, nil
}
