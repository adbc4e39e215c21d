// Package reaper deletes what a consumer cluster that stopped heartbeating
// left on the provider (spec BE-3): its provider copies, then its related
// Secret/ConfigMap copies, then the namespaces kbind created for it once they
// hold nothing else, and last its heartbeat Leases. It selects server-side by
// the consumer-cluster-uid label, re-checks every marker before deleting,
// deletes with a UID precondition, never strips finalizers, and keeps no
// state between passes: a restarted backend recomputes everything from the
// cluster, so nothing is deleted twice or missed.
package reaper

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Event reasons on reaped objects.
const (
	ReasonReaped        = "Reaped"
	ReasonReapForbidden = "ReapForbidden"
	ReasonReapFailed    = "ReapFailed"
)

// Reaper runs reaping passes against the provider.
type Reaper struct {
	// Metadata lists and deletes objects of any resource (metadata only:
	// the reaper never reads Secret or ConfigMap contents).
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	// Events records one Event per deletion; nil records none.
	Events events.EventRecorder
}

// Plan is everything of one consumer the reaper would delete now, in order.
type Plan struct {
	Consumer   string
	Copies     []Object
	Related    []Object
	Namespaces []Object
	Leases     []Object
	// Kept are namespaces created for the consumer that hold other objects.
	Kept map[string][]Object
	// Unlisted names resources that could not be listed (forbidden, or
	// with the error).
	Unlisted []string
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
// version only, with its phase.
func (r *Reaper) discover(ctx context.Context) ([]Resource, error) {
	lists, err := r.Discovery.ServerPreferredResources()
	if err != nil {
		if !discovery.IsGroupDiscoveryFailedError(err) {
			return nil, fmt.Errorf("discovering the provider's resources: %w", err)
		}
		// Some aggregated API is down: go on with the rest; its objects are
		// found by a later pass.
		log.FromContext(ctx).Info("Some API groups could not be discovered; reaping what the others serve", "error", err.Error())
	}
	var out []Resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") || !hasVerb(ar.Verbs, "list") {
				continue
			}
			out = append(out, Resource{
				GVR:        gv.WithResource(ar.Name),
				Kind:       ar.Kind,
				Namespaced: ar.Namespaced,
				Deletable:  hasVerb(ar.Verbs, "delete"),
				Phase:      PhaseOf(gv.Group, ar.Name),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ResourceName() < out[j].ResourceName() })
	return out, nil
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// listOwned lists a resource's objects of the consumer: server-side selection
// by the managed and consumer-cluster-uid labels, then every marker
// re-checked here.
func (r *Reaper) listOwned(ctx context.Context, res Resource, uid string) ([]Object, error) {
	sel := labels.SelectorFromSet(labels.Set{
		kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
		kbindv1alpha1.ConsumerClusterUIDLabel: uid,
	})
	list, err := r.Metadata.Resource(res.GVR).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	var out []Object
	for i := range list.Items {
		m := &list.Items[i]
		if !Owned(res.Phase, uid, m.Labels, m.Annotations) {
			continue
		}
		out = append(out, Object{Resource: res, Namespace: m.Namespace, Name: m.Name, UID: m.UID, Terminating: m.DeletionTimestamp != nil})
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
func (r *Reaper) collect(ctx context.Context, resources []Resource, uid string, phases ...Phase) (*found, error) {
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
	return f, nil
}

// contents lists every object in a namespace (metadata only). ok is false
// when some resource could not be listed: then the namespace cannot be
// proven empty.
func (r *Reaper) contents(ctx context.Context, resources []Resource, namespace string) (objs []Object, ok bool, err error) {
	ok = true
	for _, res := range resources {
		if !res.Namespaced || (res.GVR.Resource == "events" && (res.GVR.Group == "" || res.GVR.Group == "events.k8s.io")) {
			continue
		}
		list, lerr := r.Metadata.Resource(res.GVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(lerr) || apierrors.IsMethodNotSupported(lerr):
			continue
		case apierrors.IsForbidden(lerr):
			ok = false
			continue
		case lerr != nil:
			return nil, false, fmt.Errorf("listing %s in namespace %s: %w", res.ResourceName(), namespace, lerr)
		}
		for i := range list.Items {
			m := &list.Items[i]
			objs = append(objs, Object{Resource: res, Namespace: m.Namespace, Name: m.Name, UID: m.UID, Terminating: m.DeletionTimestamp != nil})
		}
	}
	return objs, ok, nil
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

// Plan computes what reaping the consumer would delete, deleting nothing:
// a namespace counts as empty when everything in it is on the plan.
func (r *Reaper) Plan(ctx context.Context, uid string) (*Plan, error) {
	resources, err := r.discover(ctx)
	if err != nil {
		return nil, err
	}
	f, err := r.collect(ctx, resources, uid, PhaseCopies, PhaseRelated, PhaseLeases, PhaseNamespaces)
	if err != nil {
		return nil, err
	}
	p := &Plan{Consumer: uid, Copies: f.byPhase[PhaseCopies], Related: f.byPhase[PhaseRelated], Leases: f.byPhase[PhaseLeases],
		Kept: map[string][]Object{}, Unlisted: append(f.unlisted, f.failed...)}
	planned := keySet(p.Copies, p.Related, p.Leases)
	for _, ns := range f.byPhase[PhaseNamespaces] {
		objs, ok, err := r.contents(ctx, resources, ns.Name)
		if err != nil {
			return nil, err
		}
		blocking := Blocking(objs, func(o Object) bool { return planned[o.Key()] })
		if !ok || len(blocking) > 0 {
			p.Kept[ns.Name] = blocking
			continue
		}
		p.Namespaces = append(p.Namespaces, ns)
	}
	return p, nil
}

// pass carries one reaping pass's bookkeeping.
type pass struct {
	uid        string
	stillStale func() bool
	refused    int
	stopped    bool
}

// Reap runs one pass for the consumer; see the package comment for the
// order. done is true once nothing of the consumer is left.
func (r *Reaper) Reap(ctx context.Context, uid string, stillStale func() bool) (bool, error) {
	v, err := r.Pass(ctx, uid, stillStale)
	return v == Done, err
}

// Pass runs one reaping pass and says how it ended.
func (r *Reaper) Pass(ctx context.Context, uid string, stillStale func() bool) (Verdict, error) {
	logger := log.FromContext(ctx).WithValues("consumerClusterUID", uid)
	ctx = log.IntoContext(ctx, logger)
	resources, err := r.discover(ctx)
	if err != nil {
		return Waiting, err
	}
	p := &pass{uid: uid, stillStale: stillStale}

	// Copies, then related copies: each phase waits for the previous one to
	// be gone, since a provider controller finalizing a copy may still need
	// its related Secret.
	for _, phase := range []Phase{PhaseCopies, PhaseRelated} {
		f, err := r.collect(ctx, resources, uid, phase)
		if err != nil {
			return Waiting, err
		}
		r.report(ctx, p, f)
		objs := f.byPhase[phase]
		if len(objs) == 0 {
			continue
		}
		refusedBefore := p.refused
		refusedKeys := r.deleteAll(ctx, p, objs)
		if p.stopped {
			return Stopped, nil
		}
		left, err := r.collect(ctx, resources, uid, phase)
		if err != nil {
			return Waiting, err
		}
		remaining := 0
		for _, o := range left.byPhase[phase] {
			if !refusedKeys[o.Key()] {
				remaining++
			}
		}
		if v := PhaseVerdict(remaining, p.refused-refusedBefore); v == Waiting {
			logger.V(1).Info("Waiting for deletions to finish", "phase", phase.String(), "left", remaining)
			return Waiting, nil
		}
	}

	f, err := r.collect(ctx, resources, uid, PhaseNamespaces, PhaseLeases)
	if err != nil {
		return Waiting, err
	}
	r.report(ctx, p, f)
	for _, res := range f.unlisted {
		if res == "leases.coordination.k8s.io" {
			// Without its Leases the pass cannot finish; say so instead of
			// calling it done.
			p.refused++
		}
	}
	leases := f.byPhase[PhaseLeases]
	ownLease := keySet(leases)
	// Namespaces that hold nothing else go now; those that hold only the
	// consumer's Leases go right after the Leases.
	var deferred []Object
	for _, ns := range f.byPhase[PhaseNamespaces] {
		if ns.Terminating {
			continue
		}
		objs, ok, err := r.contents(ctx, resources, ns.Name)
		if err != nil {
			logger.Info("Cannot tell whether a namespace created for the consumer is empty; keeping it for now", "namespace", ns.Name, "error", err.Error())
			p.refused++
			continue
		}
		if blocking := Blocking(objs, func(o Object) bool { return ownLease[o.Key()] }); !ok || len(blocking) > 0 {
			logger.V(1).Info("Keeping a namespace created for the consumer: it holds other objects", "namespace", ns.Name, "objects", len(blocking), "allListed", ok)
			continue
		}
		if len(Blocking(objs, func(Object) bool { return false })) > 0 {
			deferred = append(deferred, ns)
			continue
		}
		r.deleteAll(ctx, p, []Object{ns})
		if p.stopped {
			return Stopped, nil
		}
	}
	if p.refused > 0 {
		logger.Info("Some deletions were refused; keeping the consumer's Leases so it stays reported and is retried", "refused", p.refused)
		return Blocked, nil
	}

	r.deleteAll(ctx, p, leases)
	if p.stopped {
		return Stopped, nil
	}
	for _, ns := range deferred {
		objs, ok, err := r.contents(ctx, resources, ns.Name)
		if err != nil {
			return Waiting, err
		}
		if blocking := Blocking(objs, func(Object) bool { return false }); !ok || len(blocking) > 0 {
			continue // something moved in meanwhile
		}
		r.deleteAll(ctx, p, []Object{ns})
	}
	if p.refused > 0 {
		return Blocked, nil
	}
	return Done, nil
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

// deleteAll deletes objects one by one, asking stillStale before each, and
// returns the keys of the refused ones. Objects already terminating are
// not deleted again: their finalizers run, the reaper waits.
func (r *Reaper) deleteAll(ctx context.Context, p *pass, objs []Object) map[string]bool {
	refused := map[string]bool{}
	for _, o := range objs {
		if o.Terminating {
			continue
		}
		if !p.stillStale() {
			p.stopped = true
			log.FromContext(ctx).Info("The consumer renewed a heartbeat Lease; stopping reaping at once")
			return refused
		}
		if err := r.delete(ctx, p.uid, o); err != nil {
			refused[o.Key()] = true
			p.refused++
		}
	}
	return refused
}

// delete deletes one object with a UID precondition (a re-created object of
// the same name is never hit) and reports the outcome: an Event on the
// object, the deletion metric and a log line. Only refusals return an error.
func (r *Reaper) delete(ctx context.Context, uid string, o Object) error {
	logger := log.FromContext(ctx).WithValues("resource", o.Resource.ResourceName(), "namespace", o.Namespace, "name", o.Name)
	ri := r.Metadata.Resource(o.Resource.GVR)
	var client metadata.ResourceInterface = ri
	if o.Namespace != "" {
		client = ri.Namespace(o.Namespace)
	}
	objUID := o.UID
	err := client.Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &objUID}})
	kind := o.Resource.KindName()
	switch {
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
	case apierrors.IsForbidden(err):
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
