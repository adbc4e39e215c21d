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

// Package backend wires kbind's optional provider-side backend: the
// liveness controller that judges heartbeat Leases (BE-1, BE-2) and,
// when enabled, the reaper that deletes what stale consumers left behind
// (BE-3). The binary (cmd/backend) turns configuration into Options; the
// integration tests run the same wiring in-process.
//
// Requirement ids in comments (such as BE-3) refer to docs/requirements.md.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend/liveness"
	"github.com/kbind/kbind/backend/reaper"
)

// EventSource is the reporting component of the backend's Events.
const EventSource = "kbind-backend"

// Options configure the backend.
type Options struct {
	// StaleAfter is the stale window (BE-1).
	StaleAfter time.Duration
	// Reap enables the reaper; off means report only.
	Reap bool
	// ReapInterval is how soon an unfinished reaping is looked at again.
	ReapInterval time.Duration
	// ReapGrace is how long the reaper's mark on a stale consumer's copy
	// or related copy must survive (no live konnector cleared it) before
	// it is deleted; reaper.DefaultGrace when zero.
	ReapGrace time.Duration
	// Clock is the backend's own clock; the real one when nil.
	Clock clock.Clock
}

// AddToScheme registers the kinds the backend reads.
func AddToScheme(s *runtime.Scheme) error {
	if err := coordinationv1.AddToScheme(s); err != nil {
		return err
	}
	return corev1.AddToScheme(s)
}

// leaseSelector selects kbind's heartbeat Leases.
func leaseSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue})
}

// ConfigureCache restricts the manager's cache to what the backend watches:
// Leases labelled core.kbind.io/managed=true, without managedFields.
func ConfigureCache(opts *cache.Options) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&coordinationv1.Lease{}] = cache.ByObject{Label: leaseSelector()}
	opts.DefaultTransform = cache.TransformStripManagedFields()
}

// Setup adds the liveness controller (and the reaper when enabled) to mgr,
// whose cache must be configured with ConfigureCache.
func Setup(mgr ctrl.Manager, opts Options) (*liveness.Controller, error) {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &liveness.Controller{
		Client:       mgr.GetClient(),
		Tracker:      liveness.NewTracker(clk, opts.StaleAfter),
		Clock:        clk,
		Events:       mgr.GetEventRecorder(EventSource),
		ReapInterval: opts.ReapInterval,
	}
	if opts.Reap {
		r, err := NewReaper(mgr.GetConfig())
		if err != nil {
			return nil, err
		}
		r.Events = mgr.GetEventRecorder(EventSource)
		r.Grace, r.Clock = opts.ReapGrace, clk
		r.Judge = c
		c.Reaper = r
	}
	if err := c.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the liveness controller: %w", err)
	}
	return c, nil
}

// NewReaper returns a reaper talking to the cluster of cfg.
func NewReaper(cfg *rest.Config) (*reaper.Reaper, error) {
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the metadata client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	cc, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Lease client: %w", err)
	}
	return &reaper.Reaper{Metadata: md, Leases: cc.Leases(""), Discovery: dc}, nil
}

// DryRun watches the heartbeat Leases for the stale window on its own
// clock, then writes one line per object that reaping would delete to out
// ("would delete <resource.group> [<namespace>/]<name> (consumer <uid>)") and
// returns. It writes nothing to the cluster: no annotation, no Event.
func DryRun(ctx context.Context, cfg *rest.Config, opts Options, out io.Writer) error {
	logger := log.FromContext(ctx)
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	tracker := liveness.NewTracker(clk, opts.StaleAfter)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leases, err := watchLeases(cctx, cfg, tracker)
	if err != nil {
		return err
	}
	logger.Info("Dry run: watching heartbeat Leases for the stale window before judging them (nothing will be changed)", "staleAfter", opts.StaleAfter.String())
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clk.After(opts.StaleAfter):
	}

	var list coordinationv1.LeaseList
	if err := leases.List(ctx, &list); err != nil {
		return fmt.Errorf("listing Leases: %w", err)
	}
	byConsumer, takenOver := dryRunStates(ctx, list.Items, tracker)
	uids := make([]string, 0, len(byConsumer))
	for uid := range byConsumer {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	r, err := NewReaper(cfg)
	if err != nil {
		return err
	}
	stale := 0
	for _, uid := range uids {
		if liveness.Live(byConsumer[uid]) {
			logger.Info("Consumer is live; nothing to reap", "consumerClusterUID", uid)
			continue
		}
		stale++
		if n := takenOver[uid]; n > 0 {
			logger.Info("Would not reap the consumer: another of its Leases is taken over", "consumerClusterUID", uid, "takenOver", n)
			continue
		}
		if err := dryRunConsumer(ctx, r, uid, out); err != nil {
			return err
		}
	}
	logger.Info("Dry run done", "consumers", len(uids), "stale", stale)
	return nil
}

// watchLeases starts a cache of the heartbeat Leases, until ctx ends, that
// shows tracker every renewal, and waits for it to sync.
func watchLeases(ctx context.Context, cfg *rest.Config, tracker *liveness.Tracker) (cache.Cache, error) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return nil, err
	}
	cacheOpts := cache.Options{Scheme: scheme}
	ConfigureCache(&cacheOpts)
	leases, err := cache.New(cfg, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the Lease cache: %w", err)
	}
	inf, err := leases.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return nil, fmt.Errorf("watching Leases: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observeLease(tracker, obj) },
		UpdateFunc: func(_, obj any) { observeLease(tracker, obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = leases.Start(ctx) }()
	if !leases.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Lease cache did not sync")
	}
	return leases, nil
}

// observeLease shows tracker the renewTime of obj when it is a Lease.
func observeLease(tracker *liveness.Tracker, obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	renew := ""
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.UTC().String()
	}
	tracker.Observe(l.Namespace+"/"+l.Name, renew)
}

// dryRunStates attributes each Lease to its consumer cluster and returns
// the liveness states of each consumer's Leases and, per consumer, how
// many of its Leases are taken over (logged, and not counted); a Lease
// that names no consumer is logged and ignored.
func dryRunStates(ctx context.Context, leases []coordinationv1.Lease, tracker *liveness.Tracker) (byConsumer map[string][]liveness.State, takenOver map[string]int) {
	logger := log.FromContext(ctx)
	byConsumer, takenOver = map[string][]liveness.State{}, map[string]int{}
	for i := range leases {
		l := &leases[i]
		uid, err := liveness.Attribute(l.Labels, l.Annotations, l.Spec.HolderIdentity)
		var taken *liveness.TakenOver
		switch {
		case errors.As(err, &taken):
			logger.Info("Heartbeat Lease taken over: its holder is not the consumer cluster its markers name; it does not count for that consumer, which is not reaped while it lasts",
				"namespace", l.Namespace, "name", l.Name, "consumerClusterUID", taken.Consumer, "holder", taken.Holder)
			takenOver[taken.Consumer]++
			continue
		case err != nil:
			logger.Info("Ignoring a managed Lease that names no consumer cluster", "namespace", l.Namespace, "name", l.Name, "problem", err.Error())
			continue
		}
		observeLease(tracker, l)
		byConsumer[uid] = append(byConsumer[uid], tracker.State(l.Namespace+"/"+l.Name))
	}
	return byConsumer, takenOver
}

// dryRunConsumer plans reaping the stale consumer uid and writes what it
// would delete to out; what it would keep, and what it could not read, is
// logged.
func dryRunConsumer(ctx context.Context, r *reaper.Reaper, uid string, out io.Writer) error {
	logger := log.FromContext(ctx)
	plan, err := r.Plan(ctx, uid)
	if err != nil {
		return fmt.Errorf("planning consumer %s: %w", uid, err)
	}
	for _, o := range plan.Objects() {
		fmt.Fprintf(out, "would delete %s (consumer %s)\n", o, uid)
	}
	kept := make([]string, 0, len(plan.Kept))
	for ns := range plan.Kept {
		kept = append(kept, ns)
	}
	sort.Strings(kept)
	for _, ns := range kept {
		logger.Info("Would keep a namespace created for the consumer", "consumerClusterUID", uid, "namespace", ns, "reason", plan.Kept[ns].Reason)
	}
	if len(plan.Undiscovered) > 0 {
		logger.Info("Some API groups could not be discovered; their objects are not in the list", "consumerClusterUID", uid, "groupVersions", plan.Undiscovered)
	}
	if len(plan.Unlisted) > 0 {
		logger.Info("Could not list some resources; their objects are not in the list", "consumerClusterUID", uid, "resources", plan.Unlisted)
	}
	if plan.LeasesKept != "" {
		logger.Info("Would keep the consumer's Leases: reaping cannot finish yet", "consumerClusterUID", uid, "reason", plan.LeasesKept)
	}
	return nil
}
