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

package syncer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/kbind/kbind/engine/mutation"
	"github.com/kbind/kbind/engine/providerevents"
	"github.com/kbind/kbind/engine/routing"
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
	// ImportAbsenceWindow is passed to every Syncer (see Options).
	ImportAbsenceWindow time.Duration
	// DeselectionGrace is passed to every Syncer (see Options): the engine
	// gives two binding resync intervals.
	DeselectionGrace time.Duration

	mu       sync.Mutex
	syncers  map[Route]*Syncer
	failures map[Route]failure
	backoff  workqueue.TypedRateLimiter[Route]
	// used records, per route, the kinds whose informers the registry made
	// the caches start (consumer and provider), so Forget can stop them.
	used map[Route]map[usedInformer]bool
	// restarts are the pending wake-ups of failed Syncers, by route, due
	// when their restart backoff runs out; StopAll cancels them.
	restarts map[Route]*time.Timer
	// compatible records, per route through a Connection other than the
	// consumer CRD's schema owner, whether that Connection's provider
	// schema is compatible with the CRD (the binding reconciler checks it,
	// SetCompatible); a route not recorded does not sync yet.
	compatible map[Route]bool
	// stopped is set by StopAll: no Syncer starts any more.
	stopped bool

	// started, when set (tests), sees every Syncer the registry starts.
	started func(*Syncer)
}

// Route is one consumer API served through one Connection: the registry
// runs a Syncer per route. An API has one route per Connection whose
// bindings list it (docs/bindings.md#one-api-several-providers).
type Route struct {
	// CRD is the consumer CRD's name.
	CRD string
	// Connection names the Connection.
	Connection string
}

func (r Route) String() string { return r.CRD + " through Connection " + r.Connection }

// failure is the last start failure of a route's Syncer and when it may be
// started again.
type failure struct {
	err     error
	retryAt time.Time
}

// newRestartBackoff is how long a failed Syncer waits before it is started
// again: 1s after the first failure, doubling, at most a minute; reset once
// it syncs.
func newRestartBackoff() workqueue.TypedRateLimiter[Route] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[Route](time.Second, time.Minute)
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

// recordInformer records the consumer informer of a route.
func (r *Registry) recordInformer(rt Route, gvk schema.GroupVersionKind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordInformerLocked(rt, gvk, nil, schema.GroupVersionKind{})
}

// recordInformerLocked records the informers of a route: the consumer's at
// gvk and, with a session, the provider's at providerGVK; mu is held.
func (r *Registry) recordInformerLocked(rt Route, gvk schema.GroupVersionKind, sess *session.Session, providerGVK schema.GroupVersionKind) {
	if r.used == nil {
		r.used = map[Route]map[usedInformer]bool{}
	}
	if r.used[rt] == nil {
		r.used[rt] = map[usedInformer]bool{}
	}
	// A stopped session's cache stopped its informers; recording it any
	// longer would keep the session — its caches, clients and REST mapper
	// — alive after every credential rotation (measured: ~200 rotations,
	// +120 MiB).
	for inf := range r.used[rt] {
		if inf.session != nil && inf.session.Stopped() {
			delete(r.used[rt], inf)
		}
	}
	r.used[rt][usedInformer{gvk: gvk}] = true
	if sess != nil {
		r.used[rt][usedInformer{gvk: providerGVK, session: sess}] = true
	}
}

// Forget releases everything held for an API's route through connection
// once no binding through connection lists the API any more: its Syncer,
// its per-object results, and the informers started for it on the
// consumer and provider caches that no other route uses (so that unbound
// APIs cost nothing, and a deleted CRD leaves no watch retrying forever).
func (r *Registry) Forget(ctx context.Context, crdName, connection string) {
	rt := Route{CRD: crdName, Connection: connection}
	r.mu.Lock()
	current := r.syncers[rt]
	delete(r.syncers, rt)
	delete(r.failures, rt)
	delete(r.compatible, rt)
	r.restartBackoff().Forget(rt)
	used := r.used[rt]
	delete(r.used, rt)
	r.mu.Unlock()
	if current != nil {
		current.Stop()
	}
	r.removeInformers(ctx, used)
	for inf := range used {
		r.Results.drop(connection, inf.gvk.GroupKind())
	}
}

// SetCompatible records whether the provider schema of connection, which
// is not the schema owner of the consumer CRD crdName, is compatible with
// that CRD: only then does the route sync.
func (r *Registry) SetCompatible(crdName, connection string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.compatible == nil {
		r.compatible = map[Route]bool{}
	}
	r.compatible[Route{CRD: crdName, Connection: connection}] = ok
}

func (r *Registry) isCompatible(rt Route) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compatible[rt]
}

// takeInformersLocked removes from the record the informers of an API at
// gvk (on every cache) and returns them; mu is held.
func (r *Registry) takeInformersLocked(rt Route, gvk schema.GroupVersionKind) map[usedInformer]bool {
	taken := map[usedInformer]bool{}
	for inf := range r.used[rt] {
		if inf.gvk == gvk {
			taken[inf] = true
			delete(r.used[rt], inf)
		}
	}
	return taken
}

// takeSessionInformersLocked removes from the record the informers of an
// API on one provider session's cache and returns them; mu is held.
func (r *Registry) takeSessionInformersLocked(rt Route, sess *session.Session) map[usedInformer]bool {
	taken := map[usedInformer]bool{}
	for inf := range r.used[rt] {
		if inf.session != nil && inf.session == sess {
			taken[inf] = true
			delete(r.used[rt], inf)
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
// that the binding's filters select (objects: nil, every one; namespaces:
// a NamespacesSelected predicate, read once per namespace and shared with
// the caller, or nil for every namespace), from the consumer cache — the
// informer its Syncer uses, no second one. The binding controllers count
// about once a second while objects sync: without a namespace filter the
// count is the list's length, not a walk through every object.
func (r *Registry) Count(ctx context.Context, rt Route, gvk schema.GroupVersionKind, namespace string, allNamespaces bool,
	objects labels.Selector, namespaces func(namespace string) bool, failed func() error) (int32, error) {
	crdName := rt.CRD
	// Only the number is needed: the cached objects are not copied.
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if objects != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: objects})
	}
	list, err := r.listConsumer(ctx, rt, gvk, namespace, allNamespaces, opts...)
	if err != nil {
		return 0, fmt.Errorf("counting %s: %w", crdName, err)
	}
	n := int32(len(list.Items))
	if namespaces != nil {
		n = 0
		for i := range list.Items {
			if namespaces(list.Items[i].GetNamespace()) {
				n++
			}
		}
	}
	if err := failed(); err != nil {
		return 0, fmt.Errorf("counting %s: %w", crdName, err)
	}
	return n, nil
}

// NamespacesSelected is whether a namespace's labels (read from the
// consumer cache, once per namespace) match namespaces: a gone namespace
// matches nothing, and one whose labels could not be read matches nothing
// either and is what failed returns. A nil namespaces selects every
// namespace, without a read.
func (r *Registry) NamespacesSelected(ctx context.Context, namespaces labels.Selector) (selected func(namespace string) bool, failed func() error) {
	if namespaces == nil {
		return func(string) bool { return true }, func() error { return nil }
	}
	seen := map[string]bool{}
	var firstErr error
	return func(ns string) bool {
			in, known := seen[ns]
			if !known {
				nsLabels, err := namespaceLabels(ctx, r.Cache, ns)
				if client.IgnoreNotFound(err) != nil && firstErr == nil {
					firstErr = fmt.Errorf("reading namespace %s: %w", ns, err)
				}
				in = err == nil && namespaces.Matches(labels.Set(nsLabels))
				seen[ns] = in
			}
			return in
		}, func() error {
			return firstErr
		}
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
func (r *Registry) listConsumer(ctx context.Context, rt Route, gvk schema.GroupVersionKind, namespace string, allNamespaces bool,
	opts ...client.ListOption) (*unstructured.UnstructuredList, error) {
	r.recordInformer(rt, gvk)
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
	syncing := false
	for running := range r.syncers {
		syncing = syncing || running.CRD == rt.CRD
	}
	r.mu.Unlock()
	if !syncing {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		_ = r.Cache.RemoveInformer(ctx, obj)
	}
	return nil, fmt.Errorf("the consumer cache did not sync within %s (is the API still served?): %w", cacheSyncTimeout, err)
}

// LastError is the error the route's Syncer last failed with, "" when it
// runs or has not failed since it last synced.
func (r *Registry) LastError(rt Route) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.failures[rt]; ok {
		return f.err.Error()
	}
	return ""
}

// Refused is the access refusal the route's Syncer last failed with (a
// side refuses the konnector the list of the API: see AccessRefused), ""
// when it failed otherwise or not at all.
func (r *Registry) Refused(rt Route) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.failures[rt]; ok {
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

// resolve reads the consumer CRD and, for the route through connection,
// that Connection and its session. ok is false when the route cannot sync
// now (no CRD, not established, Connection not Ready, no session, or — for
// a Connection other than the CRD's schema owner, when compatible is
// asked for — its provider schema not found compatible).
func (r *Registry) resolve(ctx context.Context, rt Route, compatible bool) (API, bool, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: rt.CRD}, crd); err != nil {
		return API{}, false, client.IgnoreNotFound(err)
	}
	owner := crd.Annotations[kbindv1alpha1.ConnectionAnnotation]
	if owner == "" || !established(crd) || (compatible && rt.Connection != owner && !r.isCompatible(rt)) {
		return API{crd: crd}, false, nil
	}
	conn := &kbindv1alpha1.Connection{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: rt.Connection}, conn); err != nil {
		return API{crd: crd}, false, client.IgnoreNotFound(err)
	}
	if !ConnectionUsable(conn) {
		return API{crd: crd}, false, nil
	}
	sess, ok := r.Sessions.Get(rt.Connection)
	if !ok {
		return API{crd: crd}, false, nil
	}
	version := kbindschema.StorageVersion(crd)
	if version == nil {
		return API{crd: crd}, false, nil
	}
	return API{
		CRD: rt.CRD, ProviderAPI: kbindschema.ProviderAPI(crd), Connection: rt.Connection, Session: sess, Conn: conn, crd: crd,
		Target: Target{
			Connection:  rt.Connection,
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
// drain, and keep syncing until they are deleted (CONN-7, SYNC-D) — or
// its deletion is held by spec.deletionProtection (Ready=False,
// DeletionProtected, still Connected): a held Connection works as before
// while the operator decides (docs/connections.md#deletion-protection).
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
		waiting := ready.Reason == string(kbindv1alpha1.ReasonDrainingBindings) || ready.Reason == string(kbindv1alpha1.ReasonDeletionProtected)
		return !conn.DeletionTimestamp.IsZero() && waiting &&
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

// scopesOf computes, for every Connection whose live bindings list the
// consumer API crd, the scope they claim (docs/bindings.md#one-api-several-providers):
//
//   - a ClusterBinding claims the namespaces its namespaceSelector selects
//     (every one without), and cluster-scoped objects; the first one per
//     Connection gives that Connection's cluster policy;
//   - a Binding claims its namespace when no ClusterBinding of the API
//     (through any Connection) covers it — a ClusterBinding takes
//     precedence (BIND-2) — and its Connection admits it (BIND-3);
//   - bindings through different Connections that could both claim one
//     object are refused, the later one (routing.Refusals), and claim
//     nothing; deleting bindings drain and claim nothing, unless their
//     deletion is held (Claiming).
//
// Claims come from the bindings alone, never from a Connection's health or
// schema compatibility, so that another route never takes an object over
// because a provider is unreachable. Each scope lists the others' as
// Elsewhere. A binding whose filters do not parse claims everything it
// could, selecting nothing itself: nothing of it syncs and nothing it
// could cover is released (the binding says so).
func (r *Registry) scopesOf(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (map[string]Scope, error) {
	own, claimed, err := r.claimsOf(ctx, crd, "")
	if err != nil {
		return nil, err
	}
	return withElsewhere(own, claimed), nil
}

// claimsOf computes what scopesOf does, per Connection: own, the scopes
// its valid bindings give its Syncer, and claimed, everything its live
// bindings claim, a binding whose filters do not parse claiming every
// namespace it could. The binding of UID except (a binding being drained;
// "" for none) claims nothing. A failed read is an error, never fewer
// claims.
func (r *Registry) claimsOf(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, except types.UID) (own, claimed map[string]Scope, err error) {
	byAPI := client.MatchingFields{index.BindingAPI: crd.Name}
	cbs, err := index.ListBindings(ctx, r.Consumer, index.ClusterBindings, byAPI)
	if err != nil {
		return nil, nil, fmt.Errorf("the bindings of %s: %w", crd.Name, err)
	}
	var bs []kbindv1alpha1.BindingObject
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		if bs, err = index.ListBindings(ctx, r.Consumer, index.Bindings, byAPI); err != nil {
			return nil, nil, fmt.Errorf("the bindings of %s: %w", crd.Name, err)
		}
	}
	refused := Refusals(crd.Name, crd, append(append([]kbindv1alpha1.BindingObject{}, cbs...), bs...))
	// own are the scopes the Connections' Syncers sync; claimed what each
	// claims for the others' Elsewhere, where a binding whose filters do
	// not parse claims everything it could.
	own, claimed = map[string]Scope{}, map[string]Scope{}
	var covering []labels.Selector // the live ClusterBindings' namespace selectors (nil: every namespace)
	for _, cb := range cbs {
		if !claims(cb, crd, refused) || (except != "" && cb.GetUID() == except) {
			continue
		}
		covering = append(covering, coverage(*cb.BindingSpec()))
		p, err := policyOf(*cb.BindingSpec(), crd.Name, MutationLimits(cb))
		p.KeptBy = KeptByProtection(cb)
		if err != nil {
			// The binding says so (Filters); its objects wait, untouched.
			log.FromContext(ctx).V(1).Info("A ClusterBinding gives no scope: its filters do not parse", "binding", cb.GetName(), "error", err.Error())
		}
		addClaim(own, claimed, cb.BindingSpec().ConnectionRef.Name, "", p, err == nil)
	}
	if err := r.addBindingClaims(ctx, crd, bs, refused, covering, except, own, claimed); err != nil {
		return nil, nil, err
	}
	return own, claimed, nil
}

// addBindingClaims adds the claims of the namespaced Bindings bs of the
// consumer API crd: a Binding claims its namespace when no ClusterBinding
// covers it (covering) and its Connection admits it.
func (r *Registry) addBindingClaims(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, bs []kbindv1alpha1.BindingObject,
	refused map[routing.ClaimKey]string, covering []labels.Selector, except types.UID, own, claimed map[string]Scope) error {
	for _, b := range bs {
		if !claims(b, crd, refused) || (except != "" && b.GetUID() == except) {
			continue
		}
		conn, ns := b.BindingSpec().ConnectionRef.Name, b.GetNamespace()
		covered, err := coveredByClusterBinding(ctx, r.Cache, covering, ns)
		if err != nil {
			return err
		}
		if covered {
			continue
		}
		admitted, err := r.admits(ctx, conn, ns)
		if err != nil {
			return err
		}
		if !admitted {
			continue
		}
		p, err := policyOf(*b.BindingSpec(), crd.Name, MutationLimits(b))
		p.KeptBy = KeptByProtection(b)
		if err != nil {
			log.FromContext(ctx).V(1).Info("A Binding gives no scope: its filters do not parse", "binding", ns+"/"+b.GetName(), "error", err.Error())
		}
		addClaim(own, claimed, conn, ns, p, err == nil)
	}
	return nil
}

// withElsewhere gives each Connection's own scope the claims of the
// others, in a stable order (a scope that did not change compares equal).
func withElsewhere(own, claimed map[string]Scope) map[string]Scope {
	for conn := range claimed {
		sc, ok := own[conn]
		if !ok {
			sc = Scope{Namespaces: map[string]Policy{}}
		}
		for _, other := range slices.Sorted(maps.Keys(claimed)) {
			if other != conn {
				osc := claimed[other]
				osc.Connection = other
				sc.Elsewhere = append(sc.Elsewhere, osc)
			}
		}
		own[conn] = sc
	}
	return own
}

// addClaim adds a binding's claim — on namespace, or cluster-wide when ""
// — through conn with policy p: to the Connection's own scope when its
// filters parse (valid), and to what it claims for the others either way
// (a binding whose filters do not parse claims everything it could).
// The first claim of a namespace, or cluster-wide, per Connection wins.
func addClaim(own, claimed map[string]Scope, conn, namespace string, p Policy, valid bool) {
	if valid {
		addTo(own, conn, namespace, p)
	} else {
		p = Policy{}
	}
	addTo(claimed, conn, namespace, p)
}

func addTo(scopes map[string]Scope, conn, namespace string, p Policy) {
	sc, ok := scopes[conn]
	if !ok {
		sc = Scope{Namespaces: map[string]Policy{}}
	}
	switch {
	case namespace != "":
		if _, taken := sc.Namespaces[namespace]; !taken {
			sc.Namespaces[namespace] = p
		}
	case !sc.Cluster:
		sc.Cluster, sc.ClusterPolicy = true, p
	}
	scopes[conn] = sc
}

// admits reports whether connection admits Bindings in namespace (BIND-3);
// a Connection that cannot be read admits them — a claim, never a
// release: its route does not sync anyway.
func (r *Registry) admits(ctx context.Context, connection, namespace string) (bool, error) {
	conn := &kbindv1alpha1.Connection{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: connection}, conn); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	d, err := admission.Admits(ctx, r.Consumer, conn, namespace)
	return d.Admitted, err
}

// coverage is the namespaces a ClusterBinding covers for precedence: its
// namespaceSelector, nil (every namespace) when unset or when it does not
// parse — a binding that says nothing clearly claims everything it might.
func coverage(spec kbindv1alpha1.BindingSpec) labels.Selector {
	if spec.NamespaceSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector)
	if err != nil {
		return nil
	}
	return sel
}

// coveredByClusterBinding reports whether one of the ClusterBindings'
// namespace selectors (nil: every namespace) covers namespace, whose
// labels come from the consumer cache. A namespace that cannot be found
// is covered by selector-less ones only; a failed read is an error.
func coveredByClusterBinding(ctx context.Context, c client.Reader, selectors []labels.Selector, namespace string) (bool, error) {
	var nsLabels map[string]string
	read := false
	for _, sel := range selectors {
		if sel == nil {
			return true, nil
		}
		if !read {
			var err error
			if nsLabels, err = namespaceLabels(ctx, c, namespace); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("reading the labels of namespace %s: %w", namespace, err)
			}
			read = true
		}
		if sel.Matches(labels.Set(nsLabels)) {
			return true, nil
		}
	}
	return false, nil
}

// claims reports whether b is a live binding whose entry for the consumer
// API crd is the one the CRD serves (another entry, projecting another
// provider API onto the same consumer name, is refused: Collision), and
// that no earlier binding through another Connection refuses (refused).
func claims(b kbindv1alpha1.BindingObject, crd *apiextensionsv1.CustomResourceDefinition, refused map[routing.ClaimKey]string) bool {
	if !Claiming(b) {
		return false
	}
	if _, no := refused[RoutingKey(b)]; no {
		return false
	}
	entry, ok := b.BindingSpec().APIFor(crd.Name)
	return ok && kbindschema.Serves(entry, crd)
}

// policyOf is how a binding syncs the objects of consumer API crd, its
// mutations under limits; an error when its filters do not parse or its
// mutations do not compile (the binding says so).
func policyOf(spec kbindv1alpha1.BindingSpec, crd string, limits mutation.Limits) (Policy, error) {
	p := Policy{Conflict: spec.ConflictPolicy, References: References(spec, crd),
		ForwardEvents: spec.ProviderEvents != kbindv1alpha1.ProviderEventsIgnore, Deletion: spec.DeletionPolicy}
	if entry, ok := spec.APIFor(crd); ok {
		p.Import = entry.ProviderObjects == kbindv1alpha1.ProviderObjectsImport
	}
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
	if p.Up, p.Down, err = Mutations(spec, crd, limits); err != nil {
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

// Reconcile makes the Syncers of the API named by its consumer CRD — one
// per route, a Connection whose bindings claim some of its objects — match
// the current bindings, CRD and Connections.
func (r *Registry) Reconcile(ctx context.Context, crdName string) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	scopes := map[string]Scope{}
	// Before any read: the claims are at least as fresh as this.
	computedAt := time.Now()
	switch err := r.Consumer.Get(ctx, client.ObjectKey{Name: crdName}, crd); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading consumer CRD %s: %w", crdName, err)
	default:
		if scopes, err = r.scopesOf(ctx, crd); err != nil {
			return err
		}
	}
	connections := map[string]bool{}
	for conn := range scopes {
		connections[conn] = true
	}
	r.mu.Lock()
	for rt := range r.syncers {
		if rt.CRD == crdName {
			connections[rt.Connection] = true
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, conn := range slices.Sorted(maps.Keys(connections)) {
		if err := r.reconcileRoute(ctx, Route{CRD: crdName, Connection: conn}, scopes[conn], computedAt); err != nil {
			errs = append(errs, fmt.Errorf("the route through Connection %s: %w", conn, err))
		}
	}
	return errors.Join(errs...)
}

// reconcileRoute makes the Syncer of one route match its scope, CRD and
// Connection. Concurrent calls for one route (the ClusterBinding and
// Binding controllers) are safe: every decision is taken under the lock
// on the registry's current state, and after stopping a Syncer (which
// happens unlocked) the state is read again — another call may have
// started one meanwhile, which is then kept or replaced, never
// overwritten and left running.
func (r *Registry) reconcileRoute(ctx context.Context, rt Route, scope Scope, computedAt time.Time) error {
	api, ok, err := r.resolve(ctx, rt, true)
	if err != nil {
		return err
	}
	want := ok && !scope.empty()
	for {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return nil // the manager is stopping: start nothing
		}
		if r.syncers == nil {
			r.syncers = map[Route]*Syncer{}
		}
		current := r.syncers[rt]
		f, failed := r.failures[rt]
		switch nextStep(current, want, api, failed && time.Now().Before(f.retryAt)) {
		case stepWait, stepDone:
			r.mu.Unlock()
			return nil
		case stepForget:
			delete(r.syncers, rt)
			r.mu.Unlock()
			// A failed Syncer kept kbind_syncer_ready at 0; a restart sets
			// it again, and an API no longer bound has none.
			current.forgetReadyMetric()
		case stepStop:
			delete(r.syncers, rt)
			var stale map[usedInformer]bool
			switch {
			case !want:
				// Nothing of the route syncs (its bindings are covered by a
				// ClusterBinding through another Connection, BIND-3, or its
				// Connection is not usable): its provider watch goes, its
				// session stays for its other APIs.
				stale = r.takeSessionInformersLocked(rt, current.session)
			case current.target.GVK != api.Target.GVK:
				// The storage version changed: the next Syncer watches the
				// new version, and nothing reads the old one any more.
				stale = r.takeInformersLocked(rt, current.target.GVK)
				for inf := range r.takeInformersLocked(rt, current.target.ProviderGVK) {
					stale[inf] = true
				}
			}
			r.mu.Unlock()
			current.Stop()
			r.removeInformers(ctx, stale)
			log.FromContext(ctx).Info("Stopped syncer", "crd", rt.CRD, "connection", rt.Connection)
		case stepRescope:
			r.mu.Unlock()
			current.SetScope(ctx, scope, computedAt)
			return nil
		case stepStart:
			r.recordInformerLocked(rt, api.Target.GVK, api.Session, api.Target.ProviderGVK)
			logger := log.FromContext(ctx).WithValues("crd", rt.CRD, "connection", rt.Connection)
			s := r.newSyncer(rt, api)
			s.scope, s.scopeAt = scope, computedAt
			s.prepare(log.IntoContext(api.Session.Context(), logger))
			r.syncers[rt] = s
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
func (r *Registry) restartBackoff() workqueue.TypedRateLimiter[Route] {
	if r.backoff == nil {
		r.backoff = newRestartBackoff()
	}
	return r.backoff
}

// newSyncer builds the Syncer of a route, reporting its readiness and
// failures back to the registry; mu is held.
func (r *Registry) newSyncer(rt Route, api API) *Syncer {
	if r.EventLimiter == nil {
		r.EventLimiter = providerevents.NewLimiter(providerevents.DefaultLimits)
	}
	limiter := r.EventLimiter
	return New(Options{
		Target: api.Target, Consumer: r.Consumer, Cache: r.Cache, Session: api.Session,
		Events: r.Events, Results: r.Results, Workers: r.Workers, EventLimiter: limiter, ReleaseOrphaned: r.ReleaseOrphaned,
		ImportAbsenceWindow: r.ImportAbsenceWindow,
		DeselectionGrace:    r.DeselectionGrace,
		OnReady: func() {
			r.mu.Lock()
			delete(r.failures, rt)
			r.restartBackoff().Forget(rt)
			r.mu.Unlock()
			r.notify(api.Connection)
		},
		OnFailed: func(err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.failures == nil {
				r.failures = map[Route]failure{}
			}
			delay := r.restartBackoff().When(rt)
			r.failures[rt] = failure{err: err, retryAt: time.Now().Add(delay)}
			r.scheduleRestartLocked(rt, delay)
		},
	})
}

// Drain releases the consumer objects of an API that a deleting binding
// through connection covered and that no live binding still claims
// (SYNC-D): owned provider copies are deleted and the finalizer released
// once they are gone. It returns how many objects still wait. An object
// another Connection's binding claims now is left to that route and keeps
// its finalizer (its copy on this Connection's provider stays, as after a
// takeover, BIND-3). What live bindings claim is read from the bindings
// whatever the Connection's state: an object another live binding of the
// Connection covers is never this drain's, and an imported copy stays
// while a live binding of the Connection claims its namespace (its scope
// decides). With no provider session the objects wait
// (unreachable); when the Connection itself is gone they are released and
// an Event on binding names the provider copies left behind; they are
// released under binding's spec.deletionPolicy (an object's annotation
// wins). The objects are released
// by a releaser of their own, the Syncers' deletion logic (release.go),
// whether or not a Syncer runs for the route.
//
// A live binding whose spec.deletionProtection is true (an API removed
// from its spec.apis, BIND-5: KeptByProtection) deletes nothing: each
// owned copy of an object that is not being deleted itself is marked kept
// (releaser.keepProtected) and its finalizer released, and the imported
// copies stay on the consumer (no longer updated; deleting them loses
// nothing on the provider, but a protected binding deletes nothing in
// bulk, and they are what the consumer's users see of the provider's
// objects). A deleting binding drains as before.
func (r *Registry) Drain(ctx context.Context, crdName, connection, namespace string, allNamespaces bool, binding kbindv1alpha1.BindingObject) (int, error) {
	rt := Route{CRD: crdName, Connection: connection}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Consumer.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if crd.Annotations[kbindv1alpha1.ConnectionAnnotation] == "" {
		return 0, nil // not kbind's CRD: nothing of ours to drain
	}
	// What the live bindings claim comes from the bindings alone, whatever
	// the Connection's state (issue #52): an unusable Connection never
	// widens what a drain takes. Claims that cannot be read are an error:
	// nothing is released, and the drain is retried. The drained binding
	// itself claims nothing, even one whose deletion protection would
	// hold it elsewhere (a Binding whose namespace is being deleted).
	own, claimed, err := r.claimsOf(ctx, crd, binding.GetUID())
	if err != nil {
		return 0, err
	}
	imports := claimed[connection] // before withElsewhere, which adds to own
	scope := withElsewhere(own, claimed)[connection]
	// A drain needs no compatible schema: it deletes the copies the route
	// made, read by their provider names.
	api, ok, err := r.resolve(ctx, rt, false)
	if err != nil {
		return 0, err
	}
	gvk, _ := kbindschema.StorageGVK(crd)
	objs, err := r.listConsumer(ctx, rt, gvk, namespace, allNamespaces)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", crdName, err)
	}
	// A copy this route made of an object that moved may be left even
	// when the new route has not taken the object's finalizer yet.
	draining, moved, to, err := r.claimedElsewhere(ctx, uncoveredBy(objs.Items, scope), scope)
	if err != nil {
		return 0, err
	}
	// Without a session api.Target is empty: the route's Connection still
	// tells its objects from another route's (routedElsewhere).
	target := api.Target
	target.Connection = connection
	rel := &releaser{reporter: reporter{target: target, results: r.Results, events: r.Events}, consumer: r.Consumer, session: api.Session,
		duplicate: verdictOf(api.Session)}
	// An imported copy stays while any live binding of this Connection
	// claims its namespace, one whose filters do not parse included: that
	// binding's scope decides (Syncer.importScope), never this drain.
	keptBy := KeptByProtection(binding)
	if keptBy == "" {
		if err := r.dropImported(ctx, rel, uncoveredBy(objs.Items, imports), connection, crdName, binding); err != nil {
			return 0, err
		}
	}
	draining = holdingFinalizer(draining)
	// The objects are released under the draining binding's
	// spec.deletionPolicy, unless their annotation says otherwise.
	def := binding.BindingSpec().DeletionPolicy
	if ok {
		if err := rel.releaseMovedAll(ctx, moved, to, def); err != nil {
			return 0, err
		}
		return rel.drain(ctx, draining, def, keptBy)
	}
	conn := &kbindv1alpha1.Connection{}
	connGone := apierrors.IsNotFound(r.Consumer.Get(ctx, client.ObjectKey{Name: connection}, conn))
	remaining, abandoned, err := rel.abandon(ctx, draining, connGone, def)
	if err != nil {
		return 0, err
	}
	if len(abandoned) > 0 {
		r.Events.Eventf(binding, nil, corev1.EventTypeWarning, "ProviderCopiesLeft", "Drain",
			"Connection %s is gone: released %d object(s) of %s without deleting their provider copies, left for the backend reaper: %v",
			connection, len(abandoned), crdName, abandoned)
	}
	return remaining, nil
}

// dropImported deletes the imported copies (core.kbind.io/owner:
// provider) that Connection connection made among objs, the objects a
// drained binding no longer covers: the binding that imported them is
// going, or lists the API no more. Their provider objects stay; a user's
// object, or another Connection's copy, is never among them.
func (r *Registry) dropImported(ctx context.Context, rel *releaser, objs []*unstructured.Unstructured, connection, crdName string, binding kbindv1alpha1.BindingObject) error {
	var dropped []string
	for _, obj := range objs {
		deleted, err := rel.deleteImported(ctx, obj, connection)
		if err != nil {
			return fmt.Errorf("draining %s: %w", crdName, err)
		}
		if deleted {
			dropped = append(dropped, client.ObjectKeyFromObject(obj).String())
		}
	}
	if n := len(dropped); n > 0 {
		named := strings.Join(dropped[:min(n, 10)], ", ")
		if n > 10 {
			named += fmt.Sprintf(" and %d more", n-10)
		}
		r.Events.Eventf(binding, nil, corev1.EventTypeNormal, "ImportedObjectsDeleted", "Drain",
			"deleted %d imported object(s) of %s that this binding no longer imports (their provider objects stay): %s", n, crdName, named)
	}
	return nil
}

// claimedElsewhere splits objs into those no other Connection's binding
// claims (draining) and those one does (moved, with the Connection each
// moved to): they are that route's now.
func (r *Registry) claimedElsewhere(ctx context.Context, objs []*unstructured.Unstructured, scope Scope) (
	draining, moved []*unstructured.Unstructured, to map[client.ObjectKey]string, err error) {
	to = map[client.ObjectKey]string{}
	for _, obj := range objs {
		var nsLabels map[string]string
		if ns := obj.GetNamespace(); ns != "" && scope.selectsNamespaces() {
			if nsLabels, err = namespaceLabels(ctx, r.Cache, ns); client.IgnoreNotFound(err) != nil {
				return nil, nil, nil, fmt.Errorf("reading the labels of namespace %s: %w", ns, err)
			}
		}
		if conn := scope.claimedElsewhere(obj.GetNamespace(), nsLabels, obj.GetLabels()); conn != "" {
			moved = append(moved, obj)
			to[client.ObjectKeyFromObject(obj)] = conn
			continue
		}
		draining = append(draining, obj)
	}
	return draining, moved, to, nil
}

// Running reports whether a Syncer runs for the route and syncs (its
// informers have synced).
func (r *Registry) Running(rt Route) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.syncers[rt]
	return ok && s.Ready()
}

// scheduleRestartLocked wakes the Connection's bindings once the restart
// backoff of a failed Syncer has run out, so that they restart it; mu is
// held. Nothing is scheduled once the registry has stopped.
func (r *Registry) scheduleRestartLocked(rt Route, delay time.Duration) {
	if r.stopped {
		return
	}
	if r.restarts == nil {
		r.restarts = map[Route]*time.Timer{}
	}
	if prev := r.restarts[rt]; prev != nil {
		prev.Stop()
	}
	r.restarts[rt] = time.AfterFunc(delay, func() { r.notify(rt.Connection) })
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
