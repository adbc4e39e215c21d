package syncer

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/admission"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/providerevents"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/session"
)

// Registry runs one Syncer per bound API (keyed by consumer CRD name) with
// the scope the bindings give it, starting, re-scoping, restarting (new
// provider session) and stopping them as bindings, CRDs and Connections
// change.
//
// It is a manager.Runnable (Start): when the manager stops it, it stops
// every Syncer and starts none any more.
//
// Locking: mu guards syncers, failures, used, backoff, restarts and
// stopped. It is never held
// across a call that blocks on the network or on a Syncer (resolve,
// scopeOf, Stop, the informer removals of Forget): Reconcile takes its
// decision under mu from the state it reads there, releases it to act, and
// reads the state again after anything that ran unlocked. A Syncer is
// published in syncers only once it can be stopped (prepared), so whoever
// finds it there may stop it.
type Registry struct {
	Consumer client.Client
	Cache    cache.Cache
	Sessions *session.Manager
	Events   recorder.EventRecorder
	Results  *Results
	// Workers is each Syncer's number of sync workers (see Options).
	Workers int
	// EventLimiter bounds the provider Events every Syncer forwards
	// together; nil: providerevents.DefaultLimits.
	EventLimiter *providerevents.Limiter
	// Notify, when set, is called with the Connection's name when one of
	// its Syncers has started syncing, or is due for a restart after it
	// failed (the bindings report it and reconcile).
	Notify func(connection string)
	// ReleaseOrphaned is passed to every Syncer (see Options).
	ReleaseOrphaned ReleaseOrphanedFunc

	mu       sync.Mutex
	syncers  map[string]*Syncer
	failures map[string]failure
	backoff  workqueue.TypedRateLimiter[string]
	// used records, per API, the kinds whose informers the registry made
	// the caches start (consumer and provider), so Forget can stop them.
	used map[string]map[usedInformer]bool
	// restarts are the pending wake-ups of failed Syncers, by API, due
	// when their restart backoff runs out; StopAll cancels them.
	restarts map[string]*time.Timer
	// stopped is set by StopAll: no Syncer starts any more.
	stopped bool

	// started, when set (tests), sees every Syncer the registry starts.
	started func(*Syncer)
}

// failure is the last start failure of an API's Syncer and when it may be
// started again.
type failure struct {
	err     error
	retryAt time.Time
}

// newRestartBackoff is how long a failed Syncer waits before it is started
// again: 1s after the first failure, doubling, at most a minute; reset once
// it syncs.
func newRestartBackoff() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
}

func (r *Registry) notify(connection string) {
	if r.Notify != nil {
		r.Notify(connection)
	}
}

// usedInformer is one informer started for an API: a kind on the consumer
// cache, or on one provider session's cache.
type usedInformer struct {
	gvk     schema.GroupVersionKind
	session *session.Session // nil: the consumer cache
}

// recordInformer records the consumer informer of an API.
func (r *Registry) recordInformer(crdName string, gvk schema.GroupVersionKind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordInformerLocked(crdName, gvk, nil, schema.GroupVersionKind{})
}

// recordInformerLocked records the informers of an API: the consumer's at
// gvk and, with a session, the provider's at providerGVK; mu is held.
func (r *Registry) recordInformerLocked(crdName string, gvk schema.GroupVersionKind, sess *session.Session, providerGVK schema.GroupVersionKind) {
	if r.used == nil {
		r.used = map[string]map[usedInformer]bool{}
	}
	if r.used[crdName] == nil {
		r.used[crdName] = map[usedInformer]bool{}
	}
	// A stopped session's cache stopped its informers; recording it any
	// longer would keep the session — its caches, clients and REST mapper
	// — alive after every credential rotation (measured: ~200 rotations,
	// +120 MiB).
	for inf := range r.used[crdName] {
		if inf.session != nil && inf.session.Stopped() {
			delete(r.used[crdName], inf)
		}
	}
	r.used[crdName][usedInformer{gvk: gvk}] = true
	if sess != nil {
		r.used[crdName][usedInformer{gvk: providerGVK, session: sess}] = true
	}
}

// Forget releases everything held for an API no binding lists any more:
// its Syncer, its per-object results, and the informers started for it on
// the consumer and provider caches (so that unbound APIs cost nothing, and
// a deleted CRD leaves no watch retrying forever).
func (r *Registry) Forget(ctx context.Context, crdName, connection string) {
	r.mu.Lock()
	current := r.syncers[crdName]
	delete(r.syncers, crdName)
	delete(r.failures, crdName)
	r.restartBackoff().Forget(crdName)
	used := r.used[crdName]
	delete(r.used, crdName)
	r.mu.Unlock()
	if current != nil {
		current.Stop()
	}
	r.removeInformers(ctx, used)
	for inf := range used {
		r.Results.drop(connection, inf.gvk.GroupKind())
	}
}

// takeInformersLocked removes from the record the informers of an API at
// gvk (on every cache) and returns them; mu is held.
func (r *Registry) takeInformersLocked(crdName string, gvk schema.GroupVersionKind) map[usedInformer]bool {
	taken := map[usedInformer]bool{}
	for inf := range r.used[crdName] {
		if inf.gvk == gvk {
			taken[inf] = true
			delete(r.used[crdName], inf)
		}
	}
	return taken
}

// takeSessionInformersLocked removes from the record the informers of an
// API on one provider session's cache and returns them; mu is held.
func (r *Registry) takeSessionInformersLocked(crdName string, sess *session.Session) map[usedInformer]bool {
	taken := map[usedInformer]bool{}
	for inf := range r.used[crdName] {
		if inf.session != nil && inf.session == sess {
			taken[inf] = true
			delete(r.used[crdName], inf)
		}
	}
	return taken
}

// removeInformers stops informers the registry made the caches start for
// an API, except one recorded again meanwhile (a Syncer started since uses
// it) or used by another API (a provider API projected onto two consumer
// APIs has one provider informer).
func (r *Registry) removeInformers(ctx context.Context, informers map[usedInformer]bool) {
	for inf := range informers {
		r.mu.Lock()
		inUse := false
		for _, used := range r.used {
			inUse = inUse || used[inf]
		}
		r.mu.Unlock()
		if inUse {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(inf.gvk)
		c := r.Cache
		if inf.session != nil {
			c = inf.session.Cache()
		}
		if err := c.RemoveInformer(ctx, obj); err != nil {
			log.FromContext(ctx).V(1).Info("Could not stop an informer no Syncer uses", "gvk", inf.gvk.String(), "error", err.Error())
		}
	}
}

// Count counts the consumer objects of an API in one namespace, or in all,
// that the binding's filters select (objects and namespaces, nil: every
// one), from the consumer cache — the informer its Syncer uses, no second
// one.
func (r *Registry) Count(ctx context.Context, crdName string, gvk schema.GroupVersionKind, namespace string, allNamespaces bool,
	objects, namespaces labels.Selector) (int32, error) {
	// Only the number is needed: the cached objects are not copied.
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if objects != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: objects})
	}
	list, err := r.listConsumer(ctx, crdName, gvk, namespace, allNamespaces, opts...)
	if err != nil {
		return 0, fmt.Errorf("counting %s: %w", crdName, err)
	}
	if namespaces == nil {
		return int32(len(list.Items)), nil
	}
	selected := map[string]bool{}
	n := int32(0)
	for i := range list.Items {
		ns := list.Items[i].GetNamespace()
		in, known := selected[ns]
		if !known {
			nsLabels, err := namespaceLabels(ctx, r.Cache, ns)
			if client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("counting %s: reading namespace %s: %w", crdName, ns, err)
			}
			in = namespaces.Matches(labels.Set(nsLabels))
			selected[ns] = in
		}
		if in {
			n++
		}
	}
	return n, nil
}

// cacheSyncTimeout bounds how long a reconcile waits for a consumer
// informer to sync.
const cacheSyncTimeout = 15 * time.Second

// listConsumer lists objects of an API from the consumer cache (in one
// namespace, or in all), recording the informer for Forget. It waits at
// most cacheSyncTimeout for a new informer to sync: an informer whose API
// is no longer served (its CRD just deleted) never syncs, and a reconcile
// that waited for it would block its controller for good. Such an
// informer is removed again unless a Syncer uses it, so that no watch is
// left retrying a gone API.
func (r *Registry) listConsumer(ctx context.Context, crdName string, gvk schema.GroupVersionKind, namespace string, allNamespaces bool,
	opts ...client.ListOption) (*unstructured.UnstructuredList, error) {
	r.recordInformer(crdName, gvk)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if !allNamespaces {
		opts = append(opts, client.InNamespace(namespace))
	}
	wait, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	err := r.Cache.List(wait, list, opts...)
	if err == nil || wait.Err() == nil || ctx.Err() != nil {
		return list, err
	}
	r.mu.Lock()
	_, syncing := r.syncers[crdName]
	r.mu.Unlock()
	if !syncing {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		_ = r.Cache.RemoveInformer(ctx, obj)
	}
	return nil, fmt.Errorf("the consumer cache did not sync within %s (is the API still served?): %w", cacheSyncTimeout, err)
}

// LastError is the error the API's Syncer last failed with, "" when it
// runs or has not failed since it last synced.
func (r *Registry) LastError(crdName string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.failures[crdName]; ok {
		return f.err.Error()
	}
	return ""
}

// Refused is the access refusal the API's Syncer last failed with (a side
// refuses the konnector the list of the API: see AccessRefused), "" when
// it failed otherwise or not at all.
func (r *Registry) Refused(crdName string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.failures[crdName]; ok {
		return Refusal(f.err)
	}
	return ""
}

// API is what the registry needs to know about a bound API.
type API struct {
	// CRD is the consumer CRD's name, the consumer API's "<plural>.<group>".
	CRD string
	// ProviderAPI is the provider's "<plural>.<group>" (CRD unless the API
	// is projected).
	ProviderAPI string
	Connection  string
	Target      Target
	Session     *session.Session
	Conn        *kbindv1alpha1.Connection
	// crd is the consumer CRD read by resolve.
	crd *apiextensionsv1.CustomResourceDefinition
}

// resolve reads the consumer CRD, its Connection and session. ok is false
// when the API cannot sync now (no CRD, not established, Connection not
// Ready, no session).
func (r *Registry) resolve(ctx context.Context, crdName string) (API, bool, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return API{}, false, client.IgnoreNotFound(err)
	}
	connName := crd.Annotations[kbindv1alpha1.ConnectionAnnotation]
	if connName == "" || !established(crd) {
		return API{}, false, nil
	}
	conn := &kbindv1alpha1.Connection{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: connName}, conn); err != nil {
		return API{}, false, client.IgnoreNotFound(err)
	}
	if !ConnectionUsable(conn) {
		return API{}, false, nil
	}
	sess, ok := r.Sessions.Get(connName)
	if !ok {
		return API{}, false, nil
	}
	version := kbindschema.StorageVersion(crd)
	if version == nil {
		return API{}, false, nil
	}
	return API{
		CRD: crdName, ProviderAPI: kbindschema.ProviderAPI(crd), Connection: connName, Session: sess, Conn: conn, crd: crd,
		Target: Target{
			Connection:  connName,
			GVK:         schema.GroupVersionKind{Group: crd.Spec.Group, Version: version.Name, Kind: crd.Spec.Names.Kind},
			ProviderGVK: kbindschema.ProviderGVK(crd, version.Name),
			Namespaced:  crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			HasStatus:   version.Subresources != nil && version.Subresources.Status != nil,
			ClusterUID:  conn.Status.LocalClusterUID,
			Isolation:   isolation.For(conn.Spec.IsolationOf()),
		},
	}, true, nil
}

// ConnectionUsable reports whether the syncers and bindings of a
// Connection may use its provider session: when it is Ready, and while it
// is deleting and only waits for its bindings (Ready=False,
// DrainingBindings, still Connected) — those bindings must be able to
// drain, and keep syncing until they are deleted (CONN-7, SYNC-D).
func ConnectionUsable(conn *kbindv1alpha1.Connection) bool {
	if conn.Status.LocalClusterUID == "" {
		return false
	}
	ready := meta.FindStatusCondition(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady))
	switch {
	case ready == nil:
		return false
	case ready.Status == metav1.ConditionTrue:
		return true
	default:
		return !conn.DeletionTimestamp.IsZero() && ready.Reason == string(kbindv1alpha1.ReasonDrainingBindings) &&
			meta.IsStatusConditionTrue(conn.Status.Conditions, string(kbindv1alpha1.ConditionConnected))
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// scopeOf computes the scope the live bindings of the Connection give an
// API: ClusterBindings first, then Bindings of namespaced APIs in the
// namespaces the Connection admits (BIND-3). Deleting bindings are
// excluded (they drain), and so are Bindings the Connection does not
// admit: nothing of theirs is synced, and their objects, no longer in
// scope, keep their finalizers and provider copies until they are admitted
// again or deleted.
func (r *Registry) scopeOf(ctx context.Context, api API) (Scope, error) {
	scope := Scope{Namespaces: map[string]Policy{}}
	byAPI := client.MatchingFields{index.BindingAPI: api.CRD}
	cbs, err := index.ListBindings(ctx, r.Consumer, index.ClusterBindings, byAPI)
	if err != nil {
		return scope, fmt.Errorf("the bindings of %s: %w", api.CRD, err)
	}
	for _, cb := range cbs {
		if !mine(cb, api) || scope.Cluster {
			continue
		}
		p, err := policyOf(*cb.BindingSpec(), api.CRD)
		if err != nil {
			// The binding says so (Filters); its objects wait, untouched.
			log.FromContext(ctx).V(1).Info("A ClusterBinding gives no scope: its filters do not parse", "binding", cb.GetName(), "error", err.Error())
			continue
		}
		scope.Cluster, scope.ClusterPolicy = true, p
	}
	if scope.Cluster || !api.Target.Namespaced {
		return scope, nil
	}
	bs, err := index.ListBindings(ctx, r.Consumer, index.Bindings, byAPI)
	if err != nil {
		return scope, fmt.Errorf("the bindings of %s: %w", api.CRD, err)
	}
	for _, b := range bs {
		if _, taken := scope.Namespaces[b.GetNamespace()]; !mine(b, api) || taken {
			continue
		}
		d, err := admission.Admits(ctx, r.Consumer, api.Conn, b.GetNamespace())
		if err != nil {
			return scope, err
		}
		if !d.Admitted {
			continue
		}
		p, err := policyOf(*b.BindingSpec(), api.CRD)
		if err != nil {
			log.FromContext(ctx).V(1).Info("A Binding gives no scope: its filters do not parse", "binding", b.GetNamespace()+"/"+b.GetName(), "error", err.Error())
			continue
		}
		scope.Namespaces[b.GetNamespace()] = p
	}
	return scope, nil
}

// mine reports whether b is a live binding through the API's Connection
// (a deleting one drains instead) whose entry for the API is the one its
// consumer CRD serves (another entry, projecting another provider API onto
// the same consumer name, is refused: Collision).
func mine(b kbindv1alpha1.BindingObject, api API) bool {
	if b.BindingSpec().ConnectionRef.Name != api.Connection || !b.GetDeletionTimestamp().IsZero() {
		return false
	}
	entry, ok := b.BindingSpec().APIFor(api.CRD)
	return ok && (api.crd == nil || kbindschema.Serves(entry, api.crd))
}

// policyOf is how a binding syncs the objects of consumer API crd; an
// error when its filters do not parse or its mutations do not compile (the
// binding says so).
func policyOf(spec kbindv1alpha1.BindingSpec, crd string) (Policy, error) {
	p := Policy{Conflict: spec.ConflictPolicy, References: References(spec, crd),
		ForwardEvents: spec.ProviderEvents != kbindv1alpha1.ProviderEventsIgnore}
	if p.Conflict == "" {
		p.Conflict = kbindv1alpha1.ConflictPolicyFail
	}
	if m := spec.Metadata; m != nil {
		p.Metadata = MetadataRules{Labels: m.Labels, Annotations: m.Annotations}
	}
	var err error
	if p.Objects, p.Namespaces, err = Filters(spec, crd); err != nil {
		return Policy{}, err
	}
	if p.Up, p.Down, err = Mutations(spec, crd); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Filters are the selectors a binding filters the objects of consumer API
// crd with: the entry's objectSelector and the spec's namespaceSelector,
// each nil when unset (docs/shaping.md#filters). An error names the
// selector that does not parse.
func Filters(spec kbindv1alpha1.BindingSpec, crd string) (objects, namespaces labels.Selector, err error) {
	if entry, ok := spec.APIFor(crd); ok && entry.ObjectSelector != nil {
		if objects, err = metav1.LabelSelectorAsSelector(entry.ObjectSelector); err != nil {
			return nil, nil, fmt.Errorf("the objectSelector of %s: %w", entry.Name, err)
		}
	}
	if spec.NamespaceSelector != nil {
		if namespaces, err = metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
			return nil, nil, fmt.Errorf("the namespaceSelector: %w", err)
		}
	}
	return objects, namespaces, nil
}

func (s Scope) empty() bool { return !s.Cluster && len(s.Namespaces) == 0 }

// step is what Reconcile does next with an API's Syncer.
type step int

const (
	stepDone    step = iota // nothing (more) to do
	stepWait                // a failed Syncer waits out its restart backoff
	stepForget              // drop an exited Syncer, then decide again
	stepStop                // stop the running Syncer, then decide again
	stepStart               // start a Syncer
	stepRescope             // give the running Syncer the current scope
)

// nextStep decides, from what runs and what is wanted, the next step of
// Reconcile (a pure function: the locking lives in Reconcile).
func nextStep(current *Syncer, want bool, api API, backoffPending bool) step {
	switch {
	case current != nil && current.Exited() && backoffPending:
		return stepWait
	case current != nil && current.Exited():
		return stepForget
	case current != nil && (!want || current.session != api.Session || current.target != api.Target):
		return stepStop
	case !want:
		return stepDone
	case current == nil:
		return stepStart
	default:
		return stepRescope
	}
}

// Reconcile makes the Syncer of the API named by its consumer CRD match
// the current bindings, CRD and Connection. Concurrent calls for one API
// (the ClusterBinding and Binding controllers) are safe: every decision is
// taken under the lock on the registry's current state, and after stopping
// a Syncer (which happens unlocked) the state is read again — another call
// may have started one meanwhile, which is then kept or replaced, never
// overwritten and left running.
func (r *Registry) Reconcile(ctx context.Context, crdName string) error {
	api, ok, err := r.resolve(ctx, crdName)
	if err != nil {
		return err
	}
	var scope Scope
	if ok {
		if scope, err = r.scopeOf(ctx, api); err != nil {
			return err
		}
	}
	want := ok && !scope.empty()
	for {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return nil // the manager is stopping: start nothing
		}
		if r.syncers == nil {
			r.syncers = map[string]*Syncer{}
		}
		current := r.syncers[crdName]
		f, failed := r.failures[crdName]
		switch nextStep(current, want, api, failed && time.Now().Before(f.retryAt)) {
		case stepWait, stepDone:
			r.mu.Unlock()
			return nil
		case stepForget:
			delete(r.syncers, crdName)
			r.mu.Unlock()
			// A failed Syncer kept kbind_syncer_ready at 0; a restart sets
			// it again, and an API no longer bound has none.
			current.forgetReadyMetric()
		case stepStop:
			delete(r.syncers, crdName)
			var stale map[usedInformer]bool
			switch {
			case want && current.target.GVK != api.Target.GVK:
				// The storage version changed: the next Syncer watches the
				// new version, and nothing reads the old one any more.
				stale = r.takeInformersLocked(crdName, current.target.GVK)
				for inf := range r.takeInformersLocked(crdName, current.target.ProviderGVK) {
					stale[inf] = true
				}
			case want && current.target.Connection != api.Target.Connection:
				// Another Connection supplies the API now (a ClusterBinding
				// took its CRD over, BIND-3): the old one's provider watch
				// goes, its session stays for its other APIs.
				stale = r.takeSessionInformersLocked(crdName, current.session)
			}
			r.mu.Unlock()
			current.Stop()
			r.removeInformers(ctx, stale)
			log.FromContext(ctx).Info("Stopped syncer", "crd", crdName)
		case stepRescope:
			r.mu.Unlock()
			current.SetScope(ctx, scope)
			return nil
		case stepStart:
			r.recordInformerLocked(crdName, api.Target.GVK, api.Session, api.Target.ProviderGVK)
			logger := log.FromContext(ctx).WithValues("crd", crdName, "connection", api.Connection)
			s := r.newSyncer(crdName, api)
			s.scope = scope
			s.prepare(log.IntoContext(api.Session.Context(), logger))
			r.syncers[crdName] = s
			r.mu.Unlock()
			if r.started != nil {
				r.started(s)
			}
			// Informers start in the background: a slow provider never
			// blocks a binding reconcile.
			s.launch()
			logger.Info("Starting syncer", "gvk", api.Target.GVK.String())
			return nil
		}
	}
}

// restartBackoff returns the restart rate limiter; mu is held.
func (r *Registry) restartBackoff() workqueue.TypedRateLimiter[string] {
	if r.backoff == nil {
		r.backoff = newRestartBackoff()
	}
	return r.backoff
}

// newSyncer builds the Syncer of an API, reporting its readiness and
// failures back to the registry; mu is held.
func (r *Registry) newSyncer(crdName string, api API) *Syncer {
	if r.EventLimiter == nil {
		r.EventLimiter = providerevents.NewLimiter(providerevents.DefaultLimits)
	}
	limiter := r.EventLimiter
	return New(Options{
		Target: api.Target, Consumer: r.Consumer, Cache: r.Cache, Session: api.Session,
		Events: r.Events, Results: r.Results, Workers: r.Workers, EventLimiter: limiter, ReleaseOrphaned: r.ReleaseOrphaned,
		OnReady: func() {
			r.mu.Lock()
			delete(r.failures, crdName)
			r.restartBackoff().Forget(crdName)
			r.mu.Unlock()
			r.notify(api.Connection)
		},
		OnFailed: func(err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.failures == nil {
				r.failures = map[string]failure{}
			}
			delay := r.restartBackoff().When(crdName)
			r.failures[crdName] = failure{err: err, retryAt: time.Now().Add(delay)}
			r.scheduleRestartLocked(crdName, api.Connection, delay)
		},
	})
}

// Drain releases the consumer objects of an API that a deleting binding
// covered and no live binding still covers (SYNC-D): owned provider copies
// are deleted and the finalizer released once they are gone. It returns
// how many objects still wait. With no provider session the objects wait
// (unreachable); when the Connection itself is gone they are released and
// an Event names the provider copies left behind. The objects are released
// by a releaser of their own, the Syncers' deletion logic (release.go),
// whether or not a Syncer runs for the API.
func (r *Registry) Drain(ctx context.Context, crdName, connection, namespace string, allNamespaces bool, regarding client.Object) (int, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != connection {
		return 0, nil // not this Connection's CRD: nothing of ours to drain
	}
	api, ok, err := r.resolve(ctx, crdName)
	if err != nil {
		return 0, err
	}
	gvk, _ := kbindschema.StorageGVK(crd)
	scope := Scope{}
	if ok {
		if scope, err = r.scopeOf(ctx, api); err != nil {
			return 0, err
		}
	}
	objs, err := r.listConsumer(ctx, crdName, gvk, namespace, allNamespaces)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", crdName, err)
	}
	rel := &releaser{reporter: reporter{target: api.Target, results: r.Results, events: r.Events}, consumer: r.Consumer, session: api.Session}
	draining := leftScope(objs.Items, scope)
	if ok {
		return rel.drain(ctx, draining)
	}
	conn := &kbindv1alpha1.Connection{}
	connGone := apierrors.IsNotFound(r.Consumer.Get(ctx, client.ObjectKey{Name: connection}, conn))
	remaining, abandoned, err := rel.abandon(ctx, draining, connGone)
	if err != nil {
		return 0, err
	}
	if len(abandoned) > 0 && regarding != nil {
		r.Events.Eventf(regarding, nil, corev1.EventTypeWarning, "ProviderCopiesLeft", "Drain",
			"Connection %s is gone: released %d object(s) of %s without deleting their provider copies, left for the backend reaper: %v",
			connection, len(abandoned), crdName, abandoned)
	}
	return remaining, nil
}

// Running reports whether a Syncer runs for the API and syncs (its
// informers have synced).
func (r *Registry) Running(crdName string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.syncers[crdName]
	return ok && s.Ready()
}

// scheduleRestartLocked wakes the Connection's bindings once the restart
// backoff of a failed Syncer has run out, so that they restart it; mu is
// held. Nothing is scheduled once the registry has stopped.
func (r *Registry) scheduleRestartLocked(crdName, connection string, delay time.Duration) {
	if r.stopped {
		return
	}
	if r.restarts == nil {
		r.restarts = map[string]*time.Timer{}
	}
	if prev := r.restarts[crdName]; prev != nil {
		prev.Stop()
	}
	r.restarts[crdName] = time.AfterFunc(delay, func() { r.notify(connection) })
}

// Start runs the registry as a manager.Runnable: it blocks until ctx ends,
// then stops every Syncer and waits for them (StopAll). Syncers are
// started by Reconcile, not here: Start only bounds their lifetime by the
// manager's.
func (r *Registry) Start(ctx context.Context) error {
	<-ctx.Done()
	r.StopAll()
	return nil
}

// NeedLeaderElection is true: Syncers write to both clusters, so they run
// only in the elected konnector (they are started from the binding
// controllers, which run only there too).
func (r *Registry) NeedLeaderElection() bool { return true }

// StopAll stops every Syncer and waits until they have, cancels the
// pending restarts, and makes Reconcile start nothing from then on
// (shutdown).
func (r *Registry) StopAll() {
	r.mu.Lock()
	r.stopped = true
	syncers := r.syncers
	r.syncers = nil
	for _, t := range r.restarts {
		t.Stop()
	}
	r.restarts = nil
	r.mu.Unlock()
	for _, s := range syncers {
		s.Stop()
	}
}

// References are the field paths of the binding's relatedResources entries
// that name related objects through the objects of consumer API crd (the
// entry of spec.apis it is the consumer API of), each once, in
// order; an entry whose path does not parse names nothing.
func References(spec kbindv1alpha1.BindingSpec, crd string) []fieldpath.Path {
	var out []fieldpath.Path
	seen := map[string]bool{}
	// reference.api names the entry of spec.apis by the provider's name.
	entry, listed := spec.APIFor(crd)
	for _, e := range spec.RelatedResources {
		if !listed || e.Reference == nil || e.Reference.API != entry.Name || seen[e.Reference.FieldPath] {
			continue
		}
		p, err := fieldpath.Parse(e.Reference.FieldPath)
		if err != nil {
			continue // the binding reports it (related.planEntries)
		}
		seen[e.Reference.FieldPath] = true
		out = append(out, p)
	}
	return out
}
