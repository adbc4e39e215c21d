// Import (#36, work in progress, not wired): provider objects of an API
// that kbind did not create from this consumer appear on the consumer,
// owned by the provider (core.kbind.io/owner: provider). This file holds
// the decision; the sync path does not call it yet.

package syncer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// or going.
	ImportDelete ImportAction = "Delete"
	// ImportConflict means a consumer object that is not an imported copy holds
	// the name; it is never overwritten.
	ImportConflict ImportAction = "Conflict"
)

// ImportState is what one key's sync knows of both sides.
type ImportState struct {
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
}

// DecideImport decides what the sync does for one key of an imported API.
// Only a consumer object that is an imported copy is ever written or
// deleted; a provider object with kbind's markers is the ordinary
// consumer-to-provider flow's.
func DecideImport(s ImportState) ImportAction {
	switch {
	case !s.ProviderExists || s.ProviderDeleting:
		if s.ConsumerImported && !s.ConsumerDeleting {
			return ImportDelete
		}
		return ImportNothing
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

// imports reports whether the binding covering consumer namespace ns
// imports the provider's objects.
func (s *Syncer) imports(ns string) bool {
	if !s.importing() {
		return false
	}
	p, in := s.currentScope().covers(ns)
	return in && p.Import
}

// importKey maps a provider object that carries no consumer's markers to
// the consumer key it is imported at: only a canonical provider name
// inverts (isolation.Mapping.Consumer), and only into a namespace whose
// binding imports.
func (s *Syncer) importKey(o metav1.Object) (types.NamespacedName, bool) {
	if !s.importing() || marked(o) {
		return types.NamespacedName{}, false
	}
	key, ok := s.target.Isolation.Consumer(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	if !ok || !s.imports(key.Namespace) {
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
	pkey, err := s.target.Isolation.Object(o.key)
	if err != nil {
		return done, nil
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	if err != nil {
		return done, err
	}
	if !s.imports(o.key.Namespace) {
		// No binding imports here (Import turned off, the binding gone, or
		// its filters not parsing): the scope's absence proves nothing of
		// the provider object, so an imported copy is left as it is.
		s.results.forget(s.target, o.key)
		return done, nil
	}
	if !exists && isImported(o.cobj) {
		// The cache may lag the provider: only the provider's own answer
		// deletes a copy.
		if pobj, exists, err = s.releaser.providerCopy(ctx, o.key); err != nil {
			return done, err
		}
		if exists {
			return requeue, nil
		}
	}
	st := ImportState{ProviderExists: exists}
	if exists {
		st.ProviderMarked = marked(pobj)
		st.ProviderDeleting = !pobj.GetDeletionTimestamp().IsZero()
	}
	if o.cobj != nil {
		st.ConsumerExists, st.ConsumerImported = true, isImported(o.cobj)
		st.ConsumerDeleting = !o.cobj.GetDeletionTimestamp().IsZero()
		st.InSync = exists && s.importedInSync(o.cobj, pobj, o.policy)
	}
	switch DecideImport(st) {
	case ImportCreate:
		return s.createImported(ctx, o, pobj)
	case ImportUpdate:
		return s.updateImported(ctx, o, pobj)
	case ImportDelete:
		uid := o.cobj.GetUID()
		if err := s.consumer.Delete(ctx, o.cobj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return afterConsumerWrite(err)
		}
		log.FromContext(ctx).Info("Deleted an imported object: its provider object is gone")
		s.results.forget(s.target, o.key)
		return done, nil
	}
	if o.cobj == nil {
		s.results.forget(s.target, o.key)
		return done, nil
	}
	if exists {
		if out, err := afterConsumerWrite(s.statusDown(ctx, o.cobj, pobj, o.policy.Down, o.seen)); err != nil || out != next {
			return out, err
		}
	}
	s.results.set(s.target, o.key, Result{State: StateSynced})
	return done, nil
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
	if err := s.consumer.Create(ctx, u); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return requeue, nil
		}
		return done, fmt.Errorf("creating the imported copy: %w", err)
	}
	s.events.Eventf(u, nil, corev1.EventTypeNormal, eventImported, "Import",
		"imported from %s %s on the provider of Connection %q: the provider owns it (%s: %s); its spec and status follow the provider's, and deleting it here brings it back",
		s.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), s.target.Connection, kbindv1alpha1.OwnerAnnotation, kbindv1alpha1.OwnerProvider)
	if err := s.statusDown(ctx, u, pobj, o.policy.Down, o.seen); err != nil {
		return afterConsumerWrite(err)
	}
	s.results.set(s.target, o.key, Result{State: StateSynced})
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
