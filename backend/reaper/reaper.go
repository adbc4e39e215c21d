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

// Package reaper deletes what a consumer cluster that stopped heartbeating
// left on the provider (BE-3): its provider copies, then its related
// Secret/ConfigMap copies — both marked first and deleted only once every
// mark survived the grace period, no live konnector clearing one — then
// the namespaces kbind created for it once they hold nothing else, and
// last its heartbeat Leases. It selects server-side by
// the consumer-cluster-uid label, re-checks every marker before deleting,
// deletes with a UID precondition, never strips finalizers, and keeps no
// state between passes: a restarted backend recomputes everything from the
// cluster, so nothing is deleted twice or missed. A heartbeat Lease is the
// consumer's only while the consumer holds it (spec.holderIdentity): one
// taken over by someone else is never deleted.
//
// Requirement ids in comments (such as BE-3) refer to docs/requirements.md.
package reaper

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Event reasons on reaped objects.
const (
	ReasonReaped        = "Reaped"
	ReasonReapForbidden = "ReapForbidden"
	ReasonReapFailed    = "ReapFailed"
)

// DefaultGrace is how long a reap mark must survive before the copy is
// deleted: twenty times the konnector's 30 s binding resync, and as long as
// its 10 m recheck — a live konnector clears a mark within seconds of the
// watch event, and even a restarting one lists its copies well within it.
const DefaultGrace = 10 * time.Minute

// Judge is the backend's liveness judge (the liveness controller) as a
// pass asks it: what it saw of the consumer's heartbeat Leases through its
// Lease cache, on the backend's clock.
type Judge interface {
	// LastRenewal is when the judge last saw a Lease of the consumer
	// renew — or first saw it, when it has not renewed since the backend
	// started: the start of the consumer's stale episode. Marks written
	// before it count for nothing (DecideCopy).
	LastRenewal(consumerUID string) time.Time
	// Unseen reports whether a Lease, as just read from the API server,
	// shows what the judge has not seen: a renewal its cache has not
	// delivered yet, or a Lease it does not know.
	Unseen(l *coordinationv1.Lease) bool
}

// LeaseLister lists heartbeat Leases in every namespace with their spec,
// which metadata-only requests cannot see (a typed client's
// CoordinationV1().Leases("")).
type LeaseLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
}

// Reaper runs reaping passes against the provider.
type Reaper struct {
	// Metadata lists and deletes objects of any resource (metadata only:
	// the reaper never reads Secret or ConfigMap contents).
	Metadata metadata.Interface
	// Leases lists the heartbeat Leases, whose holder decides whether
	// they are the consumer's; without it no Lease is ever deleted.
	Leases    LeaseLister
	Discovery discovery.DiscoveryInterface
	// Events records one Event per deletion; nil records none.
	Events events.EventRecorder
	// Grace is how long a copy's reap mark must survive before the copy
	// is deleted (DefaultGrace when zero).
	Grace time.Duration
	// Clock is the backend's clock, which marks are written and judged
	// by; the real one when nil.
	Clock clock.PassiveClock
	// Judge, when set, is the liveness judge a pass checks its fresh
	// reads of the Leases against; without it (the dry run, unit tests)
	// the Leases read when the pass began are the reference, and every
	// mark counts whenever it was written.
	Judge Judge

	// next paces the passes of a consumer whose copies carry marks: no
	// pass before its marks fall due (NextPass). It only paces, never
	// decides: a restarted backend marks again sooner, nothing else.
	mu   sync.Mutex
	next map[string]time.Duration
	// episodes is what this stale episode's passes saw of each
	// consumer's copies (Episode): it only ever delays deletions.
	episodes map[string]*Episode
}

// episode returns the consumer's episode, creating it.
func (r *Reaper) episode(uid string) *Episode {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.episodes == nil {
		r.episodes = map[string]*Episode{}
	}
	e := r.episodes[uid]
	if e == nil {
		e = &Episode{Deleted: map[types.UID]bool{}}
		r.episodes[uid] = e
	}
	return e
}

// endEpisode forgets the consumer's episode: it renewed, or is reaped.
func (r *Reaper) endEpisode(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.episodes, uid)
}

// NextPass says how long the consumer's next pass may wait: until the
// earliest mark of its last marking round falls due; ok is false when
// its last pass did not end marking (the controller's own interval then).
func (r *Reaper) NextPass(uid string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.next[uid]
	delete(r.next, uid)
	return d, ok
}

func (r *Reaper) pace(uid string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = map[string]time.Duration{}
	}
	r.next[uid] = d
}

func (r *Reaper) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reaper) grace() time.Duration {
	if r.Grace <= 0 {
		return DefaultGrace
	}
	return r.Grace
}

// Plan is everything of one consumer the reaper would delete now, in order.
type Plan struct {
	Consumer   string
	Copies     []Object
	Related    []Object
	Namespaces []Object
	Leases     []Object
	// Kept are the namespaces created for the consumer that stay, and why:
	// they hold other objects or cannot be proven empty.
	Kept map[string]NamespaceDecision
	// Unlisted names resources that could not be listed (forbidden, or
	// with the error).
	Unlisted []string
	// Undiscovered names the API group versions discovery could not list:
	// their objects are not in the plan, and while any is left the pass
	// keeps the consumer's namespaces and Leases.
	Undiscovered []string
	// LeasesKept says why the consumer's Leases would stay (the pass
	// could not finish); empty when they go.
	LeasesKept string
}

// Objects is the plan in deletion order.
func (p *Plan) Objects() []Object {
	var out []Object
	for _, phase := range [][]Object{p.Copies, p.Related, p.Namespaces, p.Leases} {
		out = append(out, phase...)
	}
	return out
}

// discover returns every served resource that can be listed, preferred
// version only, with its phase, and the group versions that could not be
// discovered (an aggregated API that is down). Those cannot be listed, so
// their objects — a copy of the consumer, or anything in a namespace — are
// unknown: callers must neither call a namespace empty nor finish a pass
// while any is left.
func (r *Reaper) discover(ctx context.Context) ([]Resource, []string, error) {
	lists, err := r.Discovery.ServerPreferredResources()
	undiscovered, err := Undiscovered(err)
	if err != nil {
		return nil, nil, fmt.Errorf("discovering the provider's resources: %w", err)
	}
	if len(undiscovered) > 0 {
		log.FromContext(ctx).Info("Some API groups could not be discovered; their objects cannot be listed, so namespaces created for the consumer and its Leases stay until they can", "groupVersions", undiscovered)
	}
	var out []Resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") || !slices.Contains(ar.Verbs, "list") {
				continue
			}
			out = append(out, Resource{
				GVR:        gv.WithResource(ar.Name),
				Kind:       ar.Kind,
				Namespaced: ar.Namespaced,
				Deletable:  slices.Contains(ar.Verbs, "delete"),
				Phase:      PhaseOf(gv.Group, ar.Name),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ResourceName() < out[j].ResourceName() })
	return out, undiscovered, nil
}

// listOwned lists a resource's objects of the consumer: server-side selection
// by the managed and consumer-cluster-uid labels, then every marker
// re-checked here.
func (r *Reaper) listOwned(ctx context.Context, res Resource, uid string) ([]Object, error) {
	sel := labels.SelectorFromSet(labels.Set{
		kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
		kbindv1alpha1.ConsumerClusterUIDLabel: uid,
	})
	if res.Phase == PhaseLeases {
		return r.listLeases(ctx, res, uid, sel)
	}
	list, err := r.Metadata.Resource(res.GVR).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	var out []Object
	for i := range list.Items {
		m := &list.Items[i]
		if !Owned(res.Phase, uid, m.Labels, m.Annotations) || Kept(m.Labels) {
			// Kept on purpose (an Orphan release): never the reaper's.
			continue
		}
		out = append(out, Object{Resource: res, Namespace: m.Namespace, Name: m.Name, UID: m.UID, Terminating: m.DeletionTimestamp != nil,
			MarkedAt: m.Annotations[kbindv1alpha1.ReapMarkedAtAnnotation]})
	}
	return out, nil
}

// listLeases lists the consumer's heartbeat Leases: every marker, and held
// by the consumer. A Lease someone else holds was taken over (the liveness
// controller reports it) and is not the consumer's to delete. Each is
// deleted only at the resourceVersion its holder was read at.
func (r *Reaper) listLeases(ctx context.Context, res Resource, uid string, sel labels.Selector) ([]Object, error) {
	if r.Leases == nil {
		return nil, fmt.Errorf("no Lease reader: the holders of the Leases cannot be checked")
	}
	list, err := r.Leases.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	var out []Object
	for i := range list.Items {
		l := &list.Items[i]
		if !Owned(res.Phase, uid, l.Labels, l.Annotations) || !HeldBy(l.Spec.HolderIdentity, uid) {
			continue
		}
		out = append(out, Object{Resource: res, Namespace: l.Namespace, Name: l.Name, UID: l.UID, ResourceVersion: l.ResourceVersion,
			Terminating: l.DeletionTimestamp != nil})
	}
	return out, nil
}

// found is what one listing round found, per phase.
type found struct {
	byPhase  map[Phase][]Object
	unlisted []string // forbidden
	failed   []string // other list errors
}

// collect lists the consumer's objects of the given phases.
func (r *Reaper) collect(ctx context.Context, resources []Resource, uid string, phases ...Phase) *found {
	want := map[Phase]bool{}
	for _, p := range phases {
		want[p] = true
	}
	f := &found{byPhase: map[Phase][]Object{}}
	for _, res := range resources {
		if !want[res.Phase] || !res.Deletable {
			continue
		}
		objs, err := r.listOwned(ctx, res, uid)
		switch {
		case apierrors.IsForbidden(err):
			f.unlisted = append(f.unlisted, res.ResourceName())
			continue
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			continue // the resource went away since discovery
		case err != nil:
			// Another resource's trouble (an aggregated API down) must not
			// hold up the rest; the pass is not finished, though.
			f.failed = append(f.failed, fmt.Sprintf("%s: %v", res.ResourceName(), err))
			continue
		}
		f.byPhase[res.Phase] = append(f.byPhase[res.Phase], objs...)
	}
	return f
}

// contents lists every object in a namespace (metadata only) and says what
// could not be listed: then the namespace cannot be proven empty. It stops
// at the first resource it may not list, since that alone keeps the
// namespace for good: without the RBAC to list everything (the chart's
// rbac.namespaceCleanup off) a pass costs one refused request per namespace,
// not one per resource.
func (r *Reaper) contents(ctx context.Context, resources []Resource, undiscovered []string, namespace string) NamespaceContents {
	c := NamespaceContents{Undiscovered: undiscovered}
	for _, res := range resources {
		if !res.Namespaced || (res.GVR.Resource == "events" && (res.GVR.Group == "" || res.GVR.Group == "events.k8s.io")) {
			continue
		}
		list, err := r.Metadata.Resource(res.GVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			continue
		case apierrors.IsForbidden(err):
			c.Forbidden = append(c.Forbidden, res.ResourceName())
			return c
		case err != nil:
			c.Failed = append(c.Failed, fmt.Sprintf("%s: %v", res.ResourceName(), err))
			continue
		}
		for i := range list.Items {
			m := &list.Items[i]
			c.Objects = append(c.Objects, Object{Resource: res, Namespace: m.Namespace, Name: m.Name, UID: m.UID, Terminating: m.DeletionTimestamp != nil})
		}
	}
	return c
}

// keySet is a set of Object keys.
func keySet(groups ...[]Object) map[string]bool {
	out := map[string]bool{}
	for _, g := range groups {
		for _, o := range g {
			out[o.Key()] = true
		}
	}
	return out
}

// Plan computes what reaping the consumer would delete, deleting nothing,
// with the same decisions as a pass: a namespace is on the plan when
// everything in it is, and the Leases only when the pass could finish.
func (r *Reaper) Plan(ctx context.Context, uid string) (*Plan, error) {
	resources, undiscovered, err := r.discover(ctx)
	if err != nil {
		return nil, err
	}
	f := r.collect(ctx, resources, uid, PhaseCopies, PhaseRelated, PhaseLeases, PhaseNamespaces)
	p := &Plan{Consumer: uid, Copies: f.byPhase[PhaseCopies], Related: f.byPhase[PhaseRelated], Leases: f.byPhase[PhaseLeases],
		Kept: map[string]NamespaceDecision{}, Unlisted: append(f.unlisted, f.failed...), Undiscovered: undiscovered}
	var held []string
	if len(undiscovered) > 0 {
		held = append(held, "API groups could not be discovered: "+strings.Join(undiscovered, ", "))
	}
	if len(f.failed) > 0 {
		held = append(held, "some resources could not be listed")
	}
	for _, res := range f.unlisted {
		if res == "leases.coordination.k8s.io" {
			held = append(held, "the Leases may not be listed")
		}
	}
	// Copies and related copies are gone before namespaces are judged.
	gone := keySet(p.Copies, p.Related)
	ownLease := keySet(p.Leases)
	fates := map[string]NamespaceFate{}
	for _, ns := range f.byPhase[PhaseNamespaces] {
		c := r.contents(ctx, resources, undiscovered, ns.Name)
		var left []Object
		for _, o := range c.Objects {
			if !gone[o.Key()] {
				left = append(left, o)
			}
		}
		c.Objects = left
		d := DecideNamespace(c, func(o Object) bool { return ownLease[o.Key()] })
		fates[ns.Name] = d.Fate
		if d.Fate == KeepNamespace {
			p.Kept[ns.Name] = d
			if d.Retry {
				held = append(held, "namespace "+ns.Name+": "+d.Reason)
			}
		}
	}
	if len(held) > 0 {
		// The pass cannot finish: the Leases stay, and with them the
		// namespaces that hold them.
		p.LeasesKept = strings.Join(held, "; ")
		p.Leases = nil
	}
	for _, ns := range f.byPhase[PhaseNamespaces] {
		switch {
		case fates[ns.Name] == DeleteNamespace:
			p.Namespaces = append(p.Namespaces, ns)
		case fates[ns.Name] == DeleteNamespaceAfterLeases && p.LeasesKept == "":
			p.Namespaces = append(p.Namespaces, ns)
		case fates[ns.Name] == DeleteNamespaceAfterLeases:
			p.Kept[ns.Name] = NamespaceDecision{Fate: KeepNamespace, Reason: "holds the consumer's Leases, which stay: " + p.LeasesKept, Retry: true}
		}
	}
	return p, nil
}

// pass carries one reaping pass's bookkeeping.
type pass struct {
	uid        string
	stillStale func() bool
	// resources and undiscovered are what discovery found at the start.
	resources    []Resource
	undiscovered []string
	refused      int
	stopped      bool
	// found counts the consumer's objects the pass listed, per phase
	// reached (kbind_backend_reap_candidates).
	found int
	// since is the consumer's last renewal the judge saw (zero without
	// one): marks written before it count for nothing.
	since time.Time
	// leases are the consumer's Leases' renewTimes (holder, renewTime)
	// as read from the API server when the pass began.
	leases map[string]string
	// episode is what this stale episode's passes saw.
	episode *Episode
}

// Reap runs one pass for the consumer; see the package comment for the
// order. done is true once nothing of the consumer is left.
func (r *Reaper) Reap(ctx context.Context, uid string, stillStale func() bool) (bool, error) {
	v, err := r.Pass(ctx, uid, stillStale)
	return v == Done, err
}

// Pass runs one reaping pass and says how it ended.
func (r *Reaper) Pass(ctx context.Context, uid string, stillStale func() bool) (v Verdict, err error) {
	logger := log.FromContext(ctx).WithValues("consumerClusterUID", uid)
	ctx = log.IntoContext(ctx, logger)
	resources, undiscovered, err := r.discover(ctx)
	if err != nil {
		return Waiting, err
	}
	p := &pass{uid: uid, stillStale: stillStale, resources: resources, undiscovered: undiscovered, episode: r.episode(uid)}
	defer func() {
		recordCandidates(uid, v, p.found)
		if v == Done || v == Stopped {
			r.endEpisode(uid)
		}
	}()
	if r.Judge != nil {
		p.since = r.Judge.LastRenewal(uid)
	}
	// The Leases as the API server has them now, the reference every
	// fresh read before a delete is held to.
	if ok, why := r.leasesStillStale(ctx, p); !ok {
		logger.Info("Not reaping: " + why)
		if why == renewedUnseen {
			return Stopped, nil
		}
		return Waiting, nil
	}
	// Like a list that failed: the consumer's objects in these groups are
	// unknown, so the pass must not finish (its Leases stay, it stays
	// reported and is retried), and no namespace can be proven empty.
	p.refused += len(undiscovered)

	// Copies and related copies are marked in one round and go only when
	// every mark survived; then copies first, related copies once the
	// copies are gone, since a provider controller finalizing a copy may
	// still need its related Secret.
	if end, v := r.reapMarked(ctx, p); end {
		return v, nil
	}
	// Nothing of the consumer is deleted while a live konnector showed
	// itself within the grace period — not a namespace nor a Lease either
	// — and only on a fresh read of its Leases.
	if !r.quiet(ctx, p) {
		return Waiting, nil
	}
	if ok, why := r.leasesStillStale(ctx, p); !ok {
		logger.Info("Not deleting the consumer's namespaces and Leases: " + why)
		if why == renewedUnseen {
			return Stopped, nil
		}
		return Waiting, nil
	}
	return r.reapNamespacesAndLeases(ctx, p), nil
}

// renewedUnseen is leasesStillStale's reason for a renewal.
const renewedUnseen = "a heartbeat Lease of the consumer was renewed (read from the API server; the backend's cache had not shown it yet)"

// leasesStillStale reads the consumer's heartbeat Leases from the API
// server itself — never a cache — and reports whether they still show it
// stale: none renewed since the judge saw it (Judge.Unseen), nor since the
// pass began, and none new. The first call of a pass records them. A
// failed read proves nothing: ok is false, and nothing is deleted.
func (r *Reaper) leasesStillStale(ctx context.Context, p *pass) (ok bool, why string) {
	if r.Leases == nil {
		if p.leases == nil {
			p.leases = map[string]string{}
		}
		return true, "" // without a Lease reader no Lease is deleted (listLeases), and the cache's word is all there is
	}
	sel := labels.SelectorFromSet(labels.Set{
		kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
		kbindv1alpha1.ConsumerClusterUIDLabel: p.uid,
	})
	list, err := r.Leases.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, "reading its heartbeat Leases from the API server failed: " + err.Error()
	}
	now := map[string]string{}
	for i := range list.Items {
		l := &list.Items[i]
		if !Owned(PhaseLeases, p.uid, l.Labels, l.Annotations) || !HeldBy(l.Spec.HolderIdentity, p.uid) {
			continue // not the consumer's (the judge counts it for no one)
		}
		if r.Judge != nil && r.Judge.Unseen(l) {
			return false, renewedUnseen
		}
		holder, renewed := "", ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.UTC().Format(metav1.RFC3339Micro)
		}
		now[l.Namespace+"/"+l.Name] = holder + " " + renewed
	}
	if p.leases == nil {
		p.leases = now
		return true, ""
	}
	for k, v := range now {
		if was, ok := p.leases[k]; !ok || was != v {
			return false, renewedUnseen
		}
	}
	return true, ""
}

// quiet reports whether no sign of a live konnector was seen within the
// grace period (Episode), and logs and paces the wait when one was.
func (r *Reaper) quiet(ctx context.Context, p *pass) bool {
	now, grace := r.now(), r.grace()
	if Quiet(p.episode.LastSign, now, grace) {
		return true
	}
	wait := max(p.episode.LastSign.Add(grace).Sub(now), time.Second)
	log.FromContext(ctx).Info("A konnector showed it is live within the grace period; deleting nothing of the consumer until a grace period passes without a sign",
		"sign", p.episode.Sign, "seenAgo", now.Sub(p.episode.LastSign).Round(time.Second).String(), "grace", grace.String(), "nextPassIn", wait.String())
	r.pace(p.uid, wait)
	return false
}

// observe records, after the pass's marking round, what the pass left of
// the consumer's copies, and the sign of a live konnector that shows
// against what the pass before left (Signs).
func (r *Reaper) observe(p *pass, objs []Object, marked func(Object) bool, now time.Time) {
	ep := p.episode
	if sign := Signs(ep.Copies, objs, ep.Deleted); sign != "" {
		ep.LastSign, ep.Sign = now, sign
	}
	ep.Copies = make(map[types.UID]Seen, len(objs))
	for _, o := range objs {
		ep.Copies[o.UID] = Seen{Key: o.String(), Marked: marked(o), Terminating: o.Terminating || ep.Deleted[o.UID]}
	}
}

// reapMarked is the copies and related copies phases, in two (BE-3): the
// Lease's word alone never deletes. The consumer's copies and related
// Secret/ConfigMap copies are one marking round: unless every one of them
// carries a mark that survived the grace period, those without one are
// marked (phase 1) and the pass waits. A live konnector clears the marks
// (its syncer on copies, its related syncer on related copies), so one
// unmarked object — cleared, or new — keeps them all. Only then are they
// deleted, copies first and related copies once the copies are gone, each
// read again first (a failed read deletes nothing) and deleted at the very
// version that was read (UID and resourceVersion preconditions: a
// konnector clearing the mark meanwhile wins, and stops the round).
// Anything that keeps an object for a reason that may pass ends the pass
// (Waiting): the namespaces and Leases wait for both.
func (r *Reaper) reapMarked(ctx context.Context, p *pass) (end bool, v Verdict) {
	logger := log.FromContext(ctx)
	f := r.collect(ctx, p.resources, p.uid, PhaseCopies, PhaseRelated)
	r.report(ctx, p, f)
	objs := slices.Concat(f.byPhase[PhaseCopies], f.byPhase[PhaseRelated])
	p.found += len(objs)
	now, grace := r.now(), r.grace()
	if len(f.failed) > 0 {
		// Copies that could not be listed may be cleared or deleted by a
		// live konnector unseen: no quiet period runs meanwhile.
		p.episode.LastSign, p.episode.Sign = now, "some copies could not be listed"
	}
	if len(objs) == 0 {
		r.observe(p, nil, func(Object) bool { return false }, now)
		return false, Done
	}
	var actions []CopyAction
	for _, o := range objs {
		if !o.Terminating {
			actions = append(actions, DecideCopy(nil, o.MarkedAt, p.since, now, grace))
		}
	}
	refused := map[string]bool{}
	newMarks := map[string]bool{}
	marked := func(o Object) bool {
		return newMarks[o.Key()] || (o.MarkedAt != "" && DecideCopy(nil, o.MarkedAt, p.since, now, grace) != MarkCopy)
	}
	if len(actions) > 0 && (len(f.failed) > 0 || !CopiesVerdict(actions)) {
		// Phase 1, or a mark cleared by a live konnector, or copies that
		// could not be listed (whose marks are unknown): mark, and wait.
		n, refusedMarks, written := r.markAll(ctx, p, objs, now, grace)
		newMarks = written
		r.observe(p, objs, marked, now)
		if p.stopped {
			return true, Stopped
		}
		refused = refusedMarks
		if len(f.failed) > 0 || !CopiesVerdict(dueActions(objs, refused, p.since, now, grace)) {
			due := UntilDue(dueMarks(objs, refused, p.since, now), now, grace)
			logger.Info("Marked the stale consumer's copies and related copies; they are deleted only if the marks survive the grace period (a live konnector clears them)",
				"marked", n, "copies", len(f.byPhase[PhaseCopies]), "relatedCopies", len(f.byPhase[PhaseRelated]),
				"grace", grace.String(), "nextPassIn", due.String())
			r.pace(p.uid, due)
			return true, Waiting
		}
		// Only objects the backend may not mark were left: the others are
		// due; the refused ones are reported (Blocked), as a refused
		// delete would be.
	} else {
		r.observe(p, objs, marked, now)
	}
	// Every mark survived the grace period. Still nothing goes while a
	// live konnector showed itself within it (a mark cleared, a marked
	// copy it deleted, a copy it created: Episode), nor unless the
	// consumer's Leases, read from the API server now, are as stale as
	// the cache says.
	if !r.quiet(ctx, p) {
		return true, Waiting
	}
	if ok, why := r.leasesStillStale(ctx, p); !ok {
		logger.Info("Not deleting the consumer's copies: " + why)
		if why == renewedUnseen {
			return true, Stopped
		}
		return true, Waiting
	}
	refusedBefore := p.refused
	p.refused += len(refused)
	for _, phase := range []Phase{PhaseCopies, PhaseRelated} {
		waiting, end, v := r.deleteDue(ctx, p, f.byPhase[phase], refused, now, grace)
		if end {
			return true, v
		}
		left := r.collect(ctx, p.resources, p.uid, phase)
		for _, o := range left.byPhase[phase] {
			if !refused[o.Key()] {
				// Deleted and still there (finalizers), kept back, or new.
				waiting++
			}
		}
		if v := PhaseVerdict(waiting, p.refused-refusedBefore); v == Waiting {
			logger.V(1).Info("Waiting for deletions to finish", "phase", phase.String(), "left", len(left.byPhase[phase]))
			return true, Waiting
		}
	}
	return false, Done
}

// deleteDue deletes the due copies objs (not terminating nor refused),
// each confirmed by a fresh read, and returns how many it kept back for a
// reason that may pass; end (with v) when the pass ends here: the consumer
// renewed, or a mark was cleared meanwhile (a live konnector: none of the
// rest goes). Refused deletions are added to refused.
func (r *Reaper) deleteDue(ctx context.Context, p *pass, objs []Object, refused map[string]bool, now time.Time, grace time.Duration) (waiting int, end bool, v Verdict) {
	logger := log.FromContext(ctx)
	for _, o := range objs {
		if o.Terminating || refused[o.Key()] {
			continue // its finalizers run (waited for by the caller), or refused
		}
		if !p.stillStale() {
			p.stopped = true
			logger.Info("The consumer renewed a heartbeat Lease; stopping reaping at once")
			return waiting, true, Stopped
		}
		fresh, ok, cleared := r.confirmDue(ctx, p, o, now, grace)
		if cleared {
			// A konnector cleared a mark since the list: it is live, and
			// every other copy stays too, for a grace period.
			p.episode.LastSign, p.episode.Sign = now, "the mark of "+o.String()+" cleared"
			logger.Info("A mark was cleared since the copies were listed (a live konnector); deleting none of the rest", "resource", o.Resource.ResourceName(),
				"namespace", o.Namespace, "name", o.Name)
			return waiting, true, Waiting
		}
		if !ok {
			waiting++
			continue
		}
		p.episode.Deleted[o.UID] = true
		if err := r.delete(ctx, p.uid, fresh); err != nil {
			if Refused(err) {
				// Waiting would not help; the rest goes on (Blocked).
				refused[o.Key()] = true
				p.refused++
				continue
			}
			waiting++
		}
	}
	return waiting, false, Done
}

// dueMarks are the marks of the copies that are not terminating nor
// refused, as they are now: a copy marked by this pass counts as marked
// now.
func dueMarks(objs []Object, refused map[string]bool, since, now time.Time) []string {
	var out []string
	for _, o := range objs {
		if o.Terminating || refused[o.Key()] {
			continue
		}
		mark := o.MarkedAt
		if DecideCopy(nil, mark, since, now, time.Hour) == MarkCopy {
			mark = MarkValue(now)
		}
		out = append(out, mark)
	}
	return out
}

// dueActions are the actions of the copies that are not terminating nor
// refused.
func dueActions(objs []Object, refused map[string]bool, since, now time.Time, grace time.Duration) []CopyAction {
	var out []CopyAction
	for _, o := range objs {
		if !o.Terminating && !refused[o.Key()] {
			out = append(out, DecideCopy(nil, o.MarkedAt, since, now, grace))
		}
	}
	return out
}

// markAll writes the reap mark (now) on every copy whose action is
// MarkCopy, asking stillStale before each; it returns how many it marked,
// the keys of those it may not mark (RBAC, a policy: reported like a
// refused delete, it would be refused too) and the keys of those it
// marked. A failed mark is logged: the copy stays unmarked, so nothing is
// deleted.
func (r *Reaper) markAll(ctx context.Context, p *pass, objs []Object, now time.Time, grace time.Duration) (int, map[string]bool, map[string]bool) {
	n, refused, written := 0, map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		if o.Terminating || DecideCopy(nil, o.MarkedAt, p.since, now, grace) != MarkCopy {
			continue
		}
		if !p.stillStale() {
			p.stopped = true
			log.FromContext(ctx).Info("The consumer renewed a heartbeat Lease; stopping reaping at once")
			return n, refused, written
		}
		if err := r.mark(ctx, o, now); err != nil {
			if Refused(err) {
				refused[o.Key()] = true
				deletions.WithLabelValues(o.Resource.KindName(), resultForbidden).Inc()
				r.event(o, corev1.EventTypeWarning, ReasonReapForbidden, "the kbind backend may not mark this object of stale consumer cluster %s for reaping: %v", p.uid, err)
			}
			log.FromContext(ctx).Info("Marking a copy of a stale consumer failed; it is not deleted", "resource", o.Resource.ResourceName(),
				"namespace", o.Namespace, "name", o.Name, "error", err.Error())
			continue
		}
		n++
		written[o.Key()] = true
	}
	return n, refused, written
}

// mark writes the reap mark on exactly the copy o (its UID in the patch:
// a re-created object of the same name is refused, not marked).
func (r *Reaper) mark(ctx context.Context, o Object, now time.Time) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         o.UID,
		"annotations": map[string]any{kbindv1alpha1.ReapMarkedAtAnnotation: MarkValue(now)},
	}})
	if err != nil {
		return err
	}
	if _, err := r.resourceClient(o).Patch(ctx, o.Name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("marking %s: %w", o, err)
	}
	log.FromContext(ctx).V(1).Info("Marked a copy of a stale consumer", "resource", o.Resource.ResourceName(), "namespace", o.Namespace, "name", o.Name)
	return nil
}

// confirmDue reads the copy o again, right before deleting it, and returns
// it at the version read when it is still the consumer's, not kept, and
// still carries a mark that survived the grace period. A failed read, or
// anything else, deletes nothing; cleared says the very copy lost its mark
// meanwhile (a live konnector).
func (r *Reaper) confirmDue(ctx context.Context, p *pass, o Object, now time.Time, grace time.Duration) (fresh Object, ok, cleared bool) {
	uid := p.uid
	m, err := r.resourceClient(o).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("Reading a copy of a stale consumer again before deleting it failed; not deleting it", "resource", o.Resource.ResourceName(),
				"namespace", o.Namespace, "name", o.Name, "error", err.Error())
		}
		return o, false, false
	}
	action := DecideCopy(m.Labels, m.Annotations[kbindv1alpha1.ReapMarkedAtAnnotation], p.since, now, grace)
	if m.UID != o.UID || !Owned(o.Resource.Phase, uid, m.Labels, m.Annotations) || m.DeletionTimestamp != nil || action != DeleteCopy {
		log.FromContext(ctx).V(1).Info("A copy of a stale consumer changed since it was listed (its mark cleared, kept, or replaced); not deleting it",
			"resource", o.Resource.ResourceName(), "namespace", o.Namespace, "name", o.Name)
		return o, false, m.UID == o.UID && action == MarkCopy
	}
	o.ResourceVersion = m.ResourceVersion
	return o, true, false
}

// resourceClient is the metadata client of o's resource (and namespace).
func (r *Reaper) resourceClient(o Object) metadata.ResourceInterface {
	ri := r.Metadata.Resource(o.Resource.GVR)
	if o.Namespace != "" {
		return ri.Namespace(o.Namespace)
	}
	return ri
}

// reapNamespacesAndLeases ends the pass once the copies are gone: the
// consumer's namespaces that hold nothing else go, then — unless something
// was refused, which keeps them so the consumer stays reported — its
// Leases and the namespaces that held only those.
func (r *Reaper) reapNamespacesAndLeases(ctx context.Context, p *pass) Verdict {
	f := r.collect(ctx, p.resources, p.uid, PhaseNamespaces, PhaseLeases)
	r.report(ctx, p, f)
	for _, res := range f.unlisted {
		if res == "leases.coordination.k8s.io" {
			// Without its Leases the pass cannot finish; say so instead of
			// calling it done.
			p.refused++
		}
	}
	leases := f.byPhase[PhaseLeases]
	p.found += len(leases) + len(f.byPhase[PhaseNamespaces])
	deferred := r.reapEmptyNamespaces(ctx, p, f.byPhase[PhaseNamespaces], keySet(leases))
	if p.stopped {
		return Stopped
	}
	if p.refused > 0 {
		log.FromContext(ctx).Info("Reaping cannot finish (a deletion was refused, a list failed or an API group could not be discovered); keeping the consumer's Leases so it stays reported and is retried", "refused", p.refused)
		return Blocked
	}

	r.deleteAll(ctx, p, leases)
	if p.stopped {
		return Stopped
	}
	r.reapDeferredNamespaces(ctx, p, deferred)
	if p.refused > 0 {
		return Blocked
	}
	return Done
}

// reapEmptyNamespaces deletes the consumer's namespaces that hold nothing
// else and returns those that hold only its Leases (ownLease), to delete
// right after them; one kept for now counts as refused. It stops early
// when the pass is stopped.
func (r *Reaper) reapEmptyNamespaces(ctx context.Context, p *pass, namespaces []Object, ownLease map[string]bool) (deferred []Object) {
	logger := log.FromContext(ctx)
	for _, ns := range namespaces {
		if ns.Terminating {
			continue
		}
		d := DecideNamespace(r.contents(ctx, p.resources, p.undiscovered, ns.Name), func(o Object) bool { return ownLease[o.Key()] })
		switch d.Fate {
		case KeepNamespace:
			if d.Retry {
				logger.Info("Keeping a namespace created for the consumer for now", "namespace", ns.Name, "reason", d.Reason)
				p.refused++
				continue
			}
			logger.V(1).Info("Keeping a namespace created for the consumer", "namespace", ns.Name, "reason", d.Reason)
		case DeleteNamespaceAfterLeases:
			deferred = append(deferred, ns)
		case DeleteNamespace:
			r.deleteAll(ctx, p, []Object{ns})
			if p.stopped {
				return nil
			}
		}
	}
	return deferred
}

// reapDeferredNamespaces deletes, after the consumer's Leases, the
// namespaces that held only those, unless something moved in meanwhile or
// they cannot be listed now.
func (r *Reaper) reapDeferredNamespaces(ctx context.Context, p *pass, deferred []Object) {
	for _, ns := range deferred {
		if d := DecideNamespace(r.contents(ctx, p.resources, p.undiscovered, ns.Name), func(Object) bool { return false }); d.Fate != DeleteNamespace {
			// Something moved in meanwhile, or it cannot be listed now.
			reason := d.Reason
			if reason == "" {
				reason = "it still holds a Lease of the consumer"
			}
			log.FromContext(ctx).Info("Keeping a namespace created for the consumer after deleting its Leases", "namespace", ns.Name, "reason", reason)
			continue
		}
		r.deleteAll(ctx, p, []Object{ns})
	}
}

// report logs and counts what a listing round could not list; failures
// other than RBAC keep the pass from finishing.
func (r *Reaper) report(ctx context.Context, p *pass, f *found) {
	if len(f.unlisted) > 0 {
		log.FromContext(ctx).Info("Cannot list some resources to reap (forbidden); their objects stay", "resources", f.unlisted)
		for _, res := range f.unlisted {
			deletions.WithLabelValues(res, resultListForbidden).Inc()
		}
	}
	if len(f.failed) > 0 {
		log.FromContext(ctx).Info("Listing some resources to reap failed; retrying later", "errors", f.failed)
		p.refused += len(f.failed)
	}
}

// deleteAll deletes objects one by one, asking stillStale before each;
// each refused one counts in p.refused. Objects already terminating are
// not deleted again: their finalizers run, the reaper waits.
func (r *Reaper) deleteAll(ctx context.Context, p *pass, objs []Object) {
	for _, o := range objs {
		if o.Terminating {
			continue
		}
		if !p.stillStale() {
			p.stopped = true
			log.FromContext(ctx).Info("The consumer renewed a heartbeat Lease; stopping reaping at once")
			return
		}
		if err := r.delete(ctx, p.uid, o); err != nil {
			p.refused++
		}
	}
}

// delete deletes one object with a UID precondition (a re-created object of
// the same name is never hit) and reports the outcome: an Event on the
// object, the deletion metric and a log line. Only refusals return an error.
func (r *Reaper) delete(ctx context.Context, uid string, o Object) error {
	logger := log.FromContext(ctx).WithValues("resource", o.Resource.ResourceName(), "namespace", o.Namespace, "name", o.Name)
	client := r.resourceClient(o)
	pre := &metav1.Preconditions{UID: &o.UID}
	if o.ResourceVersion != "" {
		pre.ResourceVersion = &o.ResourceVersion
	}
	err := client.Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: pre})
	kind := o.Resource.KindName()
	switch {
	case apierrors.IsConflict(err) && o.ResourceVersion != "":
		// Changed since it was read (renewed, or taken over): the next
		// pass reads it again.
		logger.V(1).Info("Object changed since it was listed; looking at it again next pass")
		return err
	case err == nil:
		deletions.WithLabelValues(kind, resultDeleted).Inc()
		logger.Info("Deleted an object of a stale consumer")
		r.event(o, corev1.EventTypeNormal, ReasonReaped, "deleted by the kbind backend: consumer cluster %s stopped heartbeating", uid)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone already, or replaced by a new object (UID precondition):
		// nothing of ours to delete.
		logger.V(1).Info("Object gone or replaced before deletion", "reason", string(apierrors.ReasonForError(err)))
		return nil
	case Refused(err):
		deletions.WithLabelValues(kind, resultForbidden).Inc()
		logger.Info("Not allowed to delete an object of a stale consumer; going on with the rest", "error", err.Error())
		r.event(o, corev1.EventTypeWarning, ReasonReapForbidden, "the kbind backend may not delete this object of stale consumer cluster %s: %v", uid, err)
		return err
	default:
		deletions.WithLabelValues(kind, resultFailed).Inc()
		logger.Info("Deleting an object of a stale consumer failed; going on with the rest", "error", err.Error())
		r.event(o, corev1.EventTypeWarning, ReasonReapFailed, "the kbind backend could not delete this object of stale consumer cluster %s: %v", uid, err)
		return err
	}
}

func (r *Reaper) event(o Object, typ, reason, format string, args ...any) {
	if r.Events == nil {
		return
	}
	ref := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: o.Resource.GVR.GroupVersion().String(), Kind: o.Resource.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID},
	}
	r.Events.Eventf(ref, nil, typ, reason, "Reap", format, args...)
}
