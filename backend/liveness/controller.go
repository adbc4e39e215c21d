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

package liveness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Event reasons on heartbeat Leases.
const (
	ReasonStale   = "HeartbeatStale"
	ReasonRenewed = "HeartbeatRenewed"
	ReasonReaping = "ReapingConsumer"
	// ReasonTakenOver: the Lease's holder is not the consumer its markers
	// name; it counts for no consumer.
	ReasonTakenOver = "HeartbeatTakenOver"
)

// Reaper deletes what a stale consumer left on the provider (BE-3).
// Reap runs one stateless pass for the consumer and reports done once
// nothing of it is left, its Leases included. stillStale is asked between
// deletions; when it returns false the pass stops at once.
type Reaper interface {
	Reap(ctx context.Context, consumerUID string, stillStale func() bool) (done bool, err error)
}

// pacer is a Reaper that says how long a consumer's next pass may wait:
// its copies carry marks that fall due later, and passes before would only
// mark again what a live konnector unmarked.
type pacer interface {
	NextPass(consumerUID string) (time.Duration, bool)
}

// forgetter is a Reaper that reports per consumer while reaping it
// (metrics) and is told when that ends between passes.
type forgetter interface {
	Forget(consumerUID string)
}

// Controller watches heartbeat Leases and judges each consumer cluster (BE-1):
// it marks stale Leases (annotation and Event), clears the mark when they
// renew, exports metrics, and hands a consumer whose every Lease is stale to
// the Reaper (nil: report only). Requests are keyed by consumer cluster UID.
// A Lease held by anyone but the consumer its markers name is taken over
// (Attribute): reported, never counted for that consumer, and while one
// exists the consumer is not reaped.
type Controller struct {
	// Client reads Leases (from the manager's cache) and patches them.
	Client  client.Client
	Tracker *Tracker
	Clock   clock.PassiveClock
	Events  events.EventRecorder
	// Reaper is nil when reaping is off.
	Reaper Reaper
	// ReapInterval is how soon a consumer whose reaping is not finished
	// (finalizers, refused deletions) is looked at again.
	ReapInterval time.Duration

	mu        sync.Mutex
	keys      map[string]map[string]bool // consumer UID → Lease keys tracked
	live      map[string]bool            // consumer UID → verdict, for metrics
	reaping   map[string]bool            // consumer UID → reaping announced (one Event per episode)
	badLogged map[string]string          // Lease key → problem already logged
	takenOver map[string]TakenOver       // Lease key → takeover already reported
	held      map[string]bool            // consumer UID → held reaping logged (once per episode)
	infos     map[string]LeaseInfo       // Lease key → what its konnector says of itself, for metrics
}

// SetupWithManager wires the controller: Lease events (the manager's cache
// must select Leases labelled core.kbind.io/managed=true) map to the
// consumer cluster UID they carry.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	c.init()
	register(c)
	return ctrl.NewControllerManagedBy(mgr).
		Named("liveness").
		WatchesRawSource(source.Kind(mgr.GetCache(), &coordinationv1.Lease{}, c.handler())).
		Complete(c)
}

func (c *Controller) init() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys, c.live, c.badLogged, c.reaping = map[string]map[string]bool{}, map[string]bool{}, map[string]string{}, map[string]bool{}
		c.takenOver, c.held, c.infos = map[string]TakenOver{}, map[string]bool{}, map[string]LeaseInfo{}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = 30 * time.Second
	}
}

func leaseKey(l metav1.Object) string { return l.GetNamespace() + "/" + l.GetName() }

// handler maps a Lease to its consumer. A Lease that carries no consumer UID
// label cannot be attributed: it is logged once and ignored.
func (c *Controller) handler() handler.TypedEventHandler[*coordinationv1.Lease, reconcile.Request] {
	enqueue := func(ctx context.Context, l *coordinationv1.Lease, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		uid := l.Labels[kbindv1alpha1.ConsumerClusterUIDLabel]
		if uid == "" {
			_, err := ConsumerUID(l.Labels, l.Annotations)
			c.logBadOnce(ctx, l, err)
			return
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: uid}})
	}
	return handler.TypedFuncs[*coordinationv1.Lease, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*coordinationv1.Lease], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*coordinationv1.Lease], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if uid := e.ObjectOld.Labels[kbindv1alpha1.ConsumerClusterUIDLabel]; uid != "" && uid != e.ObjectNew.Labels[kbindv1alpha1.ConsumerClusterUIDLabel] {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: uid}})
			}
			enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*coordinationv1.Lease], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			c.Tracker.Forget(leaseKey(e.Object))
			c.forgetBad(leaseKey(e.Object))
			c.forgetTakenOver(leaseKey(e.Object))
			c.forgetInfo(leaseKey(e.Object))
			if uid := e.Object.Labels[kbindv1alpha1.ConsumerClusterUIDLabel]; uid != "" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: uid}})
			}
		},
	}
}

// logBadOnce logs a Lease that cannot be attributed to a consumer, once per
// Lease and problem, so a bad Lease never becomes a hot loop of log lines.
func (c *Controller) logBadOnce(ctx context.Context, l *coordinationv1.Lease, problem error) {
	key := leaseKey(l)
	c.mu.Lock()
	logged := c.badLogged[key] == problem.Error()
	c.badLogged[key] = problem.Error()
	c.mu.Unlock()
	if !logged {
		log.FromContext(ctx).Info("Ignoring a managed Lease that names no consumer cluster", "namespace", l.Namespace, "name", l.Name, "problem", problem.Error())
	}
}

func (c *Controller) forgetBad(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.badLogged, key)
}

// reportTakenOver reports a taken-over Lease — a Warning Event on it and a
// log line naming both holders — once per Lease and holder, so an attacker
// touching it again and again makes no hot loop; the gauge counts it until
// it is gone or held by its consumer again.
func (c *Controller) reportTakenOver(ctx context.Context, l *coordinationv1.Lease, t TakenOver) {
	key := leaseKey(l)
	c.mu.Lock()
	reported := c.takenOver[key] == t
	c.takenOver[key] = t
	c.mu.Unlock()
	if reported {
		return
	}
	log.FromContext(ctx).Info("Heartbeat Lease taken over: its holder is not the consumer cluster its markers name; it does not count for that consumer, which is not reaped while it lasts",
		"namespace", l.Namespace, "name", l.Name, "consumerClusterUID", t.Consumer, "holder", t.Holder)
	c.event(l, corev1.EventTypeWarning, ReasonTakenOver, "Judge",
		"this heartbeat Lease %s; the kbind backend does not count it for that consumer (it never makes it stale, and the consumer is not reaped while it lasts): find out who changed spec.holderIdentity, then delete this Lease (the konnector creates it again)",
		t.Error())
}

func (c *Controller) forgetTakenOver(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.takenOver, key)
}

// leasesOf reads a consumer's attributable Leases from the cache and records
// what their renewTime is now; takenOver counts its Leases held by another
// (reported, not returned).
func (c *Controller) leasesOf(ctx context.Context, uid string) (leases []coordinationv1.Lease, takenOver int, err error) {
	var list coordinationv1.LeaseList
	if err := c.Client.List(ctx, &list, client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{
		kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
		kbindv1alpha1.ConsumerClusterUIDLabel: uid,
	})}); err != nil {
		return nil, 0, fmt.Errorf("listing the Leases of consumer %s: %w", uid, err)
	}
	for i := range list.Items {
		l := &list.Items[i]
		got, err := Attribute(l.Labels, l.Annotations, l.Spec.HolderIdentity)
		var taken *TakenOver
		switch {
		case errors.As(err, &taken) && taken.Consumer == uid:
			c.reportTakenOver(ctx, l, *taken)
			c.forgetInfo(leaseKey(l)) // its holder, not the consumer's konnector, wrote it
			takenOver++
			continue
		case err == nil && got != uid:
			err = fmt.Errorf("belongs to consumer %s", got)
		}
		if err != nil {
			c.logBadOnce(ctx, l, err)
			continue
		}
		c.forgetBad(leaseKey(l))
		c.forgetTakenOver(leaseKey(l))
		c.Tracker.Observe(leaseKey(l), renewTimeOf(l))
		c.setInfo(leaseKey(l), InfoOf(l, uid))
		leases = append(leases, *l)
	}
	sort.Slice(leases, func(i, j int) bool { return leaseKey(&leases[i]) < leaseKey(&leases[j]) })
	return leases, takenOver, nil
}

func renewTimeOf(l *coordinationv1.Lease) string {
	if l.Spec.RenewTime == nil {
		return ""
	}
	return l.Spec.RenewTime.UTC().Format(metav1.RFC3339Micro)
}

// Reconcile judges one consumer cluster.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	uid := req.Name
	logger := log.FromContext(ctx).WithValues("consumerClusterUID", uid)
	ctx = log.IntoContext(ctx, logger)

	leases, takenOver, err := c.leasesOf(ctx, uid)
	if err != nil {
		return reconcile.Result{}, err
	}
	c.track(uid, leases)
	if len(leases) == 0 {
		return reconcile.Result{}, nil
	}

	states := make([]State, len(leases))
	for i := range leases {
		l := &leases[i]
		states[i] = c.Tracker.State(leaseKey(l))
		if err := c.mark(ctx, l, states[i]); err != nil {
			return reconcile.Result{}, err
		}
	}
	live := Live(states)
	c.setVerdict(uid, live)

	if next, ok := NextTransition(states, c.Clock.Now()); ok {
		// Some Lease is still live: look again exactly when it would turn
		// stale. A renewal before then arrives as a watch event.
		return reconcile.Result{RequeueAfter: next}, nil
	}
	if live {
		return reconcile.Result{}, nil
	}
	if takenOver > 0 {
		// A Lease of the consumer that someone else holds proves nothing
		// either way: its Connection may be served by a live konnector
		// that refuses to renew a Lease held by another. Reaping waits
		// until the takeover is resolved (its update requeues).
		if c.holdOnce(uid) {
			logger.Info("Every heartbeat Lease the consumer holds is stale, but another of its Leases is taken over; not reaping while it lasts", "takenOver", takenOver)
		}
		return reconcile.Result{}, nil
	}
	if c.Reaper == nil {
		if c.announceReaping(uid) {
			logger.Info("Every heartbeat Lease of the consumer is stale; reaping is off (report only)")
		}
		return reconcile.Result{}, nil
	}

	if c.announceReaping(uid) {
		logger.Info("Every heartbeat Lease of the consumer is stale; reaping")
		c.event(&leases[0], corev1.EventTypeWarning, ReasonReaping, "Reap", "every heartbeat Lease of consumer cluster %s is stale; marking its copies and related copies (core.kbind.io/reap-marked-at), and deleting what it left on this cluster once every mark survived the grace period (a live konnector clears them)", uid)
	}
	done, err := c.Reaper.Reap(ctx, uid, func() bool { return c.stillStale(ctx, uid) })
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reaping consumer %s: %w", uid, err)
	}
	if !done {
		after := c.ReapInterval
		if p, ok := c.Reaper.(pacer); ok {
			if d, ok := p.NextPass(uid); ok && d > after {
				after = d // a renewal still requeues at once (its watch event)
			}
		}
		logger.V(1).Info("Reaping not finished; looking again later", "after", after.String())
		return reconcile.Result{RequeueAfter: after}, nil
	}
	logger.Info("Reaped stale consumer")
	return reconcile.Result{}, nil
}

// stillStale re-reads the consumer's Leases from the cache (which the watch
// keeps current) between deletions: a renewal, a new Lease or a Lease taken
// over stops reaping.
func (c *Controller) stillStale(ctx context.Context, uid string) bool {
	leases, takenOver, err := c.leasesOf(ctx, uid)
	if takenOver > 0 {
		return false
	}
	if err != nil || len(leases) == 0 {
		return err == nil // all Leases gone is not a renewal; an error is not proof of staleness
	}
	states := make([]State, len(leases))
	for i := range leases {
		states[i] = c.Tracker.State(leaseKey(&leases[i]))
	}
	return !Live(states)
}

// LastRenewal is when the backend last saw a Lease of the consumer renew
// — or first saw it, for a Lease that has not renewed since the backend
// started (its clocks start afresh): the start of the consumer's stale
// episode, on the backend's clock. The reaper counts no mark written
// before it. Now when it tracks none of the consumer's Leases.
func (c *Controller) LastRenewal(uid string) time.Time {
	c.mu.Lock()
	keys := make([]string, 0, len(c.keys[uid]))
	for k := range c.keys[uid] {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	var last time.Time
	for _, k := range keys {
		if s := c.Tracker.State(k); s.Known && s.LastChange.After(last) {
			last = s.LastChange
		}
	}
	if last.IsZero() {
		return c.Clock.Now()
	}
	return last
}

// Unseen reports whether a Lease, as the reaper just read it from the API
// server, shows what the backend has not seen through its cache: a
// renewTime other than the one it last observed (a renewal on its way),
// or a Lease it does not track.
func (c *Controller) Unseen(l *coordinationv1.Lease) bool {
	seen, ok := c.Tracker.Seen(leaseKey(l))
	return !ok || seen != renewTimeOf(l)
}

// mark keeps the stale-since annotation in line with the Lease's state.
func (c *Controller) mark(ctx context.Context, l *coordinationv1.Lease, s State) error {
	current, present := l.Annotations[kbindv1alpha1.StaleSinceAnnotation]
	var value any
	switch StaleSinceAction(current, present, s) {
	case Keep:
		return nil
	case Mark:
		value = StaleSinceValue(s.StaleSince)
	case Clear:
		value = nil // JSON merge patch: null deletes the key
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{kbindv1alpha1.StaleSinceAnnotation: value}}}
	data, err := jsonMarshal(patch)
	if err != nil {
		return err
	}
	if err := c.Client.Patch(ctx, l, client.RawPatch(types.MergePatchType, data)); apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; its delete event requeues the consumer
	} else if err != nil {
		return fmt.Errorf("annotating Lease %s: %w", leaseKey(l), err)
	}
	logger := log.FromContext(ctx).WithValues("namespace", l.Namespace, "name", l.Name)
	if value != nil {
		logger.Info("Heartbeat Lease is stale", "staleSince", value, "lastRenewalSeen", s.LastChange.UTC().Format(time.RFC3339))
		c.event(l, corev1.EventTypeWarning, ReasonStale, "Judge", "no renewal seen since %s (stale after %s on the backend's clock)",
			s.LastChange.UTC().Format(time.RFC3339), s.StaleSince.Sub(s.LastChange))
	} else {
		logger.Info("Heartbeat Lease renewed again")
		c.event(l, corev1.EventTypeNormal, ReasonRenewed, "Judge", "renewal seen again; no longer stale")
	}
	return nil
}

func (c *Controller) event(l *coordinationv1.Lease, typ, reason, action, format string, args ...any) {
	if c.Events == nil {
		return
	}
	c.Events.Eventf(l, nil, typ, reason, action, format, args...)
}

// track remembers which Leases a consumer has, forgetting vanished ones.
func (c *Controller) track(uid string, leases []coordinationv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := map[string]bool{}
	for i := range leases {
		now[leaseKey(&leases[i])] = true
	}
	for k := range c.keys[uid] {
		if !now[k] {
			c.Tracker.Forget(k)
			delete(c.infos, k)
		}
	}
	if len(now) == 0 {
		c.endReapingLocked(uid)
		delete(c.keys, uid)
		delete(c.live, uid)
		delete(c.reaping, uid)
		delete(c.held, uid)
	} else {
		c.keys[uid] = now
	}
	updateConsumerGauge(c.live)
}

// announceReaping reports whether reaping the consumer starts now (as
// opposed to a later pass of the same episode).
func (c *Controller) announceReaping(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.reaping[uid]
	c.reaping[uid] = true
	return first
}

// endReapingLocked tells the Reaper that reaping the consumer ended (it is
// live again or has no Lease left); mu is held.
func (c *Controller) endReapingLocked(uid string) {
	if f, ok := c.Reaper.(forgetter); ok && c.reaping[uid] {
		f.Forget(uid)
	}
}

// holdOnce reports whether reaping the consumer is held for a taken-over
// Lease for the first time in this episode.
func (c *Controller) holdOnce(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.held[uid]
	c.held[uid] = true
	return first
}

func (c *Controller) setVerdict(uid string, live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[uid] = live
	if live {
		c.endReapingLocked(uid)
		delete(c.reaping, uid)
		delete(c.held, uid)
	}
	updateConsumerGauge(c.live)
}

func (c *Controller) setInfo(key string, info LeaseInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.infos[key] = info
}

func (c *Controller) forgetInfo(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.infos, key)
}

// leaseInfos is what the konnector of each attributable Lease says of
// itself.
func (c *Controller) leaseInfos() []LeaseInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LeaseInfo, 0, len(c.infos))
	for _, i := range c.infos {
		out = append(out, i)
	}
	return out
}

// takenOverCounts is, per consumer named by their markers, how many Leases
// are taken over.
func (c *Controller) takenOverCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, t := range c.takenOver {
		out[t.Consumer]++
	}
	return out
}

// renewalAges is, per consumer, the time since the backend last saw any of
// its Leases renew.
func (c *Controller) renewalAges() map[string]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]time.Duration{}
	for uid, keys := range c.keys {
		first := true
		for k := range keys {
			s := c.Tracker.State(k)
			if !s.Known {
				continue
			}
			if first || s.Age < out[uid] {
				out[uid], first = s.Age, false
			}
		}
	}
	return out
}
