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

package related

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/session"
)

// OwnerAPI is a bound API whose objects may name related objects
// (relatedResources[].reference.api).
type OwnerAPI struct {
	// GVK is the consumer CRD's kind at its storage version.
	GVK        schema.GroupVersionKind
	Namespaced bool
	// Ready says its objects can be read: the CRD is installed and its
	// syncer runs (its informer has synced). Until then the entry waits
	// and its copies stay.
	Ready bool
	// Objects and Namespaces are the binding's filters (the entry's
	// objectSelector, a ClusterBinding's namespaceSelector; nil: every
	// one): only the objects they select name related objects
	// (docs/shaping.md#filters, docs/bindings.md#one-api-several-providers).
	Objects, Namespaces labels.Selector
}

// referencePlan is what a reference entry reads: the objects of one bound
// API and the field naming the related object.
type referencePlan struct {
	api   string
	path  fieldpath.Path
	owner OwnerAPI
	// pending: the API's objects cannot be read yet; the entry's copies
	// stay.
	pending bool
	// referrals are filled in from the owners each pass.
	referrals []referral
}

// referral is one bound object (the owner) naming one related object.
type referral struct {
	owner    client.Object
	ownerUID string
	// source is where the related object is read (on the entry's source
	// side), target where its copy goes (on the other side).
	source, target types.NamespacedName
	// hold: the owner is being deleted; its copy is left as it is (kept,
	// not written) until the owner is gone, so that the Orphan policy can
	// release it first.
	hold bool
}

// ownerProblem is an owner whose field names nothing kbind can copy.
type ownerProblem struct {
	owner   client.Object
	message string
}

// relatedKeys are the places of a related object named name by a bound
// object in consumer namespace ns: on the consumer next to the bound
// object, on the provider next to its provider copy, under the isolation
// mapping (so two consumer namespaces' objects of one name never collide
// on the provider; the syncer writes the mapped name into the provider
// copy's field, see syncer.mapReferences).
func relatedKeys(iso isolation.Mapping, ns, name string) (consumer, provider types.NamespacedName, err error) {
	consumer = types.NamespacedName{Namespace: ns, Name: name}
	provider, err = iso.Object(consumer)
	return consumer, provider, err
}

// referralsOf decides, for the owners of a reference entry (any order),
// which related object each names and where its copy goes. An owner that
// names nothing is skipped silently; one whose field cannot be used, or
// that lives in a namespace kbind never copies into or from, is a
// problem. The result is sorted by owner.
func referralsOf(owners []*unstructured.Unstructured, path fieldpath.Path, from kbindv1alpha1.RelatedResourceDirection,
	kind kbindv1alpha1.RelatedResourceKind, iso isolation.Mapping, denied map[string]bool) ([]referral, []ownerProblem) {
	sorted := append([]*unstructured.Unstructured{}, owners...)
	sort.Slice(sorted, func(i, j int) bool {
		return client.ObjectKeyFromObject(sorted[i]).String() < client.ObjectKeyFromObject(sorted[j]).String()
	})
	var refs []referral
	var problems []ownerProblem
	for _, o := range sorted {
		what := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		name, err := fieldpath.Name(o, path)
		switch {
		case err != nil:
			problems = append(problems, ownerProblem{o, fmt.Sprintf("not copying the %s that %s names: %v", singular(kind), what, err)})
			continue
		case name == "":
			continue
		case o.GetNamespace() == "":
			problems = append(problems, ownerProblem{o, fmt.Sprintf("not copying %s %q that %s names: a reference names an object in the bound object's namespace, and this one is cluster-scoped", singular(kind), name, what)})
			continue
		case denied[o.GetNamespace()]:
			problems = append(problems, ownerProblem{o, fmt.Sprintf("not copying %s %s/%s that %s names: kbind never copies from or into namespace %s", singular(kind), o.GetNamespace(), name, what, o.GetNamespace())})
			continue
		}
		consumer, provider, err := relatedKeys(iso, o.GetNamespace(), name)
		if err != nil {
			problems = append(problems, ownerProblem{o, fmt.Sprintf("not copying %s %s/%s that %s names: %v", singular(kind), o.GetNamespace(), name, what, err)})
			continue
		}
		r := referral{owner: o, ownerUID: string(o.GetUID()), source: consumer, target: provider, hold: !o.GetDeletionTimestamp().IsZero()}
		if from == kbindv1alpha1.FromProvider {
			r.source, r.target = provider, consumer
		}
		refs = append(refs, r)
	}
	return refs, problems
}

// namedKey is the informer of one source object, watched by name (a
// field selector): a reference costs one watch per related object, never
// a list per owner.
func namedKey(kind kbindv1alpha1.RelatedResourceKind, at types.NamespacedName) key {
	return key{resource: kind, namespace: at.Namespace, labels: labels.NewSelector().Add(notManaged()).String(),
		fields: fields.OneTermEqualSelector("metadata.name", at.Name).String()}
}

// resolveReferences reads the owners of every reference entry from the
// consumer cache (the syncers' informers) and fills in the entry's
// referrals and the named informers of their sources. An entry whose
// owners cannot be read waits, and keeps its copies.
func (r *syncRun) resolveReferences(ctx context.Context, plans []entryPlan) {
	for i := range plans {
		p := &plans[i]
		rp := p.reference
		if rp == nil || p.skip != "" || rp.pending {
			continue
		}
		owners, err := r.selectedOwners(ctx, rp.owner)
		if err != nil {
			rp.pending = true
			r.failures = append(r.failures, fmt.Errorf("reading the %s objects relatedResources[%d] refers through: %w", rp.api, p.index, err))
			continue
		}
		if p.entry.Direction == kbindv1alpha1.FromConsumer {
			var imported []*unstructured.Unstructured
			owners, imported = consumerMade(owners)
			if len(imported) > 0 {
				r.res.Status.Skipped += int32(len(imported))
				r.refuse(*p, "imported-owners", importedOwners(*p, imported))
			}
		}
		refs, problems := referralsOf(owners, rp.path, p.entry.Direction, p.entry.Resource, r.b.Isolation, r.c.denied)
		rp.referrals = refs
		for _, pr := range problems {
			r.res.Status.Skipped++
			r.c.report(r.ps, p.id, "reference/"+client.ObjectKeyFromObject(pr.owner).String(), pr.owner, "RelatedSkipped", "%s", pr.message)
		}
		seen := map[key]bool{}
		for _, rf := range refs {
			if k := namedKey(p.entry.Resource, rf.source); !seen[k] {
				seen[k] = true
				p.keys = append(p.keys, k)
			}
		}
	}
}

// consumerMade splits the owners of a FromConsumer reference entry into
// the objects the consumer made (made) and the imported copies of the
// provider's own objects (core.kbind.io/owner: provider, docs/import.md).
// An imported object's spec is written by whoever may write the provider
// object — a provider-side tenant among them — so the name its field holds
// is not the consumer's choice: taken as an owner, it would copy any
// consumer Secret it names up to the provider. Imported objects are never
// owners of FromConsumer related objects; an adopted one (kubectl kbind
// adopt) is the consumer's and counts again.
func consumerMade(owners []*unstructured.Unstructured) (made, imported []*unstructured.Unstructured) {
	for _, o := range owners {
		if o.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider {
			imported = append(imported, o)
			continue
		}
		made = append(made, o)
	}
	return made, imported
}

// importedOwners says why a FromConsumer reference entry copied nothing for
// the imported objects among its owners, naming a few of them.
func importedOwners(p entryPlan, imported []*unstructured.Unstructured) string {
	names := make([]string, 0, len(imported))
	for _, o := range imported {
		names = append(names, client.ObjectKeyFromObject(o).String())
	}
	sort.Strings(names)
	named := strings.Join(names[:min(len(names), 3)], ", ")
	if len(names) > 3 {
		named += fmt.Sprintf(" and %d more", len(names)-3)
	}
	return fmt.Sprintf("relatedResources[%d] copies no consumer %s for %d imported %s object(s) (%s: %s; the provider writes their %s, so the name it holds is not this cluster's choice): %s; "+
		"kubectl kbind adopt an object to make it this cluster's", p.index, singular(p.entry.Resource), len(imported), p.reference.api,
		kbindv1alpha1.OwnerAnnotation, kbindv1alpha1.OwnerProvider, p.reference.path.String(), named)
}

// selectedOwners reads, from the consumer cache, the objects of owner in
// the binding's namespace (every one for a ClusterBinding) that its
// filters select; the namespaces' labels come from the cache's
// metadata-only Namespace informer.
func (r *syncRun) selectedOwners(ctx context.Context, owner OwnerAPI) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(owner.GVK.GroupVersion().WithKind(owner.GVK.Kind + "List"))
	opts := []client.ListOption{client.InNamespace(r.b.Namespace)}
	if owner.Objects != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: owner.Objects})
	}
	if err := r.c.opts.ConsumerCache.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	selected := map[string]bool{}
	owners := make([]*unstructured.Unstructured, 0, len(list.Items))
	for j := range list.Items {
		ns := list.Items[j].GetNamespace()
		if owner.Namespaces != nil && ns != "" {
			in, known := selected[ns]
			if !known {
				meta := &metav1.PartialObjectMetadata{}
				meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
				if err := r.c.opts.ConsumerCache.Get(ctx, client.ObjectKey{Name: ns}, meta); client.IgnoreNotFound(err) != nil {
					return nil, fmt.Errorf("reading the labels of namespace %s: %w", ns, err)
				}
				in = owner.Namespaces.Matches(labels.Set(meta.Labels))
				selected[ns] = in
			}
			if !in {
				continue
			}
		}
		owners = append(owners, &list.Items[j])
	}
	return owners, nil
}

// copyReferences copies what the owners of a reference entry name. The
// copy of an owner being deleted is held as it is. A source that cannot
// be read keeps every copy of the entry.
func (r *syncRun) copyReferences(ctx context.Context, p entryPlan) {
	rp := p.reference
	if rp.pending {
		r.wait(p)
		return
	}
	for _, k := range p.keys {
		if err := readable(r.infs[ref{r.pools[p.source], k}].state()); err != nil {
			r.unreadable(p, err)
			return
		}
	}
	copiesInf, copiesErr := r.copies(p.target(), p.entry.Resource)
	switch {
	case errors.Is(copiesErr, ErrNotReadYet):
		r.unreadable(p, copiesErr) // listed in a moment: no GET per target meanwhile
		return
	case copiesErr != nil:
		copiesInf = nil // unreadable: every target is read with a GET
	}
	for _, rf := range rp.referrals {
		ck := claimKey(p.target(), p.entry.Resource, rf.target)
		if rf.hold {
			if _, taken := r.claims[ck]; !taken {
				r.claims[ck] = claim{entry: p.id, target: p.target()}
			}
			continue
		}
		src, ok := r.infs[ref{r.pools[p.source], namedKey(p.entry.Resource, rf.source)}].get(rf.source.Namespace, rf.source.Name)
		if !ok {
			continue // not there (yet): a copy of it goes
		}
		r.copySource(ctx, p, src, copiesInf, rf.target, rf.ownerUID)
	}
}

// unreadable records that an entry's sources (or its copies) could not be
// read: its copies stay; not listed yet is waited for (the first list
// re-queues the binding), a refusal is reported, anything else fails the
// pass.
func (r *syncRun) unreadable(p entryPlan, err error) {
	r.wait(p)
	switch {
	case errors.Is(err, ErrNotReadYet):
		r.res.NotReadYet = true
	case isForbidden(err):
		r.forbidden[fmt.Sprintf("list %s (%s side)", p.entry.Resource, p.source)] = true
	default:
		r.failures = append(r.failures, fmt.Errorf("reading the sources of relatedResources[%d] (%s, %s side): %w", p.index, p.entry.Resource, p.source, err))
	}
}

// wait keeps an entry that cannot read its sources now as it is: its
// copies stay, its reported problems too, and so do the copies of removed
// entries that it might copy again once it reads (collectable).
func (r *syncRun) wait(p entryPlan) {
	r.kept[p.id] = true
	r.ps.unread[p.id] = true
	r.unreadTargets[p.target().String()+"/"+string(p.entry.Resource)] = true
}

// ownerChanged says whether an event on a bound object (old or cur nil
// for an add or a delete) can change what reference entries with the
// given paths copy: the name a field holds, or the object starting to be
// deleted, while it names something.
func ownerChanged(old, cur *unstructured.Unstructured, paths []fieldpath.Path) bool {
	named := false
	for _, p := range paths {
		a, aerr := fieldpath.Name(old, p)
		b, berr := fieldpath.Name(cur, p)
		if a != b || (aerr == nil) != (berr == nil) {
			return true
		}
		named = named || a != "" || aerr != nil
	}
	return named && terminating(old) != terminating(cur)
}

func terminating(o *unstructured.Unstructured) bool {
	return o != nil && !o.GetDeletionTimestamp().IsZero()
}

// ownerWatch is the Copier's event handler on the consumer informer of one
// bound API whose objects name related objects.
type ownerWatch struct {
	inf   cache.Informer
	reg   toolscache.ResourceEventHandlerRegistration
	users map[string]ownerUser
}

// ownerUser is a binding that reads an API's objects for references.
type ownerUser struct {
	connection string
	namespace  string
	paths      []fieldpath.Path
}

// watchOwners makes the copier watch the consumer objects of the APIs the
// binding's reference entries read (want: their kinds and paths), through
// the consumer cache's informers, which the syncers already run. An event
// that changes what a binding copies re-queues its Connection's bindings.
func (c *Copier) watchOwners(ctx context.Context, b Binding, want map[schema.GroupVersionKind][]fieldpath.Path) error {
	var failures []error
	for gvk, paths := range want {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		inf, err := c.opts.ConsumerCache.GetInformer(ctx, u)
		if err != nil {
			failures = append(failures, fmt.Errorf("watching %s objects for references: %w", gvk.Kind, err))
			continue
		}
		c.mu.Lock()
		w := c.owners[gvk]
		if w == nil || w.inf != inf {
			users := map[string]ownerUser{}
			if w != nil {
				_ = w.inf.RemoveEventHandler(w.reg)
				users = w.users
			}
			reg, err := inf.AddEventHandler(c.ownerHandler(gvk))
			if err != nil {
				c.mu.Unlock()
				failures = append(failures, fmt.Errorf("watching %s objects for references: %w", gvk.Kind, err))
				continue
			}
			w = &ownerWatch{inf: inf, reg: reg, users: users}
			c.owners[gvk] = w
		}
		w.users[b.UID] = ownerUser{connection: b.Connection, namespace: b.Namespace, paths: paths}
		c.mu.Unlock()
	}
	c.mu.Lock()
	for gvk := range c.owners {
		if _, ok := want[gvk]; !ok {
			c.unwatchOwnerLocked(gvk, b.UID)
		}
	}
	c.mu.Unlock()
	return errors.Join(failures...)
}

func (c *Copier) unwatchOwnerLocked(gvk schema.GroupVersionKind, uid string) {
	w := c.owners[gvk]
	if w == nil {
		return
	}
	delete(w.users, uid)
	if len(w.users) == 0 {
		_ = w.inf.RemoveEventHandler(w.reg)
		delete(c.owners, gvk)
	}
}

func (c *Copier) ownerHandler(gvk schema.GroupVersionKind) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.ownerEvent(gvk, nil, obj) },
		UpdateFunc: func(old, obj any) { c.ownerEvent(gvk, old, obj) },
		DeleteFunc: func(obj any) { c.ownerEvent(gvk, obj, nil) },
	}
}

func asUnstructured(obj any) *unstructured.Unstructured {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// ownerEvent re-queues the bindings whose copies an event on a bound
// object may change.
func (c *Copier) ownerEvent(gvk schema.GroupVersionKind, old, cur any) {
	o, n := asUnstructured(old), asUnstructured(cur)
	ns := ""
	if o != nil {
		ns = o.GetNamespace()
	} else if n != nil {
		ns = n.GetNamespace()
	}
	conns := map[string]bool{}
	c.mu.Lock()
	if w := c.owners[gvk]; w != nil {
		for _, u := range w.users {
			if (u.namespace == "" || u.namespace == ns) && ownerChanged(o, n, u.paths) {
				conns[u.connection] = true
			}
		}
	}
	c.mu.Unlock()
	if c.opts.Trigger == nil {
		return
	}
	for conn := range conns {
		c.opts.Trigger(conn)
	}
}

// ReleaseOrphaned releases the related copies made for owner, a bound
// consumer object being deleted with the Orphan policy: they lose the
// binding's related-binding annotation and the owner label, so that no
// pass deletes them when the owner is gone; they keep the managed markers
// (kbind never copies from them, and a later copy to the same place is a
// reported conflict). The copies are found by their owner label, in the
// owner's namespace on the consumer and its mapped namespace on the
// provider: one selected list per side and kind, once per such deletion.
// done is false until every copy found was released.
func (c *Copier) ReleaseOrphaned(ctx context.Context, sess *session.Session, clusterUID string, iso isolation.Mapping, owner client.Object) (bool, error) {
	uid := string(owner.GetUID())
	if uid == "" || owner.GetNamespace() == "" {
		return true, nil
	}
	_, pkey, err := relatedKeys(iso, owner.GetNamespace(), "x")
	if err != nil {
		return true, nil //nolint:nilerr // no provider place: nothing was copied there
	}
	type place struct {
		s         side
		c         client.Client
		namespace string
		sel       client.MatchingLabels
	}
	places := []place{{consumerSide, c.opts.ConsumerClient, owner.GetNamespace(),
		client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.RelatedOwnerLabel: uid}}}
	if sess != nil && clusterUID != "" {
		places = append(places, place{providerSide, sess.Client, pkey.Namespace, client.MatchingLabels{
			kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.RelatedOwnerLabel: uid, kbindv1alpha1.ConsumerClusterUIDLabel: clusterUID}})
	}
	var failures []error
	for _, pl := range places {
		for _, list := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}} {
			if err := pl.c.List(ctx, list, client.InNamespace(pl.namespace), pl.sel); err != nil {
				failures = append(failures, fmt.Errorf("listing the related copies of %s/%s (%s side): %w", owner.GetNamespace(), owner.GetName(), pl.s, err))
				continue
			}
			var items []client.Object
			switch l := list.(type) {
			case *corev1.SecretList:
				for i := range l.Items {
					items = append(items, &l.Items[i])
				}
			case *corev1.ConfigMapList:
				for i := range l.Items {
					items = append(items, &l.Items[i])
				}
			}
			for _, obj := range items {
				if err := release(ctx, pl.c, obj); err != nil {
					failures = append(failures, fmt.Errorf("releasing related copy %s/%s (%s side): %w", obj.GetNamespace(), obj.GetName(), pl.s, err))
					continue
				}
				log.FromContext(ctx).Info("Kept a related copy: its owner is deleted with the Orphan policy", "side", pl.s.String(),
					"namespace", obj.GetNamespace(), "name", obj.GetName())
			}
		}
	}
	if err := errors.Join(failures...); err != nil {
		return false, err
	}
	return true, nil
}

// release takes a copy out of kbind's care: it drops the related-binding
// annotation and the owner label, conditional on the copy read.
func release(ctx context.Context, c client.Client, obj client.Object) error {
	base := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	ann, lbl := obj.GetAnnotations(), obj.GetLabels()
	delete(ann, kbindv1alpha1.RelatedBindingAnnotation)
	delete(lbl, kbindv1alpha1.RelatedOwnerLabel)
	obj.SetAnnotations(ann)
	obj.SetLabels(lbl)
	err := c.Patch(ctx, obj, base)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
