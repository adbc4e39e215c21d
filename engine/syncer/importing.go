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

// Import (apis[].providerObjects: Import, docs/import.md): provider
// objects of an API that kbind did not create from this consumer appear on
// the consumer, owned by the provider (core.kbind.io/owner: provider).

package syncer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ImportAction is what the sync of an imported API does for one consumer
// key.
type ImportAction string

const (
	// ImportNothing means nothing to import at this key, or the copy follows
	// the provider object already.
	ImportNothing ImportAction = "Nothing"
	// ImportCreate creates the consumer copy of the provider object
	// (again, with a new UID, after a consumer delete).
	ImportCreate ImportAction = "Create"
	// ImportUpdate writes the provider object's spec, selected labels and
	// status over the consumer copy: a consumer edit is reverted.
	ImportUpdate ImportAction = "Update"
	// ImportDelete deletes the consumer copy: the provider object is gone
	// or going, and has been for the absence window, or the binding no
	// longer imports it.
	ImportDelete ImportAction = "Delete"
	// ImportAwaitAbsence keeps the consumer copy of a provider object that
	// is gone or going but not for the absence window yet: it may come
	// back (a restore, a namespace re-created), and then the copy follows
	// it. The key is looked at again once the window has passed.
	ImportAwaitAbsence ImportAction = "AwaitAbsence"
	// ImportConflict means a consumer object that is not an imported copy holds
	// the name; it is never overwritten.
	ImportConflict ImportAction = "Conflict"
)

// ImportScope is what the bindings say of importing at one consumer
// namespace.
type ImportScope int

const (
	// ImportUnscoped means no valid binding of this Connection covers the
	// namespace (the binding is being deleted, lists the API no more, or
	// its filters do not parse). Nothing is imported, and an imported copy
	// is left as it is: only a deliberate change removes copies (a drain,
	// or ImportOff).
	ImportUnscoped ImportScope = iota
	// ImportOff means a valid binding covers the namespace and does not import
	// there (providerObjects Ignore, a namespaceSelector or objectSelector
	// that does not select, a provider namespace that is not this
	// consumer's): an imported copy is removed.
	ImportOff
	// ImportOn means the binding imports the provider's objects here.
	ImportOn
)

// ImportState is what one key's sync knows of both sides.
type ImportState struct {
	// Scope is what the bindings say of importing at the key.
	Scope ImportScope
	// ProviderExists: a provider object at the key's provider place;
	// ProviderMarked: it carries kbind's markers (a copy of a consumer
	// object, never imported); ProviderDeleting: it is being deleted.
	ProviderExists, ProviderMarked, ProviderDeleting bool
	// ConsumerExists: a consumer object at the key; ConsumerImported: it
	// is an imported copy (core.kbind.io/owner: provider);
	// ConsumerDeleting: it is being deleted.
	ConsumerExists, ConsumerImported, ConsumerDeleting bool
	// InSync: the consumer copy's spec, selected labels and status equal
	// the provider object's.
	InSync bool
	// AbsenceConfirmed: the provider object has been gone or going, as
	// the provider itself answered, since at least the absence window
	// (AbsenceLasted).
	AbsenceConfirmed bool
}

// DecideImport decides what the sync does for one key of an imported API.
// Only a consumer object that is an imported copy is ever written or
// deleted; a provider object with kbind's markers is the ordinary
// consumer-to-provider flow's.
func DecideImport(s ImportState) ImportAction {
	removable := s.ConsumerImported && !s.ConsumerDeleting
	switch {
	case s.Scope == ImportUnscoped:
		return ImportNothing
	case s.Scope == ImportOff:
		if removable {
			return ImportDelete
		}
		return ImportNothing
	case !s.ProviderExists || s.ProviderDeleting:
		switch {
		case !removable:
			return ImportNothing
		case !s.AbsenceConfirmed:
			return ImportAwaitAbsence
		}
		return ImportDelete
	case s.ProviderMarked:
		return ImportNothing
	case !s.ConsumerExists:
		return ImportCreate
	case !s.ConsumerImported:
		return ImportConflict
	case s.ConsumerDeleting:
		// Deleted on the consumer: created again once it is gone.
		return ImportNothing
	case !s.InSync:
		return ImportUpdate
	default:
		return ImportNothing
	}
}

// importing reports whether the Syncer may import at all: an isolation
// that gives this consumer a provider place of its own, and a namespaced
// API (the binding refuses the rest with ImportRefused; this is the
// Syncer's own guard).
func (s *Syncer) importing() bool {
	return s.target.Isolation.Isolated() && s.target.Namespaced
}

// importScope is what the bindings say of importing into consumer
// namespace ns (ImportScope), with the policy that covers it. A namespace
// import needs: a valid binding of this Connection covering ns whose entry
// imports; ns not a kube- namespace, existing on the consumer and selected
// by the binding's namespaceSelector; and under Prefixed a provider
// namespace labelled with this consumer's prefix (prefixes may extend each
// other: a-b-x is b-x's under a and x's under a-b, and only the label,
// the provider admin's statement, says whose it is). A failed read is an
// error, never taken for ImportOff.
func (s *Syncer) importScope(ctx context.Context, ns string) (ImportScope, Policy, error) {
	p, covered := s.currentScope().covers(ns)
	switch {
	case !s.importing() || !covered:
		return ImportUnscoped, p, nil
	case !p.Import || strings.HasPrefix(ns, "kube-"):
		return ImportOff, p, nil
	}
	nsLabels, err := namespaceLabels(ctx, s.ccache, ns)
	switch {
	case apierrors.IsNotFound(err):
		return ImportOff, p, nil
	case err != nil:
		return ImportUnscoped, p, fmt.Errorf("reading consumer namespace %s: %w", ns, err)
	case p.Namespaces != nil && !p.Namespaces.Matches(labels.Set(nsLabels)):
		return ImportOff, p, nil
	}
	if prefix := s.target.Isolation.Prefix(); prefix != "" {
		pns := &corev1.Namespace{}
		err := s.session.Cache().Get(ctx, client.ObjectKey{Name: s.target.Isolation.Namespace(ns)}, pns)
		switch {
		case apierrors.IsNotFound(err):
			return ImportOff, p, nil
		case err != nil:
			return ImportUnscoped, p, fmt.Errorf("reading provider namespace %s: %w", s.target.Isolation.Namespace(ns), err)
		case pns.Labels[kbindv1alpha1.PrefixLabel] != prefix:
			return ImportOff, p, nil
		}
	}
	return ImportOn, p, nil
}

// imports reports whether the binding covering consumer namespace ns
// imports the provider's objects there (a failed read: not now).
func (s *Syncer) imports(ctx context.Context, ns string) bool {
	scope, _, err := s.importScope(ctx, ns)
	return err == nil && scope == ImportOn
}

// importKey maps a provider object that carries no consumer's markers to
// the consumer key it is imported at: only a canonical provider name
// inverts (isolation.Mapping.Consumer), and only into a namespace where
// the binding imports.
func (s *Syncer) importKey(o metav1.Object) (types.NamespacedName, bool) {
	if !s.importing() || marked(o) || !s.currentScope().imports() {
		return types.NamespacedName{}, false
	}
	key, ok := s.target.Isolation.Consumer(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	if !ok || !s.imports(s.ctx, key.Namespace) {
		return types.NamespacedName{}, false
	}
	return key, true
}

// marked reports whether a provider object carries a consumer's markers:
// a copy of a consumer object, this consumer's or another's, never
// imported.
func marked(o metav1.Object) bool {
	_, label := o.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel]
	_, annotation := o.GetAnnotations()[kbindv1alpha1.ConsumerClusterUIDAnnotation]
	return label || annotation
}

// isImported reports whether a consumer object is an imported copy.
func isImported(cobj *unstructured.Unstructured) bool {
	return cobj != nil && cobj.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider
}

// ProviderResourceVersionAnnotation on an imported copy records the
// provider object's resourceVersion it was last written from: a copy
// whose spec differs while the provider object has not changed was edited
// on the consumer, and the edit is reverted with an Event.
const ProviderResourceVersionAnnotation = "core.kbind.io/provider-resource-version"

// Event reasons of imported copies.
const (
	eventImported       = "Imported"
	eventImportReverted = "ImportedObjectEdited"
)

// syncImport is the whole sync of a key whose consumer object is absent
// where the binding imports, or is an imported copy: the provider object
// is the source (DecideImport), and nothing goes up.
func (s *Syncer) syncImport(ctx context.Context, o *objectSync) (outcome, error) {
	if !o.imported {
		return next, nil
	}
	st, pobj, err := s.importState(ctx, o)
	if err != nil {
		return done, err
	}
	// An absence is confirmed only by syncs that each see it: any read
	// that does not (the object there, no copy to keep, no scope) starts
	// the window again.
	gone := st.Scope == ImportOn && (!st.ProviderExists || st.ProviderDeleting) && st.ConsumerImported && !st.ConsumerDeleting
	if !gone {
		s.absences.forget(o.key)
	}
	if st.Scope == ImportUnscoped {
		// The scope's absence proves nothing of the provider object: an
		// imported copy is left as it is.
		return done, nil
	}
	if o.cobj != nil {
		if out, handled, err := s.handOver(ctx, o, st.Scope, pobj); handled {
			return out, err
		}
	}
	var wait time.Duration
	if gone {
		var read bool
		if wait, read, err = s.absenceLasted(ctx, o, &st); !read {
			return requeue, err
		}
	}
	switch DecideImport(st) {
	case ImportCreate:
		return s.createImported(ctx, o, pobj)
	case ImportUpdate:
		return s.updateImported(ctx, o, pobj)
	case ImportDelete:
		s.absences.forget(o.key)
		return s.deleteImported(ctx, o.cobj, st.Scope == ImportOff)
	case ImportAwaitAbsence:
		s.queue.AddAfter(o.key, wait)
		return done, nil
	}
	if o.cobj == nil || st.Scope == ImportOff {
		s.results.forget(s.target, o.key)
		return done, nil
	}
	if st.ProviderExists {
		if out, err := afterConsumerWrite(s.statusDown(ctx, o.cobj, pobj, o.policy.Down, o.seen)); err != nil || out != next {
			return out, err
		}
	}
	s.results.set(s.target, o.key, Result{State: StateSynced, Imported: true})
	return done, nil
}

// importState reads what DecideImport decides on: the import scope of the
// key's namespace (an objectSelector that does not select the provider
// object's labels turns it off for that object), the provider object from
// the cache, and the consumer object read before.
func (s *Syncer) importState(ctx context.Context, o *objectSync) (ImportState, *unstructured.Unstructured, error) {
	scope, policy, err := s.importScope(ctx, o.key.Namespace)
	if err != nil || scope == ImportUnscoped {
		return ImportState{}, nil, err
	}
	o.policy = policy
	st := ImportState{Scope: scope}
	if o.cobj != nil {
		st.ConsumerExists, st.ConsumerImported = true, isImported(o.cobj)
		st.ConsumerDeleting = !o.cobj.GetDeletionTimestamp().IsZero()
	}
	pkey, err := s.target.Isolation.Object(o.key)
	if err != nil {
		return ImportState{}, nil, nil
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	if err != nil {
		return ImportState{}, nil, err
	}
	if exists {
		st.ProviderExists, st.ProviderMarked = true, marked(pobj)
		st.ProviderDeleting = !pobj.GetDeletionTimestamp().IsZero()
		if policy.Objects != nil && !policy.Objects.Matches(labels.Set(pobj.GetLabels())) {
			st.Scope = ImportOff
		}
		st.InSync = o.cobj != nil && s.importedInSync(o.cobj, pobj, policy)
	}
	return st, pobj, nil
}

// deleteImported deletes an imported copy (releaser.deleteImported): its
// provider object is gone, or (off) the binding no longer imports it.
func (s *Syncer) deleteImported(ctx context.Context, cobj *unstructured.Unstructured, off bool) (outcome, error) {
	if _, err := s.releaser.deleteImported(ctx, cobj, s.target.Connection); err != nil {
		return afterConsumerWrite(err)
	}
	why := "its provider object is gone"
	if off {
		why = "the binding no longer imports it"
	}
	log.FromContext(ctx).Info("Deleted an imported object", "reason", why)
	s.results.forget(s.target, client.ObjectKeyFromObject(cobj))
	return done, nil
}

// absenceLasted reads, for an imported copy whose provider object the
// cache says is gone or going, the provider's own answer (the cache may
// lag) and how long the absence has lasted (st.AbsenceConfirmed; wait is
// what is left of the window). read is false when the provider has the
// object after all, or did not answer: the sync is retried.
func (s *Syncer) absenceLasted(ctx context.Context, o *objectSync, st *ImportState) (wait time.Duration, read bool, err error) {
	if !st.ProviderExists {
		_, exists, err := s.releaser.providerCopy(ctx, o.key)
		if exists {
			s.absences.forget(o.key)
		}
		if err != nil || exists {
			return 0, false, err
		}
	}
	// Only an absence that lasts deletes: a provider object deleted and
	// made again (a restore, its namespace re-created) keeps its copy.
	since, first := s.absences.observe(o.key)
	st.AbsenceConfirmed, wait = AbsenceLasted(since, s.absences.clock(), s.absences.window)
	if first {
		log.FromContext(ctx).Info(importAbsenceNoted, "confirmIn", wait.String())
	}
	return wait, true, nil
}

// importAbsenceNoted is logged when the provider object of an imported
// copy is first seen gone or going.
const importAbsenceNoted = "The provider object of an imported copy is gone; the copy is kept until its absence is confirmed"

// AbsenceLasted decides whether a provider object first seen gone (or
// going) at since, and seen so again now, has been so for the window: a
// copy is deleted only then. wait is how long until it will have been (0
// once confirmed). A clock that went back counts from now.
func AbsenceLasted(since, now time.Time, window time.Duration) (confirmed bool, wait time.Duration) {
	if since.After(now) {
		return false, window
	}
	if elapsed := now.Sub(since); elapsed < window {
		return false, window - elapsed
	}
	return true, 0
}

// absences records, per consumer key, when the provider object of an
// imported copy was first seen gone or going; a sync that sees it again,
// or no longer has an imported copy to keep, forgets it. Held in memory
// only: a restart starts the window again, which keeps a copy longer,
// never shorter.
type absences struct {
	window time.Duration
	clock  func() time.Time
	mu     sync.Mutex
	since  map[types.NamespacedName]time.Time
}

// observe returns when the absence at key was first seen, recording now
// when this is the first time (first).
func (a *absences) observe(key types.NamespacedName) (since time.Time, first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.since[key]; ok {
		return t, false
	}
	if a.since == nil {
		a.since = map[types.NamespacedName]time.Time{}
	}
	now := a.clock()
	a.since[key] = now
	return now, true
}

// forget drops the absence recorded at key.
func (a *absences) forget(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.since, key)
}

// importedInSync reports whether the imported copy cobj holds what the
// provider object pobj says: its spec and the labels the binding selects.
func (s *Syncer) importedInSync(cobj, pobj *unstructured.Unstructured, policy Policy) bool {
	return equality.Semantic.DeepEqual(cobj.Object["spec"], pobj.Object["spec"]) &&
		equality.Semantic.DeepEqual(selectKeys(policy.Metadata.Labels, cobj.GetLabels()), selectKeys(policy.Metadata.Labels, pobj.GetLabels())) &&
		cobj.GetAnnotations()[ProviderResourceVersionAnnotation] == pobj.GetResourceVersion()
}

// createImported creates the imported copy of pobj at the key, then its
// status.
func (s *Syncer) createImported(ctx context.Context, o *objectSync, pobj *unstructured.Unstructured) (outcome, error) {
	u := s.newObject()
	u.SetNamespace(o.key.Namespace)
	u.SetName(o.key.Name)
	u.SetAnnotations(map[string]string{kbindv1alpha1.OwnerAnnotation: kbindv1alpha1.OwnerProvider,
		kbindv1alpha1.ConnectionAnnotation: s.target.Connection, ProviderResourceVersionAnnotation: pobj.GetResourceVersion()})
	if lbl := selectKeys(o.policy.Metadata.Labels, pobj.GetLabels()); len(lbl) > 0 {
		u.SetLabels(lbl)
	}
	if spec, ok := pobj.Object["spec"]; ok {
		u.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	// A copy made before and deleted on the consumer since is made again,
	// and says so; a first import is expected and writes no Event.
	prev, again := s.results.get(s.target, o.key)
	again = again && prev.Imported
	if err := s.consumer.Create(ctx, u); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return requeue, nil
		}
		return done, fmt.Errorf("creating the imported copy: %w", err)
	}
	if again {
		s.events.Eventf(u, nil, corev1.EventTypeNormal, eventImported, "Import",
			"made again after it was deleted here: it is imported from %s %s on the provider of Connection %q, which owns it (%s: %s); delete it on the provider, or kubectl kbind adopt it first",
			s.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), s.target.Connection, kbindv1alpha1.OwnerAnnotation, kbindv1alpha1.OwnerProvider)
	}
	if err := s.statusDown(ctx, u, pobj, o.policy.Down, o.seen); err != nil {
		return afterConsumerWrite(err)
	}
	s.results.set(s.target, o.key, Result{State: StateSynced, Imported: true})
	return done, nil
}

// updateImported writes the provider object's spec and selected labels
// over the imported copy; a copy that differs while the provider object is
// unchanged since it was written was edited on the consumer: the edit is
// reverted, and a Warning Event says so.
func (s *Syncer) updateImported(ctx context.Context, o *objectSync, pobj *unstructured.Unstructured) (outcome, error) {
	edited := o.cobj.GetAnnotations()[ProviderResourceVersionAnnotation] == pobj.GetResourceVersion()
	u := o.cobj.DeepCopy()
	if spec, ok := pobj.Object["spec"]; ok {
		u.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	} else {
		delete(u.Object, "spec")
	}
	lbl := u.GetLabels()
	for _, k := range sortedKeys(selectKeys(o.policy.Metadata.Labels, lbl)) {
		delete(lbl, k)
	}
	for k, v := range selectKeys(o.policy.Metadata.Labels, pobj.GetLabels()) {
		if lbl == nil {
			lbl = map[string]string{}
		}
		lbl[k] = v
	}
	u.SetLabels(lbl)
	ann := u.GetAnnotations()
	ann[ProviderResourceVersionAnnotation] = pobj.GetResourceVersion()
	u.SetAnnotations(ann)
	if err := s.consumer.Update(ctx, u); err != nil {
		return afterConsumerWrite(err)
	}
	if edited {
		s.events.Eventf(u, nil, corev1.EventTypeWarning, eventImportReverted, "Import",
			"this object is the provider's (%s: %s): its spec follows %s %s on the provider of Connection %q, and the edit made here was reverted",
			kbindv1alpha1.OwnerAnnotation, kbindv1alpha1.OwnerProvider, s.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), s.target.Connection)
	}
	return afterConsumerWrite(s.statusDown(ctx, u, pobj, o.policy.Down, o.seen))
}
