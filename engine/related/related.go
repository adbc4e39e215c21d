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

// Package related copies the Secrets and ConfigMaps a binding's
// relatedResources select between the clusters (SYNC-R1..R5): same
// namespace and name, in the declared direction, owned per (binding,
// entry), never overwriting a target that is not the binding's. An entry
// selects by labels and names, or by reference: the object a field of
// each bound object names, whose copy lives and dies with that object
// (reference.go).
//
// It reads only through informers it owns: sources through informers
// selected server-side by each entry's label selector or names (in the
// binding's namespace for a Binding), copies through informers selected by
// kbind's labels. Informers are shared between bindings, reference-counted,
// and stopped when no binding needs them; a provider's die with its
// session, and all of them when the Copier stops (Start: it is the
// manager.Runnable that bounds their lifetime). Nothing is listed per
// reconcile, and a source or copy that could not be read is never taken
// for absent. A pass never waits for an
// informer to list (the first list re-queues the binding), and the
// bindings of one consumer namespace hold at most a budget of source
// informers (Options.WatchesPerNamespace): one namespace can neither slow
// the others down nor open unbounded watches.
//
// Under Namespace isolation a Binding's FromProvider entry copies only its
// own namespace's provider objects ("<namespace>.<name>", see
// entryPlan.copyName): every consumer namespace's objects share one
// provider namespace there.
//
// Requirement ids in comments (such as SYNC-R4) refer to docs/requirements.md.
package related

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/internal/goroutines"
	"github.com/kbind/kbind/engine/internal/namespace"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/session"
)

// Binding is what the copier needs of a ClusterBinding or Binding.
type Binding struct {
	// Object is the binding, for Events.
	Object client.Object
	// UID identifies the binding in copies' related-binding annotation.
	UID string
	// Namespace scopes a Binding; "" means every namespace.
	Namespace string
	// Connection names the binding's Connection: informer events re-queue
	// its bindings.
	Connection string
	Entries    []kbindv1alpha1.RelatedResource
	// ClusterUID is the consumer cluster's identity ("" when unknown: then
	// only consumer-side copies can be found).
	ClusterUID string
	// Isolation maps consumer objects to their provider place (the
	// Connection's spec.isolation; the zero value is None).
	Isolation isolation.Mapping
	// Owners are the APIs the binding lists (by "<plural>.<group>") that
	// reference entries read objects of.
	Owners map[string]OwnerAPI
}

// scope is the namespace the binding reads and writes on side s ("" for
// every namespace): a Binding's namespace on the consumer, and its
// provider place on the provider — the isolation namespace under
// Namespace isolation whatever the binding (the credentials may read
// nothing else), "<prefix>-<namespace>" for a Binding under Prefixed.
func (b Binding) scope(s side) string {
	if s == consumerSide {
		return b.Namespace
	}
	if ns := b.Isolation.ConfinedTo(); ns != "" {
		return ns
	}
	if b.Namespace == "" {
		return ""
	}
	return b.Isolation.Namespace(b.Namespace)
}

// Options configure a Copier.
type Options struct {
	// Consumer is the consumer's rest config; consumer informers use it.
	Consumer *rest.Config
	// ConsumerClient is an uncached consumer client for writes and the
	// occasional read of a single object.
	ConsumerClient client.Client
	// ConsumerCache is the consumer manager's cache: reference entries read
	// the bound objects from the informers the syncers run in it. Without
	// it reference entries wait.
	ConsumerCache cache.Cache
	// Events records Warning Events on bindings.
	Events recorder.EventRecorder
	// SecretNamespaces are the konnector's kubeconfig Secret namespaces:
	// never copied from or into, on either side.
	SecretNamespaces []string
	// Trigger re-queues a Connection's bindings; informer events call it,
	// among them each informer's first complete list: a pass never waits
	// for an informer, it reads what has been listed and comes back.
	Trigger func(connection string)
	// WatchesPerNamespace bounds the source informers the bindings of one
	// consumer namespace hold (the ClusterBindings together count as one
	// namespace); an entry that would exceed it copies nothing. Default
	// DefaultWatchesPerNamespace.
	WatchesPerNamespace int
}

// DefaultWatchesPerNamespace is the default budget of related watches per
// consumer namespace: far more than a namespace's bindings need (a label
// selector is one watch, a name or a referenced object one each), far
// fewer than would burden an API server.
const DefaultWatchesPerNamespace = 512

// Copier copies related resources. It is safe for concurrent use.
type Copier struct {
	opts      Options
	denied    map[string]bool
	transform func(any) (any, error)
	consumer  *pool
	// life bounds every informer of the copier, cancelled by stop;
	// goroutines are those the copier started, which stop waits for.
	life       context.Context
	cancel     context.CancelFunc
	goroutines *goroutines.Group

	mu        sync.Mutex
	providers map[*session.Session]*pool
	// held are the informers each binding (by UID) uses; sources those of
	// them that count against its namespace's watch budget (its entries'
	// sources).
	held, sources map[string]map[ref]bool
	// namespaces holds, per consumer namespace ("" for the ClusterBindings),
	// how many of its bindings hold each source informer; namespaceOf is
	// each binding's namespace; waiting are, per namespace, the bindings
	// with entries over the budget (by UID, to their Connection), re-queued
	// when watches are freed there.
	namespaces  map[string]map[ref]int
	namespaceOf map[string]string
	waiting     map[string]map[string]string
	// reported are the problems each binding has been told about; an entry
	// goes when its problem does.
	reported map[string]map[string]bool
	// provided lists each binding's provider copies as last seen, to name
	// them when its Connection is gone.
	provided map[string]providedCopies
	// owners are the handlers on bound APIs' consumer informers that
	// reference entries read.
	owners map[schema.GroupVersionKind]*ownerWatch
}

// providedCopies are a binding's provider copies as last seen.
type providedCopies struct {
	clusterUID string
	names      []string
}

// NewCopier returns a Copier whose informers run until it is stopped: add
// it to the manager (Start). ctx gives them its values (the logger), not
// its lifetime.
func NewCopier(ctx context.Context, opts Options) (*Copier, error) {
	cs, err := kubernetes.NewForConfig(opts.Consumer)
	if err != nil {
		return nil, fmt.Errorf("related: consumer client: %w", err)
	}
	return newCopier(context.WithoutCancel(ctx), opts, cs), nil
}

// newCopier completes opts with defaults and returns a Copier whose
// consumer informers read through cs and run until ctx ends or the Copier
// stops.
func newCopier(ctx context.Context, opts Options, cs kubernetes.Interface) *Copier {
	if opts.WatchesPerNamespace <= 0 {
		opts.WatchesPerNamespace = DefaultWatchesPerNamespace
	}
	life, cancel := context.WithCancel(log.IntoContext(ctx, log.FromContext(ctx).WithName("related")))
	g := &goroutines.Group{}
	c := &Copier{
		opts: opts, denied: DeniedNamespaces(opts.SecretNamespaces), life: life, cancel: cancel, goroutines: g,
		consumer:  &pool{side: consumerSide, cs: cs, ctx: life, goroutines: g, informers: map[key]*informer{}},
		providers: map[*session.Session]*pool{}, held: map[string]map[ref]bool{}, sources: map[string]map[ref]bool{},
		namespaces: map[string]map[ref]int{}, namespaceOf: map[string]string{}, waiting: map[string]map[string]string{},
		reported: map[string]map[string]bool{}, provided: map[string]providedCopies{},
		owners: map[schema.GroupVersionKind]*ownerWatch{},
	}
	c.transform = stripTransform(c.denied)
	return c
}

// EntryID identifies a relatedResources entry by its content, so that an
// entry keeps its copies when others are added or removed before it.
func EntryID(e kbindv1alpha1.RelatedResource) string {
	data, _ := json.Marshal(e)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
}

// Owner is the related-binding annotation value of a copy.
func Owner(bindingUID, entryID string) string { return bindingUID + "/" + entryID }

// Result summarizes one Sync.
type Result struct {
	Status kbindv1alpha1.RelatedStatus
	// Forbidden names refused requests ("list secrets (provider side)").
	Forbidden []string
	// Refused says, per entry, what kbind itself refuses to copy and why:
	// provider objects of another consumer namespace, watches over the
	// namespace's budget.
	Refused []string
	// NotReadYet: some entry's sources or copies have not been listed yet
	// (its informers just started); its copies were left as they are and
	// Status does not count them. The informers' first list re-queues the
	// binding.
	NotReadYet bool
}

// providerPool returns the session's pool, creating it; it is dropped,
// its informers stopped, when the session or the Copier stops.
func (c *Copier) providerPool(s *session.Session) (*pool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.providers[s]; ok {
		return p, nil
	}
	if s.Context().Err() != nil {
		return nil, fmt.Errorf("the provider session of Connection %s has stopped", s.Connection)
	}
	if c.life.Err() != nil {
		return nil, errCopierStopped
	}
	cs, err := kubernetes.NewForConfigAndClient(s.Config, s.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("provider client: %w", err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(s.Context(), log.FromContext(s.Context()).WithName("related")))
	p := &pool{side: providerSide, cs: cs, ctx: ctx, goroutines: c.goroutines, informers: map[key]*informer{}}
	if !c.goroutines.Go(func() {
		select {
		case <-s.Done():
		case <-c.life.Done():
		}
		cancel()
		c.mu.Lock()
		delete(c.providers, s)
		p.informers = map[key]*informer{} // their contexts ended with the pool's
		c.mu.Unlock()
	}) {
		cancel()
		return nil, errCopierStopped
	}
	c.providers[s] = p
	return p, nil
}

// use makes the binding hold exactly fixed (its copies' informers) and
// the sources of the entries that fit its namespace's watch budget
// (admit), starting informers it is the first to need and stopping those
// nobody needs any more. It never waits for an informer to list.
func (c *Copier) use(b Binding, fixed []ref, entries [][]ref) (map[ref]*informer, admission) {
	c.mu.Lock()
	ns := b.Namespace
	others := map[ref]bool{}
	for r, n := range c.namespaces[ns] {
		// A stopped provider session's informers are gone; their holders
		// let go of them on their next pass.
		if (n > 1 || !c.sources[b.UID][r]) && r.pool.ctx.Err() == nil {
			others[r] = true
		}
	}
	var adm admission
	adm.over, adm.used = admit(entries, others, c.opts.WatchesPerNamespace)
	want, sources := map[ref]bool{}, map[ref]bool{}
	for _, r := range fixed {
		want[r] = true
	}
	for i, refs := range entries {
		if _, over := adm.over[i]; over {
			continue
		}
		for _, r := range refs {
			want[r], sources[r] = true, true
		}
	}
	out := map[ref]*informer{}
	for r := range want {
		i, ok := r.pool.informers[r.key]
		if !ok {
			i = newInformer(r.pool, r.key, c.transform, c.fire)
			r.pool.informers[r.key] = i
		}
		i.users[b.UID] = b.Connection
		out[r] = i
	}
	for r := range c.held[b.UID] {
		if !want[r] {
			c.releaseLocked(b.UID, r)
		}
	}
	c.held[b.UID] = want
	freed := c.countSourcesLocked(b.UID, ns, sources)
	c.setWaitingLocked(ns, b.UID, b.Connection, len(adm.over) > 0)
	wake := c.wakeLocked(ns, freed)
	c.mu.Unlock()
	c.trigger(wake)
	return out, adm
}

func (c *Copier) releaseLocked(uid string, r ref) {
	i, ok := r.pool.informers[r.key]
	if !ok {
		return
	}
	delete(i.users, uid)
	if len(i.users) == 0 {
		i.cancel()
		delete(r.pool.informers, r.key)
	}
}

// fire re-queues the bindings that use an informer.
func (c *Copier) fire(i *informer) {
	if c.opts.Trigger == nil {
		return
	}
	c.mu.Lock()
	conns := map[string]bool{}
	for _, conn := range i.users {
		conns[conn] = true
	}
	c.mu.Unlock()
	for conn := range conns {
		c.opts.Trigger(conn)
	}
}

// Forget drops everything the copier holds for a binding: its informers
// (stopped when no other binding uses them), its reported problems and its
// remembered provider copies. Call it once the binding's copies are gone,
// or left behind on purpose.
func (c *Copier) Forget(bindingUID string) {
	c.mu.Lock()
	wake := c.forgetLocked(bindingUID)
	c.mu.Unlock()
	c.trigger(wake)
}

// forgetLocked is Forget; it returns the Connections of the bindings to
// re-queue because watches were freed in the binding's namespace.
func (c *Copier) forgetLocked(bindingUID string) (wake []string) {
	for r := range c.held[bindingUID] {
		c.releaseLocked(bindingUID, r)
	}
	for gvk := range c.owners {
		c.unwatchOwnerLocked(gvk, bindingUID)
	}
	ns := c.namespaceOf[bindingUID]
	freed := c.countSourcesLocked(bindingUID, ns, nil)
	c.setWaitingLocked(ns, bindingUID, "", false)
	delete(c.held, bindingUID)
	delete(c.reported, bindingUID)
	delete(c.provided, bindingUID)
	return c.wakeLocked(ns, freed)
}

// pass is the bookkeeping of one Sync: the problems it saw, keyed
// "<entry id>/<what>", and the entries whose sources it could not read
// (their earlier problems could not be re-checked).
type pass struct {
	b        Binding
	problems map[string]bool
	unread   map[string]bool
}

// report emits a Warning Event on the binding the first time a problem is
// seen; it stays quiet while the problem lasts, and speaks again if it
// comes back after it went. The object the problem is about (nil: the
// entry) is the Event's related object: Events of one reason on one
// binding that differ only in their message would otherwise be folded
// into one series showing the first message only.
func (c *Copier) report(p *pass, entry, what string, about client.Object, reason, format string, args ...any) {
	what = entry + "/" + what
	p.problems[what] = true
	c.mu.Lock()
	seen := c.reported[p.b.UID][what]
	c.mu.Unlock()
	if !seen {
		var related runtime.Object
		if about != nil {
			related = about
		}
		c.opts.Events.Eventf(p.b.Object, related, corev1.EventTypeWarning, reason, "Copy", format, args...)
	}
}

// settle remembers the problems of a pass: those it saw, and the earlier
// ones of entries it could not read (they may still hold). A problem that
// went is forgotten, so that it is reported again if it comes back.
func (c *Copier) settle(p *pass) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := p.problems
	for what := range c.reported[p.b.UID] {
		if entry, _, _ := strings.Cut(what, "/"); p.unread[entry] {
			next[what] = true
		}
	}
	c.reported[p.b.UID] = next
}

// Sync makes the copies of every entry match their sources and deletes
// the copies this binding no longer wants. It never waits for an
// informer: entries whose informers have not listed yet keep their copies
// (Result.NotReadYet) until the first list re-queues the binding. Entries
// whose sources cannot be read keep their copies; a refusal is named in
// Result.Forbidden, what kbind refuses in Result.Refused, any other
// failure returned (joined) after the rest is done.
func (c *Copier) Sync(ctx context.Context, b Binding, provider *session.Session) (Result, error) {
	pp, err := c.providerPool(provider)
	if err != nil {
		return Result{}, err
	}
	run := &syncRun{
		c: c, b: b, ps: &pass{b: b, problems: map[string]bool{}, unread: map[string]bool{}},
		pools:     map[side]*pool{consumerSide: c.consumer, providerSide: pp},
		targets:   map[side]client.Client{consumerSide: c.opts.ConsumerClient, providerSide: provider.Client},
		forbidden: map[string]bool{}, kept: map[string]bool{}, targeted: map[string]bool{}, unreadTargets: map[string]bool{}, current: map[string]bool{},
		claims: map[string]claim{}, providerCopies: map[string]bool{}, strays: map[string]string{}, refused: map[int]string{},
	}
	plans := planEntries(b, c.denied)
	if c.opts.ConsumerCache != nil {
		if err := c.watchOwners(ctx, b, ownerKinds(plans)); err != nil {
			run.failures = append(run.failures, err)
		}
	}
	run.resolveReferences(ctx, plans)
	run.readInformers(plans)
	for _, p := range plans {
		run.current[p.id] = true
		run.copyEntry(ctx, p)
	}
	run.collect(ctx)
	for f := range run.forbidden {
		run.res.Forbidden = append(run.res.Forbidden, f)
	}
	sort.Strings(run.res.Forbidden)
	for _, p := range plans {
		if msg, ok := run.refused[p.index]; ok {
			run.res.Refused = append(run.res.Refused, msg)
		}
	}
	c.settle(run.ps)
	c.remember(b, run.providerCopies)
	return run.res, errors.Join(run.failures...)
}

// syncRun is the state of one Sync pass: the informers it reads, what it
// found and did.
type syncRun struct {
	c       *Copier
	b       Binding
	ps      *pass
	pools   map[side]*pool
	targets map[side]client.Client
	infs    map[ref]*informer
	adm     admission

	res      Result
	failures []error
	// forbidden names refused requests; kept the entries whose copies
	// stay whatever happens (their sources could not be read); targeted
	// the side/kind pairs some entry copies to, unreadTargets those some
	// entry that could not read its sources copies to; current the entry
	// ids of this pass; claims which entry copies each kind/namespace/name;
	// providerCopies the "kind namespace/name" of this binding's provider
	// copies.
	forbidden, kept, targeted, unreadTargets, current, providerCopies map[string]bool
	claims                                                            map[string]claim
	// strays are the consumer targets (claim keys) of provider objects a
	// Binding's entry may not copy (not its namespace's): a copy of ours
	// there was made before kbind refused them, and its deletion is
	// reported. refused is the refusal of each entry (by index).
	strays  map[string]string
	refused map[int]string
}

// readInformers makes the binding hold the informers of its copies (both
// sides) and of the sources of every entry that fits its namespace's
// watch budget.
func (r *syncRun) readInformers(plans []entryPlan) {
	entries := make([][]ref, len(plans))
	for i, p := range plans {
		for _, k := range p.keys {
			entries[i] = append(entries[i], ref{r.pools[p.source], k})
		}
	}
	r.infs, r.adm = r.c.use(r.b, copiesRefs(r.b, r.pools, consumerSide, providerSide), entries)
}

// copiesRefs are the informers of the binding's copies on the given sides.
func copiesRefs(b Binding, pools map[side]*pool, sides ...side) []ref {
	var refs []ref
	for _, s := range sides {
		for _, kind := range relatedKinds {
			refs = append(refs, ref{pools[s], copiesKey(s, kind, b.scope(s), b.ClusterUID)})
		}
	}
	return refs
}

// copies is the informer of the binding's copies of kind on side s, and
// whether it can be read.
func (r *syncRun) copies(s side, kind kbindv1alpha1.RelatedResourceKind) (*informer, error) {
	i := r.infs[ref{r.pools[s], copiesKey(s, kind, r.b.scope(s), r.b.ClusterUID)}]
	return i, readable(i.state())
}

// copyEntry copies the sources of one entry. An entry whose sources cannot
// be read, or that is over its namespace's watch budget, keeps its
// copies: a failed or refused read never deletes.
func (r *syncRun) copyEntry(ctx context.Context, p entryPlan) {
	r.targeted[p.target().String()+"/"+string(p.entry.Resource)] = true
	if p.skip != "" {
		r.res.Status.Skipped++
		r.c.report(r.ps, p.id, "skipped", nil, "RelatedSkipped", "%s", p.skip)
		if p.keep {
			r.kept[p.id] = true
		}
		return
	}
	if need, over := r.adm.over[p.index]; over {
		r.res.Status.Skipped++
		r.wait(p)
		r.refuse(p, "budget", overBudget(p.index, need, r.adm.used, r.c.opts.WatchesPerNamespace, r.b.Namespace))
		return
	}
	if p.reference != nil {
		r.copyReferences(ctx, p)
		return
	}
	var sources []client.Object
	for _, k := range p.keys {
		i := r.infs[ref{r.pools[p.source], k}]
		if err := readable(i.state()); err != nil {
			r.unreadable(p, err)
			return
		}
		sources = append(sources, i.objects("")...)
	}
	copiesInf, copiesErr := r.copies(p.target(), p.entry.Resource)
	switch {
	case errors.Is(copiesErr, ErrNotReadYet):
		r.unreadable(p, copiesErr) // listed in a moment: no GET per target meanwhile
		return
	case copiesErr != nil:
		copiesInf = nil // unreadable: every target is read with a GET
	}
	sort.Slice(sources, func(i, j int) bool {
		return client.ObjectKeyFromObject(sources[i]).String() < client.ObjectKeyFromObject(sources[j]).String()
	})
	found, notHomeN := map[string]bool{}, 0
	for _, src := range sources {
		found[src.GetName()] = true
		if judgeSource(src, p, r.b.ClusterUID, r.c.denied) == elsewhere {
			notHomeN++
			r.res.Status.Skipped++
			r.strays[claimKey(consumerSide, p.entry.Resource, client.ObjectKey{Namespace: p.home, Name: src.GetName()})] = p.id
			continue
		}
		target, err := p.targetKey(src, r.b.Isolation)
		if err != nil {
			r.res.Status.Skipped++
			r.c.report(r.ps, p.id, "unplaceable/"+string(p.entry.Resource)+"/"+src.GetNamespace()+"/"+src.GetName(), src, "RelatedSkipped",
				"not copying %s %s/%s: %v", singular(p.entry.Resource), src.GetNamespace(), src.GetName(), err)
			continue
		}
		r.copySource(ctx, p, src, copiesInf, target, "")
	}
	if notHomeN > 0 {
		r.refuse(p, "elsewhere", notHome(p, notHomeN, p.keys[0].namespace))
	}
	r.strayNames(p, found)
}

// strayNames refuses the names of a Binding's FromProvider entry under
// Namespace isolation that read like another consumer namespace's
// provider objects and select nothing at the Binding's own place (found
// are the provider names the entry's informers hold): the Binding says why
// nothing was copied, and a copy of ours under such a name (made before
// kbind read names at the Binding's place) is reported when it goes.
func (r *syncRun) strayNames(p entryPlan, found map[string]bool) {
	if p.home == "" || p.iso.ConfinedTo() == "" {
		return
	}
	sourceNames := make([]string, 0, len(p.names))
	for sn := range p.names {
		sourceNames = append(sourceNames, sn)
	}
	sort.Strings(sourceNames)
	for _, sn := range sourceNames {
		name := p.names[sn]
		other, stray := strayName(p.home, name)
		if found[sn] || !stray {
			continue
		}
		r.res.Status.Skipped++
		r.strays[claimKey(consumerSide, p.entry.Resource, client.ObjectKey{Namespace: p.home, Name: name})] = p.id
		r.refuse(p, "stray/"+name, strayMissing(p, name, other, client.ObjectKey{Namespace: p.iso.ConfinedTo(), Name: sn}))
	}
}

// refuse records what kbind refuses of entry p (Result.Refused, on the
// binding's PermissionDenied condition) and reports it with a Warning
// Event while it lasts.
func (r *syncRun) refuse(p entryPlan, what, msg string) {
	if prev, ok := r.refused[p.index]; ok {
		r.refused[p.index] = prev + "; " + msg
	} else {
		r.refused[p.index] = msg
	}
	r.c.report(r.ps, p.id, what, nil, "RelatedSkipped", "%s", msg)
}

// ownerKinds are the bound APIs (kinds) the reference entries read, with
// the field paths each reads.
func ownerKinds(plans []entryPlan) map[schema.GroupVersionKind][]fieldpath.Path {
	out := map[schema.GroupVersionKind][]fieldpath.Path{}
	for _, p := range plans {
		if rp := p.reference; rp != nil && !rp.pending {
			out[rp.owner.GVK] = append(out[rp.owner.GVK], rp.path)
		}
	}
	return out
}

// copySource copies one source object to target unless an earlier entry
// does, kbind never copies it, or the target belongs to someone else, and
// counts the outcome. ownerUID is the bound object a reference entry
// copies it for ("" for a selector entry).
func (r *syncRun) copySource(ctx context.Context, p entryPlan, src client.Object, copiesInf *informer, target client.ObjectKey, ownerUID string) {
	objKey := string(p.entry.Resource) + "/" + src.GetNamespace() + "/" + src.GetName()
	claimKey := claimKey(p.target(), p.entry.Resource, target)
	if _, taken := r.claims[claimKey]; taken {
		return // an earlier entry copies it
	}
	switch judgeSource(src, p, r.b.ClusterUID, r.c.denied) {
	case notSelected, elsewhere: // elsewhere: refused by copyEntry
		return
	case deniedNamespace:
		r.res.Status.Skipped++
		r.c.report(r.ps, p.id, "denied/"+objKey, src, "RelatedSkipped",
			"not copying %s %s/%s: kbind never copies from or into namespace %s", singular(p.entry.Resource), src.GetNamespace(), src.GetName(), src.GetNamespace())
		return
	case serviceAccountToken:
		r.res.Status.Skipped++
		r.c.report(r.ps, p.id, "token/"+objKey, src, "RelatedSkipped",
			"not copying Secret %s/%s: service-account tokens are never copied", src.GetNamespace(), src.GetName())
		return
	}
	desired := copyOf(src, target, r.b, p.id, p.target(), ownerUID)
	r.claims[claimKey] = claim{entry: p.id, target: p.target()}
	outcome, err := r.c.apply(ctx, r.ps, r.targets[p.target()], copiesInf, desired, p.id, r.namespaces(p.target(), src))
	var nsErr *namespaceError
	var readErr *readError
	kind := refusal.Of(err)
	switch {
	case kind == refusal.Forbidden && errors.As(err, &readErr):
		r.forbidden[fmt.Sprintf("get %s in namespace %s (%s side)", p.entry.Resource, target.Namespace, p.target())] = true
		r.res.Status.Skipped++
	case kind == refusal.Forbidden && errors.As(err, &nsErr):
		r.forbidden[fmt.Sprintf("create namespaces/%s (%s side)", target.Namespace, p.target())] = true
		r.res.Status.Skipped++
	case kind == refusal.Forbidden:
		r.forbidden[fmt.Sprintf("write %s in namespace %s (%s side)", p.entry.Resource, target.Namespace, p.target())] = true
		r.res.Status.Skipped++
	case kind == refusal.Rejected:
		r.res.Status.Skipped++
		r.c.report(r.ps, p.id, "rejected/"+objKey, src, "RelatedRejected",
			"the %s side refused the copy of %s %s/%s: %v", p.target(), singular(p.entry.Resource), src.GetNamespace(), src.GetName(), err)
	case err != nil: // transient, or NotFound: retried with the pass
		r.failures = append(r.failures, fmt.Errorf("copying %s %s/%s to the %s side: %w", singular(p.entry.Resource), src.GetNamespace(), src.GetName(), p.target(), err))
	case outcome == conflict:
		r.res.Status.Conflicts++
	case outcome == otherEntry:
	default:
		r.res.Status.Copies++
		if p.target() == providerSide {
			r.providerCopies[string(p.entry.Resource)+" "+target.String()] = true
		}
	}
}

// collect deletes this binding's copies that no entry claims any more (the
// source stopped matching or went, or its entry was removed: SYNC-R4),
// never those of an entry whose sources could not be read.
func (r *syncRun) collect(ctx context.Context) {
	for _, s := range []side{consumerSide, providerSide} {
		for _, kind := range relatedKinds {
			i, err := r.copies(s, kind)
			if err != nil {
				r.copiesUnread(s, kind, err)
				continue
			}
			for _, obj := range i.objects(r.b.UID) {
				r.collectCopy(ctx, s, kind, obj)
			}
		}
	}
}

// copiesUnread records why the copies of kind on side s could not be
// read: not read yet, forbidden where an entry targets them (a missing
// permission), or another failure; forbidden elsewhere is no concern.
func (r *syncRun) copiesUnread(s side, kind kbindv1alpha1.RelatedResourceKind, err error) {
	switch {
	case errors.Is(err, ErrNotReadYet):
		r.res.NotReadYet = true
	case isForbidden(err) && r.targeted[s.String()+"/"+string(kind)]:
		r.forbidden[fmt.Sprintf("list %s (%s side)", kind, s)] = true
	case !isForbidden(err):
		r.failures = append(r.failures, fmt.Errorf("reading the related copies (%s, %s side): %w", kind, s, err))
	}
}

// collectCopy deletes one copy of this binding when it is collectable; a
// provider copy that stays is remembered, and loses the reaper's mark
// (unmark). A copy deleted that was made before from a stray provider
// object gets a Warning Event.
func (r *syncRun) collectCopy(ctx context.Context, s side, kind kbindv1alpha1.RelatedResourceKind, obj client.Object) {
	objKey := claimKey(s, kind, client.ObjectKeyFromObject(obj))
	owner := obj.GetAnnotations()[kbindv1alpha1.RelatedBindingAnnotation]
	if !collectable(owner, r.b.UID, s, objKey, r.claims, r.kept, r.current, r.unreadTargets[s.String()+"/"+string(kind)]) {
		if s == providerSide {
			r.providerCopies[string(kind)+" "+obj.GetNamespace()+"/"+obj.GetName()] = true
		}
		r.unmark(ctx, s, kind, obj)
		return
	}
	if err := deleteCopy(ctx, r.targets[s], obj); err != nil {
		r.failures = append(r.failures, fmt.Errorf("deleting related copy %s on the %s side: %w", objKey, s, err))
		return
	}
	log.FromContext(ctx).V(1).Info("Deleted related copy", "side", s.String(), "resource", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
	if _, stray := r.strays[objKey]; stray {
		r.c.opts.Events.Eventf(r.b.Object, obj, corev1.EventTypeWarning, "RelatedSkipped", "Delete",
			"deleted %s %s/%s: kbind copied it before from a provider object that is not consumer namespace %s's, which a Binding never copies",
			singular(kind), obj.GetNamespace(), obj.GetName(), obj.GetNamespace())
	}
}

// unmark removes the backend reaper's phase-1 mark from a provider copy
// this binding keeps (issue #52, BE-3): a konnector syncing the binding is
// live, whatever its heartbeat Lease says (renewals refused by RBAC or a
// webhook while sync works). The mark's own event on the copies informer
// re-queues the binding, so a live konnector clears a mark within seconds;
// the reaper deletes a consumer's related copies only when every mark
// survived its grace period. Every copy of the binding the provider
// copies informer holds comes here, whatever its entry's state: the copies
// informer is the cheapest reliable read (no request per pass), and a
// copy kept is a copy of a live konnector. A refused patch is reported
// like a refused write; a copy gone or replaced meanwhile is left to its
// own event.
func (r *syncRun) unmark(ctx context.Context, s side, kind kbindv1alpha1.RelatedResourceKind, obj client.Object) {
	data, ok := unmarkPatch(s, obj)
	if !ok {
		return
	}
	err := r.targets[s].Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data))
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return // gone or replaced: its event brings the binding back
	case refusal.Of(err) == refusal.Forbidden:
		r.forbidden[fmt.Sprintf("patch %s in namespace %s (%s side)", kind, obj.GetNamespace(), s)] = true
		return
	case err != nil:
		r.failures = append(r.failures, fmt.Errorf("removing the reaper's mark from related copy %s %s/%s (%s side): %w",
			singular(kind), obj.GetNamespace(), obj.GetName(), s, err))
		return
	}
	log.FromContext(ctx).V(1).Info("Removed the reaper's mark from a related copy", "side", s.String(), "resource", kind,
		"namespace", obj.GetNamespace(), "name", obj.GetName(), "reapMarkedAt", obj.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation])
}

func (c *Copier) remember(b Binding, providerCopies map[string]bool) {
	names := make([]string, 0, len(providerCopies))
	for n := range providerCopies {
		names = append(names, n)
	}
	sort.Strings(names)
	c.mu.Lock()
	c.provided[b.UID] = providedCopies{clusterUID: b.ClusterUID, names: names}
	c.mu.Unlock()
}

func singular(r kbindv1alpha1.RelatedResourceKind) string {
	if r == kbindv1alpha1.RelatedResourceSecrets {
		return "Secret"
	}
	return "ConfigMap"
}

// deleteCopy deletes exactly the copy that was read: if it changed or was
// replaced since, the delete is refused and the next pass decides again.
func deleteCopy(ctx context.Context, c client.Client, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj.DeepCopyObject().(client.Object), client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Cleanup deletes every copy the binding made: on the consumer always, on
// the provider when there is a session (provider non-nil and the binding's
// ClusterUID known). It reports done only when both sides were read and
// every copy is gone; a read that fails is an error, never taken for "no
// copies". Call Forget when done.
func (c *Copier) Cleanup(ctx context.Context, b Binding, provider *session.Session) (done bool, err error) {
	sides := []side{consumerSide}
	pools := map[side]*pool{consumerSide: c.consumer}
	targets := map[side]client.Client{consumerSide: c.opts.ConsumerClient}
	if provider != nil && b.ClusterUID != "" {
		pp, err := c.providerPool(provider)
		if err != nil {
			return false, err
		}
		sides = append(sides, providerSide)
		pools[providerSide], targets[providerSide] = pp, provider.Client
	}
	refs := copiesRefs(b, pools, sides...)
	infs, _ := c.use(b, refs, nil)
	var failures []error
	for _, r := range refs {
		i := infs[r]
		if err := readable(i.state()); err != nil {
			failures = append(failures, fmt.Errorf("reading the related copies (%s, %s side): %w", r.key.resource, r.pool.side, err))
			continue
		}
		for _, obj := range i.objects(b.UID) {
			if err := deleteCopy(ctx, targets[r.pool.side], obj); err != nil {
				failures = append(failures, fmt.Errorf("deleting related copy %s %s/%s on the %s side: %w",
					singular(r.key.resource), obj.GetNamespace(), obj.GetName(), r.pool.side, err))
				continue
			}
			log.FromContext(ctx).V(1).Info("Deleted related copy", "side", r.pool.side.String(), "resource", r.key.resource,
				"namespace", obj.GetNamespace(), "name", obj.GetName())
		}
	}
	if err := errors.Join(failures...); err != nil {
		return false, err
	}
	return len(sides) == 2, nil
}

// Abandon releases a binding whose Connection is gone: its provider copies
// cannot be deleted by kbind any more, so a Warning Event names them (as
// last seen) for the backend reaper. It forgets the binding.
func (c *Copier) Abandon(b Binding) {
	c.mu.Lock()
	last, known := c.provided[b.UID]
	c.mu.Unlock()
	what := "their names are unknown to this konnector process"
	if known {
		what = "last seen: none"
		if len(last.names) > 0 {
			what = strings.Join(last.names, ", ")
		}
	}
	marker := "core.kbind.io/related-binding=" + b.UID + "/…"
	if uid := cmp.Or(b.ClusterUID, last.clusterUID); uid != "" {
		marker = "core.kbind.io/consumer-cluster-uid=" + uid + ", " + marker
	}
	c.opts.Events.Eventf(b.Object, nil, corev1.EventTypeWarning, "RelatedCopiesLeft", "Cleanup",
		"Connection %s is gone: the related copies this binding made on the provider (%s) are left for the backend reaper (%s)",
		b.Connection, marker, what)
	c.Forget(b.UID)
}

// claimKey identifies a copy target in a pass: side, kind, namespace and
// name.
func claimKey(s side, kind kbindv1alpha1.RelatedResourceKind, target client.ObjectKey) string {
	return s.String() + "/" + string(kind) + "/" + target.String()
}

// namespaces says how the namespace of a copy of src on side target is
// made when it is missing: created and marked as kbind's; under Prefixed
// isolation on the provider, marked with the consumer namespace and never
// adopted when it exists without this consumer's markers; under Namespace
// isolation on the provider, never created (it is the provider admin's:
// nil).
func (r *syncRun) namespaces(target side, src client.Object) *namespace.Policy {
	if target == consumerSide || !r.b.Isolation.Isolated() {
		return &namespace.Policy{Markers: kbindv1alpha1.NamespaceMarkers(r.b.ClusterUID)}
	}
	if !r.b.Isolation.CreatesNamespaces() {
		return nil
	}
	return &namespace.Policy{Markers: r.b.Isolation.NamespaceMarkers(r.b.ClusterUID, src.GetNamespace()), Owned: true, ConsumerClusterUID: r.b.ClusterUID}
}

// copyOf is the target object of a source at target: the payload (data,
// stringData as data, binaryData, type, immutable) and kbind's markers,
// with the consumer source's origin on a provider copy under isolation.
// Source labels are not copied.
func copyOf(src client.Object, target client.ObjectKey, b Binding, entry string, to side, ownerUID string) client.Object {
	meta := metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}
	markers := kbindv1alpha1.RelatedCopyMarkers(b.ClusterUID, Owner(b.UID, entry))
	if to == providerSide && b.Isolation.Isolated() {
		markers = markers.WithOrigin(src.GetNamespace(), src.GetName())
	}
	if ownerUID != "" {
		markers = markers.WithRelatedOwner(ownerUID)
	}
	markers.Stamp(&meta)
	switch s := src.(type) {
	case *corev1.Secret:
		out := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta, Type: s.Type, Immutable: s.Immutable}
		out.Data = map[string][]byte{}
		maps.Copy(out.Data, s.Data)
		for k, v := range s.StringData {
			out.Data[k] = []byte(v)
		}
		return out
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta, Immutable: s.Immutable,
			Data: maps.Clone(s.Data), BinaryData: maps.Clone(s.BinaryData)}
	}
	return nil
}

type outcome int

const (
	applied outcome = iota
	conflict
	otherEntry
)

// apply writes desired unless the target belongs to someone else. The
// target is read from the copies informer, or (not cached: absent, foreign
// or not seen yet) directly. A missing target namespace is made as ns says
// (nil: never). An immutable target whose payload changed is replaced.
func (c *Copier) apply(ctx context.Context, ps *pass, target client.Client, copies *informer, desired client.Object, entry string, ns *namespace.Policy) (outcome, error) {
	b := ps.b
	var existing client.Object
	if copies != nil {
		if o, ok := copies.get(desired.GetNamespace(), desired.GetName()); ok {
			existing = o.DeepCopyObject().(client.Object)
		}
	}
	if existing == nil {
		obj := desired.DeepCopyObject().(client.Object)
		err := target.Get(ctx, client.ObjectKeyFromObject(desired), obj)
		switch {
		case apierrors.IsNotFound(err):
			if ns == nil {
				break
			}
			nsConflict, err := namespace.Ensure(ctx, target, target, desired.GetNamespace(), *ns)
			if err != nil {
				return applied, &namespaceError{err}
			}
			if nsConflict != "" {
				c.report(ps, entry, "namespace/"+desired.GetNamespace(), desired, "RelatedConflict",
					"namespace %s exists and kbind did not create it for this consumer; nothing was copied into it", desired.GetNamespace())
				return conflict, nil
			}
		case err != nil:
			return applied, &readError{err}
		default:
			existing = obj
		}
	}
	kind := desired.GetObjectKind().GroupVersionKind().Kind
	if existing != nil {
		owner := existing.GetAnnotations()[kbindv1alpha1.RelatedBindingAnnotation]
		if !strings.HasPrefix(owner, b.UID+"/") {
			c.report(ps, entry, "conflict/"+kind+"/"+desired.GetNamespace()+"/"+desired.GetName(), desired, "RelatedConflict",
				"%s %s/%s exists and is not this binding's copy; it was left untouched",
				strings.ToLower(kind), desired.GetNamespace(), desired.GetName())
			return conflict, nil
		}
		if owner != Owner(b.UID, entry) {
			return otherEntry, nil
		}
		if samePayload(existing, desired) {
			return applied, nil
		}
		if immutable(existing) {
			if err := deleteCopy(ctx, target, existing); err != nil {
				return applied, fmt.Errorf("replacing immutable copy: %w", err)
			}
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return applied, err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(desired.GetObjectKind().GroupVersionKind())
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	if err := target.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(kbindv1alpha1.RelatedFieldManager), client.ForceOwnership); err != nil {
		return applied, err
	}
	log.FromContext(ctx).V(1).Info("Copied related resource", "kind", obj.GetKind(), "namespace", obj.GetNamespace(), "name", obj.GetName())
	return applied, nil
}

func samePayload(existing, desired client.Object) bool {
	if existing.GetLabels()[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue ||
		existing.GetLabels()[kbindv1alpha1.RelatedOwnerLabel] != desired.GetLabels()[kbindv1alpha1.RelatedOwnerLabel] {
		return false
	}
	switch d := desired.(type) {
	case *corev1.Secret:
		e, ok := existing.(*corev1.Secret)
		return ok && equality.Semantic.DeepEqual(e.Data, d.Data) && e.Type == d.Type && equality.Semantic.DeepEqual(e.Immutable, d.Immutable)
	case *corev1.ConfigMap:
		e, ok := existing.(*corev1.ConfigMap)
		return ok && equality.Semantic.DeepEqual(e.Data, d.Data) && equality.Semantic.DeepEqual(e.BinaryData, d.BinaryData) &&
			equality.Semantic.DeepEqual(e.Immutable, d.Immutable)
	}
	return false
}

func immutable(obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o.Immutable != nil && *o.Immutable
	case *corev1.ConfigMap:
		return o.Immutable != nil && *o.Immutable
	}
	return false
}

// readError is a failure to read the target.
type readError struct{ err error }

func (e *readError) Error() string { return "reading the target: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// namespaceError is a failure to create the target namespace.
type namespaceError struct{ err error }

func (e *namespaceError) Error() string { return "creating the target namespace: " + e.err.Error() }
func (e *namespaceError) Unwrap() error { return e.err }
