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

// Package syncer owns instance sync (SYNC-1..5, SYNC-D): one Syncer
// per (Connection, bound API) copies each consumer object's spec up to the
// provider by server-side apply and its status back down, creates provider
// namespaces, classifies ownership and reports conflicts instead of
// overwriting, repairs drift, and deletes safely behind the
// core.kbind.io/syncer finalizer. It is driven by informers on both sides;
// nothing is written when nothing changed.
//
// Where things live: sync.go runs the sync of one object as named phases;
// up.go (spec up), down.go (status and Events down), conflict.go
// (conflicts), report.go (refusals) and release.go (every deletion and
// finalizer release, and the map of deletion in the whole engine) hold
// what the phases do; registry.go runs the Syncers and drains what
// deleting bindings leave.
//
// Requirement ids in comments (such as SYNC-D) refer to docs/requirements.md.
//
// # Why the Syncer runs its own queue and workers
//
// A Syncer could instead be a controller-runtime controller, built with
// controller.NewTypedUnmanaged and fed by two source.Kind sources, one on
// the consumer manager's cache and one on its provider session's cache,
// for controller-runtime's standard workqueue and reconcile metrics. This
// was evaluated (issue #33) and not adopted, for these reasons:
//
//   - Metric series, bounded today, would grow with every restart. A
//     Syncer restarts on every credential rotation, storage version change
//     and failure; a controller cannot be started twice, so each restart
//     is a new controller, whose name must be unique per (Connection, API,
//     generation): controller-runtime never releases a name, and its
//     per-controller series (controller_runtime_reconcile_* and the
//     queue's workqueue_*, labelled by that name) are never deleted. The
//     queue's metrics could be aggregated through a custom NewQueue, the
//     reconcile metrics cannot. Even without restarts a controller costs
//     89 series per (Connection, API) where the Syncer's queue costs 35:
//     at 100 Connections × 50 APIs about 689,000 series instead of
//     419,000 (docs/metrics.md, "Series count"), plus 89 per Syncer
//     restart, for good.
//   - source.Kind never removes its event handler: once a controller
//     stops, its handlers stay on the shared consumer informer (and their
//     client-go listener goroutines with them) for as long as the cache
//     runs — one more after every restart. A Syncer removes its handlers
//     when it stops.
//   - A side that refuses the list: the Syncer waits for its informers
//     itself, probes each side's access while they do not sync, and fails
//     with an AccessRefused the bindings report (Registry.Refused,
//     kbind_syncer_ready 0, restart backoff 1 s to a minute). A controller
//     waits CacheSyncTimeout (2 minutes by default) for its sources and
//     then fails with a generic "failed to wait for caches to sync", which
//     says neither which side nor what was refused.
//   - The event handlers are not plain enqueuers, so nothing would be
//     saved: provider events end the apply de-duplication (applied),
//     record the deletions release waits for, map a provider
//     key back to its consumer key (origins, markers), and both sides
//     stamp the first observation of a change for the end-to-end latency
//     (consumerChanges, providerChanges), which processNext takes before a
//     sync and puts back when it must be retried. These would be the same
//     functions as custom handlers, and SetScope, which re-queues every
//     consumer object, would need a third source (a channel) to reach the
//     controller's queue.
//   - controller-runtime's default queue is now its priority queue, with
//     another rate limiter (5 ms to 1000 s per item) and another order;
//     keeping today's (100 ms to 2 minutes) means configuring both away.
//
// The queue is client-go's rate-limited workqueue, named
// "<connection>/<Kind.group>": its workqueue_* series exist today, one set
// per (Connection, API) and reused across restarts. Its storage is a
// fairQueue (fairqueue.go): one lane per consumer namespace, served round
// robin, so that no namespace's objects hold up another's. `make bench` could not
// decide this (the change was not made); revisit if controller-runtime lets
// a controller's metrics be labelled by the caller and its name be freed.
package syncer

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/mutation"
	"github.com/kbind/kbind/engine/providerevents"
	"github.com/kbind/kbind/engine/session"
)

// ReleaseOrphanedFunc releases the related copies that belong to owner, a
// consumer object deleted with the Orphan policy, so that they stay when
// it is gone; done is false while some could not be released yet.
type ReleaseOrphanedFunc func(ctx context.Context, sess *session.Session, target Target, owner *unstructured.Unstructured) (done bool, err error)

// Target describes one synced API.
type Target struct {
	Connection string
	// GVK is the consumer API's group, storage version and kind.
	GVK schema.GroupVersionKind
	// ProviderGVK is the provider's: the same as GVK unless the API is
	// projected (docs/shaping.md#projection).
	ProviderGVK schema.GroupVersionKind
	Namespaced  bool
	// HasStatus: the consumer CRD has the status subresource.
	HasStatus bool
	// ClusterUID is the consumer cluster's identity (ownership marker 1).
	ClusterUID string
	// Isolation maps consumer objects to their provider namespace and name.
	Isolation isolation.Mapping
}

// Scope says which consumer objects a Syncer handles and with which
// policy; it changes as bindings come and go.
type Scope struct {
	// Cluster: a ClusterBinding covers every namespace (and cluster-scoped
	// objects).
	Cluster       bool
	ClusterPolicy Policy
	// Namespaces covered by Bindings, with their policies. A namespace
	// listed here is one no ClusterBinding covers (a ClusterBinding's
	// namespaceSelector does not select it), so a Binding of the same
	// Connection may serve it next to a ClusterBinding that selects other
	// namespaces.
	Namespaces map[string]Policy
	// Elsewhere are the scopes the API's other Connections claim
	// (docs/bindings.md#one-api-several-providers): an object one of them
	// selects is routed there, and this Connection's Syncer leaves it
	// alone — above all its syncer finalizer, which the route holding it
	// shares. Claims come from the bindings alone, never from a
	// Connection's health: an unreachable provider never hands its objects
	// to another.
	Elsewhere []Scope
	// Connection names the Connection whose scope this is (set on the
	// Elsewhere entries, which name where an object goes).
	Connection string
}

// Policy is how the binding that covers an object syncs it.
type Policy struct {
	Conflict kbindv1alpha1.ConflictPolicy
	// Metadata selects the labels and annotations copied up.
	Metadata MetadataRules
	// References are the fields of this API's objects that name related
	// objects (relatedResources[].reference). Under isolation the provider
	// copy names each by its mapped provider name, and an object deleted
	// with the Orphan policy releases its related copies first.
	References []fieldpath.Path
	// ForwardEvents re-emits the provider's Events on the consumer objects.
	ForwardEvents bool
	// Objects selects the objects that sync by their labels (the entry's
	// objectSelector); nil: every object.
	Objects labels.Selector
	// Namespaces selects the namespaces whose objects sync by the
	// namespaces' labels (a ClusterBinding's namespaceSelector); nil:
	// every namespace.
	Namespaces labels.Selector
	// Up and Down are the entry's compiled mutation rules; nil: none.
	Up, Down *mutation.Program
	// Import: the entry imports the provider's own objects
	// (providerObjects: Import, importing.go).
	Import bool
	// Deletion is the binding's spec.deletionPolicy, the default of its
	// objects ("": Delete); an object's annotation wins (deletionPolicyOf).
	Deletion kbindv1alpha1.DeletionPolicy
	// KeptBy names the binding (KeptBy) while its spec.deletionProtection
	// keeps the provider copies of the objects it stops selecting, "" when
	// it is unprotected or being deleted (KeptByProtection, BIND-5): a
	// deselected object's copy is then kept, whatever Deletion says.
	KeptBy string
}

// selects reports whether the policy's filters select an object with
// labels objLabels in a namespace with labels nsLabels (docs/shaping.md#filters).
func (p Policy) selects(nsLabels, objLabels map[string]string) bool {
	return (p.Objects == nil || p.Objects.Matches(labels.Set(objLabels))) &&
		(p.Namespaces == nil || p.Namespaces.Matches(labels.Set(nsLabels)))
}

// covers returns whether namespace is in scope and its policy.
// ClusterBindings come first (BIND-2): scopeOf lists a Binding's
// namespace only when no ClusterBinding covers it, so a namespace listed
// is the Binding's.
func (s Scope) covers(namespace string) (Policy, bool) {
	if p, ok := s.Namespaces[namespace]; ok {
		return p, true
	}
	return s.ClusterPolicy, s.Cluster
}

// claimedElsewhere returns the other Connection whose scope selects an
// object with labels objLabels in namespace, whose labels are nsLabels;
// "" when none does.
func (s Scope) claimedElsewhere(namespace string, nsLabels, objLabels map[string]string) string {
	for _, other := range s.Elsewhere {
		if p, ok := other.covers(namespace); ok && p.selects(nsLabels, objLabels) {
			return other.Connection
		}
	}
	return ""
}

// selectsNamespaces reports whether the scope, or another Connection's,
// filters namespaces by their labels (a ClusterBinding's
// namespaceSelector): a namespace relabelled may then route its objects
// differently.
func (s Scope) selectsNamespaces() bool {
	if s.Cluster && s.ClusterPolicy.Namespaces != nil {
		return true
	}
	for _, other := range s.Elsewhere {
		if other.selectsNamespaces() {
			return true
		}
	}
	return false
}

// forwardsEvents reports whether any binding of the scope forwards the
// provider's Events.
func (s Scope) forwardsEvents() bool {
	if s.Cluster {
		return s.ClusterPolicy.ForwardEvents
	}
	for _, p := range s.Namespaces {
		if p.ForwardEvents {
			return true
		}
	}
	return false
}

// imports reports whether a binding of the scope imports the provider's
// own objects.
func (s Scope) imports() bool {
	if s.Cluster && s.ClusterPolicy.Import {
		return true
	}
	for _, p := range s.Namespaces {
		if p.Import {
			return true
		}
	}
	return false
}

// Syncer syncs one API of one Connection.
type Syncer struct {
	// reporter is the API (target) and where per-object results go.
	reporter
	consumer client.Client
	ccache   cache.Cache
	session  *session.Session
	workers  int
	limiter  *providerevents.Limiter
	onReady  func()
	onFailed func(error)
	// releaser deletes provider copies and releases the finalizer.
	releaser *releaser
	// doubts are the writes in doubt (doubt.go), shared with releaser.
	doubts *doubts
	// holds are the finalizers it added and has not seen held yet
	// (vanished.go).
	holds *holds
	// absences are the imported copies whose provider object was seen
	// gone, waiting for the absence to be confirmed (importing.go).
	absences *absences

	// ready is set once both informers have synced and the workers run.
	ready atomic.Bool

	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// unreached backs off the retries of syncs that failed because a
	// cluster did not answer at all (refusal.Unreached), capped at
	// UnreachedRetryCap; the queue's own limiter backs off every other
	// failure.
	unreached workqueue.TypedRateLimiter[types.NamespacedName]
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}

	mu    sync.RWMutex
	scope Scope
	// scopeAt is when the computation of scope's claims began (the
	// registry's Reconcile): a deselection is released only on claims
	// computed after it was first seen (deselect.go).
	scopeAt time.Time

	// deselected are the deselections waiting to persist, and
	// deselectionGrace how long they must (deselect.go).
	deselected       deselections
	deselectionGrace time.Duration

	// applied remembers, per key, the desired copy last applied until the
	// provider informer reports on that object: a sync that runs before the
	// cache has caught up does not apply the same thing twice.
	applied sync.Map // types.NamespacedName → string (digest of the desired copy)

	// forwarder runs while the scope forwards the provider's Events;
	// fmu guards it.
	fmu       sync.Mutex
	forwarder *runningForwarder

	// origins is the index from provider keys back to consumer keys under
	// isolation, filled from consumer events: it maps a provider event on
	// an object that carries no origin markers (a foreign object at a
	// derived name) back to its consumer object.
	origins sync.Map // types.NamespacedName (provider) → types.NamespacedName (consumer)

	// consumerChanges and providerChanges are when each side's unhandled
	// changes were first observed, for the end-to-end sync latency.
	consumerChanges, providerChanges observations
}

// Options build a Syncer.
type Options struct {
	Target   Target
	Consumer client.Client // consumer writes
	Cache    cache.Cache   // the consumer manager's cache
	Session  *session.Session
	Events   recorder.EventRecorder
	Results  *Results
	// Workers is the number of sync workers; DefaultWorkers when < 1.
	Workers int
	// EventLimiter bounds the forwarded provider Events (shared by every
	// Syncer of a konnector); nil: the default limits, per Syncer.
	EventLimiter *providerevents.Limiter
	// OnReady, when set, is called once the Syncer's informers have synced
	// and its workers run.
	OnReady func()
	// OnFailed, when set, is called when the Syncer stops on an error of
	// its own (an informer that cannot start), not when it is stopped.
	OnFailed func(error)
	// ReleaseOrphaned, when set, runs before the finalizer of an object
	// deleted with the Orphan policy is released, when a binding names
	// related objects through its fields.
	ReleaseOrphaned ReleaseOrphanedFunc
	// ImportAbsenceWindow is how long the provider object of an imported
	// copy must stay gone (or going), read from the provider itself at
	// both ends, before the copy is deleted (importing.go); one that comes
	// back meanwhile keeps the copy. DefaultImportAbsenceWindow when < 1;
	// the engine passes its BindingResync.
	ImportAbsenceWindow time.Duration
	// DeselectionGrace is how long an object its binding no longer
	// selects must stay so, on claims computed since, before it is
	// released (deselect.go); DefaultDeselectionGrace when < 1.
	DeselectionGrace time.Duration
}

// DefaultWorkers is the number of sync workers of a Syncer whose Options
// name none (the engine's default too).
const DefaultWorkers = 4

// DefaultImportAbsenceWindow is the ImportAbsenceWindow of a Syncer whose
// Options name none: the engine's default BindingResync.
const DefaultImportAbsenceWindow = 30 * time.Second

// New returns a Syncer; Start runs it.
func New(o Options) *Syncer {
	workers := o.Workers
	if workers < 1 {
		workers = DefaultWorkers
	}
	window := o.ImportAbsenceWindow
	if window < 1 {
		window = DefaultImportAbsenceWindow
	}
	limiter := o.EventLimiter
	if limiter == nil {
		limiter = providerevents.NewLimiter(providerevents.DefaultLimits)
	}
	grace := o.DeselectionGrace
	if grace < 1 {
		grace = DefaultDeselectionGrace
	}
	rp := reporter{target: o.Target, results: o.Results, events: o.Events}
	inDoubt, held := &doubts{}, &holds{}
	return &Syncer{
		reporter: rp, consumer: o.Consumer, ccache: o.Cache, session: o.Session,
		workers: workers, limiter: limiter, onReady: o.OnReady, onFailed: o.OnFailed,
		releaser:         &releaser{reporter: rp, consumer: o.Consumer, session: o.Session, duplicate: verdictOf(o.Session), orphaned: o.ReleaseOrphaned, doubts: inDoubt, holds: held},
		doubts:           inDoubt,
		holds:            held,
		absences:         &absences{window: window, clock: time.Now},
		deselectionGrace: grace,
		// Fair between namespaces (fairqueue.go), with the name and metrics it always had.
		queue:     newWorkqueue(o.Target.Connection + "/" + o.Target.GVK.GroupKind().String()),
		unreached: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, UnreachedRetryCap),
		done:      make(chan struct{}),
	}
}

// UnreachedRetryCap is the longest a sync waits to be retried after it
// failed because a cluster did not answer at all — its API server stopped
// or not yet listening (refusal.Unreached). Such a retry asks nothing of
// the server, and an object that failed through a long restart resumes
// within this of the server listening again, where the exponential backoff
// of other failures would have grown to its 2 minutes.
const UnreachedRetryCap = 5 * time.Second

// Session returns the provider session the Syncer runs on.
func (s *Syncer) Session() *session.Session { return s.session }

// SetScope replaces the Syncer's scope, whose claims began to be computed
// at computedAt, and re-queues every consumer object so that objects
// entering scope sync at once.
func (s *Syncer) SetScope(ctx context.Context, scope Scope, computedAt time.Time) {
	s.mu.Lock()
	if computedAt.After(s.scopeAt) {
		s.scopeAt = computedAt
	}
	// reflect, not equality.Semantic: the latter compares label selectors
	// by calling String on them, and an unset one is nil. Scopes come from
	// one builder (scopeOf), so nil and empty never differ by accident.
	changed := !reflect.DeepEqual(s.scope, scope)
	s.scope = scope
	s.mu.Unlock()
	if changed {
		s.enqueueAll(ctx)
		if s.Ready() {
			s.runForwarder(scope.forwardsEvents())
		}
	}
}

func (s *Syncer) currentScope() Scope {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.scope
}

// scopeComputedAt is when the computation of the current scope's claims
// began.
func (s *Syncer) scopeComputedAt() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.scopeAt
}

// newList returns an empty list of the consumer API.
func (s *Syncer) newList() *unstructured.UnstructuredList { return listOf(s.target.GVK) }

// newProviderList returns an empty list of the provider API.
func (s *Syncer) newProviderList() *unstructured.UnstructuredList {
	return listOf(s.target.ProviderGVK)
}

func listOf(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

// run registers the informers on both sides and runs the workers until ctx
// ends. Stop (or cancelling ctx) ends it; done is closed on return, in
// whatever phase it was.
func (s *Syncer) run(ctx context.Context) {
	defer close(s.done)
	logger := log.FromContext(ctx).WithValues("gvk", s.target.GVK.String())
	ctx = log.IntoContext(ctx, logger)
	// kbind_syncer_ready is 0 from the start until the informers have
	// synced, and stays 0 after a failure while the registry waits to
	// restart it (the registry drops it when it does not):
	// a bound API that does not sync shows, without gaps.
	ready := metrics.SyncerReady.WithLabelValues(s.target.Connection, s.target.GVK.GroupKind().String())
	ready.Set(0)
	if err := s.runWorkers(ctx); err != nil && ctx.Err() == nil {
		ready.Set(0)
		logger.Error(err, "Syncer stopped; it is restarted with backoff")
		if s.onFailed != nil {
			s.onFailed(err)
		}
		return
	}
	s.forgetReadyMetric()
}

// forgetReadyMetric drops the Syncer's kbind_syncer_ready series: it was
// stopped, or it failed and is not restarted.
func (s *Syncer) forgetReadyMetric() {
	metrics.SyncerReady.DeleteLabelValues(s.target.Connection, s.target.GVK.GroupKind().String())
}

// Exited reports whether the Syncer's run has ended (stopped or failed).
func (s *Syncer) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// prepare gives the Syncer its context and cancel. It must happen before
// anyone else can see the Syncer, so that a Stop racing the start is never
// a no-op; launch then runs it.
func (s *Syncer) prepare(ctx context.Context) {
	s.ctx, s.cancel = context.WithCancel(ctx)
}

// launch runs a prepared Syncer until it is stopped; a Syncer stopped
// before its launch exits at once.
func (s *Syncer) launch() {
	go s.run(s.ctx)
}

func (s *Syncer) runWorkers(ctx context.Context) error {
	defer s.queue.ShutDown()
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.consumerEvent(obj, false) },
		UpdateFunc: func(_, obj any) { s.consumerEvent(obj, false) },
		DeleteFunc: func(obj any) { s.consumerEvent(obj, true) },
	}
	// Provider events also mean the cache caught up with our last apply.
	providerHandler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.providerEvent(obj, false) },
		UpdateFunc: func(_, obj any) { s.providerEvent(obj, false) },
		DeleteFunc: func(obj any) { s.providerEvent(obj, true) },
	}
	// Not blocking until synced: waitForSync below waits, and says so
	// when a side refuses the list.
	cinf, err := s.ccache.GetInformer(ctx, s.newObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("consumer informer: %w", err)
	}
	creg, err := cinf.AddEventHandler(handler)
	if err != nil {
		return err
	}
	defer func() { _ = cinf.RemoveEventHandler(creg) }()
	pinf, err := s.session.Cache().GetInformer(ctx, s.newProviderObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("provider informer: %w", err)
	}
	preg, err := pinf.AddEventHandler(providerHandler)
	if err != nil {
		return err
	}
	defer func() { _ = pinf.RemoveEventHandler(preg) }()
	// Provider namespaces kbind may create are read from the session cache
	// too (not under Namespace isolation: its one namespace is the
	// provider admin's, and the credentials may read nothing outside it).
	if s.target.Isolation.CreatesNamespaces() && s.target.Namespaced {
		remove, err := s.watchProviderNamespaces(ctx)
		if err != nil {
			return err
		}
		defer remove()
	}
	// A consumer namespace relabelled may enter or leave a
	// namespaceSelector: its objects are looked at again.
	if s.target.Namespaced {
		remove, err := s.watchNamespaceLabels(ctx)
		if err != nil {
			return err
		}
		defer remove()
	}
	if err := s.waitForSync(ctx, creg.HasSynced, preg.HasSynced); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i := 0; i < s.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s.processNext(ctx) {
			}
		}()
	}
	s.ready.Store(true)
	metrics.SyncerReady.WithLabelValues(s.target.Connection, s.target.GVK.GroupKind().String()).Set(1)
	log.FromContext(ctx).Info("Syncer started", "workers", s.workers)
	s.runForwarder(s.currentScope().forwardsEvents())
	if s.onReady != nil {
		s.onReady()
	}
	<-ctx.Done()
	s.queue.ShutDown()
	s.runForwarder(false)
	wg.Wait()
	return nil
}

// Ready reports whether the Syncer's informers have synced and its
// workers run: only then does it sync objects.
func (s *Syncer) Ready() bool { return s.ready.Load() }

// Stop stops the Syncer and waits until it has.
func (s *Syncer) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

func objectOf(obj any) (metav1.Object, bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	return o, ok
}

// consumerEvent queues a consumer object and, under isolation, indexes its
// provider key.
func (s *Syncer) consumerEvent(obj any, deleted bool) {
	o, ok := objectOf(obj)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	if s.target.Isolation.Isolated() {
		if pkey, err := s.target.Isolation.Object(key); err == nil {
			if deleted {
				s.origins.Delete(pkey)
			} else {
				s.origins.Store(pkey, key)
			}
		}
	}
	s.consumerChanges.observe(key, time.Now())
	s.queue.Add(key)
}

// providerEvent queues the consumer object a provider object stands for
// (the same key without isolation; under isolation the index, else the
// copy's origin markers), and forgets the last apply of it: the cache has
// caught up. A deletion is recorded for the copy release waits for.
func (s *Syncer) providerEvent(obj any, deleted bool) {
	o, ok := objectOf(obj)
	if !ok {
		return
	}
	key, ok := s.consumerKey(o)
	if !ok {
		if s.target.Isolation.Isolated() && o.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] == s.target.ClusterUID {
			// Copied markers, or another Connection's copy: never taken
			// for the copy of the consumer object they name.
			log.FromContext(s.ctx).V(1).Info("Ignoring a provider object with this consumer cluster's markers that is not at the provider place of the consumer object they name",
				"namespace", o.GetNamespace(), "name", o.GetName())
		}
		return
	}
	s.applied.Delete(key)
	if deleted {
		s.releaser.copyDeleted(key, o.GetUID())
	}
	s.providerChanges.observe(key, time.Now())
	s.queue.Add(key)
}

// consumerKey maps a provider object back to its consumer key; ok is false
// for a provider object no consumer object maps to.
func (s *Syncer) consumerKey(o metav1.Object) (types.NamespacedName, bool) {
	pkey := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	if s.target.Isolation.Isolated() {
		if key, ok := s.origins.Load(pkey); ok {
			return key.(types.NamespacedName), true
		}
	}
	if key, ok := originOf(s.target.Isolation, s.target.ClusterUID, pkey, o.GetLabels(), o.GetAnnotations()); ok {
		return key, true
	}
	return s.importKey(o)
}

// originOf is the consumer object whose copy the provider object at pkey
// is, by its markers (isolation.Origin); without isolation it is the same
// key. Only the object at that consumer object's provider place is its
// copy: credentials that read an API cluster-wide (Prefixed isolation) read
// every consumer's markers and can stamp them on their own objects, but
// cannot write into another consumer's place.
func originOf(iso isolation.Mapping, clusterUID string, pkey types.NamespacedName, labels, annotations map[string]string) (types.NamespacedName, bool) {
	if !iso.Isolated() {
		return pkey, true
	}
	if labels[kbindv1alpha1.ConsumerClusterUIDLabel] != clusterUID {
		return types.NamespacedName{}, false
	}
	key, ok := isolation.Origin(annotations)
	if !ok {
		return types.NamespacedName{}, false
	}
	if mapped, err := iso.Object(key); err != nil || mapped != pkey {
		return types.NamespacedName{}, false
	}
	return key, true
}

// watchNamespaceLabels re-queues the objects of a consumer namespace whose
// labels change while the scope selects namespaces (the consumer cache's
// metadata-only Namespace informer, which the bindings use too).
func (s *Syncer) watchNamespaceLabels(ctx context.Context) (remove func(), err error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	inf, err := s.ccache.GetInformer(ctx, ns, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("consumer namespace informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		// A namespace made on the consumer may receive imported objects.
		AddFunc: func(obj any, initial bool) {
			if created, ok := obj.(*metav1.PartialObjectMetadata); ok && !initial {
				s.enqueueImportable(ctx, created.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, okBefore := oldObj.(*metav1.PartialObjectMetadata)
			after, okAfter := newObj.(*metav1.PartialObjectMetadata)
			if !okBefore || !okAfter || equality.Semantic.DeepEqual(before.Labels, after.Labels) {
				return
			}
			if s.currentScope().selectsNamespaces() {
				s.enqueueNamespace(ctx, after.Name)
				s.enqueueImportable(ctx, after.Name)
			}
		}})
	if err != nil {
		return nil, err
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// enqueueNamespace queues every consumer object of one namespace.
func (s *Syncer) enqueueNamespace(ctx context.Context, namespace string) {
	list := s.newList()
	if err := s.ccache.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "Listing consumer objects of a relabelled namespace from the cache", "namespace", namespace)
		return
	}
	for i := range list.Items {
		s.queue.Add(client.ObjectKeyFromObject(&list.Items[i]))
	}
}

func (s *Syncer) enqueueAll(ctx context.Context) {
	list := s.newList()
	if err := s.ccache.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "Listing consumer objects from the cache")
		return
	}
	for i := range list.Items {
		s.queue.Add(client.ObjectKeyFromObject(&list.Items[i]))
	}
	s.enqueueImportable(ctx, "")
}

// enqueueImportable queues the consumer key of every provider object the
// scope imports into consumer namespace ns ("": every namespace), from the
// provider cache, so that turning Import on, or a namespace coming into the
// import, imports what exists already.
func (s *Syncer) enqueueImportable(ctx context.Context, ns string) {
	if !s.importing() || !s.currentScope().imports() {
		return
	}
	list := s.newProviderList()
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if ns != "" {
		opts = append(opts, client.InNamespace(s.target.Isolation.Namespace(ns)))
	}
	if err := s.session.Cache().List(ctx, list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "Listing provider objects to import from the cache")
		return
	}
	for i := range list.Items {
		if key, ok := s.importKey(&list.Items[i]); ok && (ns == "" || key.Namespace == ns) {
			s.queue.Add(key)
		}
	}
}

// watchProviderNamespaces starts the provider namespace informer (the
// namespaces kbind creates are read from it) and, under Prefixed, looks
// again at a namespace whose prefix label changes: the label says whether
// its objects are this consumer's to import.
func (s *Syncer) watchProviderNamespaces(ctx context.Context) (remove func(), err error) {
	inf, err := s.session.Cache().GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return nil, fmt.Errorf("provider namespace informer: %w", err)
	}
	prefix := s.target.Isolation.Prefix()
	relook := func(pns *corev1.Namespace) {
		ns, found := strings.CutPrefix(pns.Name, prefix+"-")
		if prefix != "" && found && s.target.Isolation.Namespace(ns) == pns.Name {
			s.enqueueNamespace(ctx, ns)
			s.enqueueImportable(ctx, ns)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if pns, ok := obj.(*corev1.Namespace); ok && !initial {
				relook(pns)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, okBefore := oldObj.(*corev1.Namespace)
			after, okAfter := newObj.(*corev1.Namespace)
			if okBefore && okAfter && before.Labels[kbindv1alpha1.PrefixLabel] != after.Labels[kbindv1alpha1.PrefixLabel] {
				relook(after)
			}
		}})
	if err != nil {
		return nil, err
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// processNext syncs the next queued key and acts on what sync returns
// (see outcome): an error is logged at V(1) and the key retried with
// backoff (at most UnreachedRetryCap when the cluster did not answer),
// requeue retries it with backoff silently, done forgets its backoff. It
// returns false once the queue is shut down.
func (s *Syncer) processNext(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)
	// Taken before the sync reads the caches: an informer updates its cache
	// before it reports the change, so this sync sees every change observed
	// until now.
	seen := &changes{up: s.consumerChanges.take(key), down: s.providerChanges.take(key)}
	out, err := s.sync(log.IntoContext(ctx, log.FromContext(ctx).WithValues("namespace", key.Namespace, "name", key.Name)), key, seen)
	if err != nil || out == requeue {
		// Not delivered yet: the retry's latency counts from the first
		// observation.
		s.consumerChanges.observe(key, seen.up)
		s.providerChanges.observe(key, seen.down)
	}
	switch {
	case err != nil && refusal.Unreached(err):
		if ctx.Err() == nil {
			log.FromContext(ctx).V(1).Info("Sync failed, the cluster did not answer; retrying", "namespace", key.Namespace, "name", key.Name, "error", err.Error())
		}
		s.queue.AddAfter(key, s.unreached.When(key))
	case err != nil:
		if ctx.Err() == nil {
			log.FromContext(ctx).V(1).Info("Sync failed; retrying with backoff", "namespace", key.Namespace, "name", key.Name, "error", err.Error())
		}
		s.queue.AddRateLimited(key)
	case out == requeue:
		s.queue.AddRateLimited(key)
	default:
		s.queue.Forget(key)
		s.unreached.Forget(key)
	}
	return true
}
