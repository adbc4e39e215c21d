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

// This file holds the sync of one consumer object, as named phases over an
// objectSync, and the phases that only read or hand over. What the others
// do lives by direction: up.go (classify, namespace, apply), down.go
// (status, the Synced condition, Events), conflict.go (conflicts),
// report.go (refusals) and release.go (every deletion and finalizer
// release).

package syncer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/internal/storage"
	"github.com/kbind/kbind/engine/ownership"
)

// outcome is what a phase of sync decides, and what sync returns to the
// worker (processNext) beside an error:
//
//   - next: go on with the next phase (sync itself never returns it);
//   - done: the object is handled for now; the worker forgets the key's
//     backoff, and the next event on either side brings it back;
//   - requeue: retry with backoff, no error logged: the waits that are
//     expected (a conflict or a gone object on a consumer write, a
//     provider refusal already reported, a copy the cache has not seen).
//
// A non-nil error ends the sync whatever the outcome: the worker logs it at
// V(1) and retries the key with backoff.
type outcome int

const (
	next outcome = iota
	done
	requeue
)

// objectSync is one sync of one consumer object: what its phases read and
// decide, filled in as they run (the scope of the cluster-api MachineSet
// controller's doReconcile is the model). A phase reads only what the
// phases before it filled in.
type objectSync struct {
	key  types.NamespacedName // the consumer object's key
	seen *changes             // when the changes handled were observed
	// Filled in by readConsumer.
	cobj   *unstructured.Unstructured // the consumer object
	policy Policy                     // how its binding syncs it
	// deselected: the binding's filters no longer select the object,
	// which holds the finalizer, and that persisted (DecideSelection): it
	// is released (releaseDeleting).
	deselected bool
	// imported: the key is the binding's import's — the consumer object
	// is absent where the binding imports, or is an imported copy (cobj
	// nil when absent): syncImport does the whole sync.
	imported bool
	// movedTo: another Connection, whose binding claims the object: a
	// copy this route made is released for the move (releaseMoved), and
	// nothing else is done.
	movedTo string
	// Filled in by place.
	pkey types.NamespacedName // its copy's provider key
	// Filled in by readProvider (from the session cache), and by applySpec
	// with the copy it applied.
	pobj   *unstructured.Unstructured // nil when !exists
	exists bool
	// Filled in by classify.
	verdict ownership.Verdict
}

// phase is one step of sync.
type phase func(ctx context.Context, o *objectSync) (outcome, error)

// sync reconciles the consumer object key with its provider copy; seen are
// when the changes it handles were observed (the writes it makes observe
// their end-to-end latency). It runs the phases in order until one returns
// an error or an outcome other than next (see outcome).
func (s *Syncer) sync(ctx context.Context, key types.NamespacedName, seen *changes) (outcome, error) {
	o := &objectSync{key: key, seen: seen}
	for _, p := range []phase{
		s.readConsumer,    // gone or out of scope: forgotten
		s.syncImport,      // an imported key: the provider object is the source, and ends here
		s.place,           // no provider place under the isolation: failed
		s.readProvider,    // a failed read is never taken as absence
		s.releaseMoved,    // an object routed elsewhere: this route's copy is released, and ends here
		s.releaseDeleting, // a deleting object is released (SYNC-D), and ends here
		s.holdFinalizer,   // before the first provider write (SYNC-D)
		s.waitTerminating, // a terminating copy is waited for (SYNC-5)
		s.classify,        // a conflict is reported, nothing written (SYNC-4)
		s.unmark,          // the reaper's mark, a kept label: removed (BE-3)
		s.ensureNamespace, // the provider namespace (SYNC-3)
		s.applySpec,       // spec up (SYNC-1)
		s.syncStatus,      // status down (SYNC-2)
		s.resolveConflict, // a conflict reported before is over
		s.release,         // handed to the provider when asked, once its spec is up (import.md#hand-over)
	} {
		if out, err := p(ctx, o); err != nil || out != next {
			return out, err
		}
	}
	s.results.set(s.target, key, Result{State: StateSynced})
	return done, nil
}

// readConsumer reads the consumer object and the policy of the binding
// that covers it. An object gone, or out of scope, is forgotten.
func (s *Syncer) readConsumer(ctx context.Context, o *objectSync) (outcome, error) {
	o.cobj = s.newObject()
	if err := s.ccache.Get(ctx, o.key, o.cobj); err != nil {
		if apierrors.IsNotFound(err) && s.imports(ctx, o.key.Namespace) {
			o.cobj, o.imported = nil, true
			return next, nil
		}
		if apierrors.IsNotFound(err) {
			s.results.forget(s.target, o.key)
			s.releaser.forget(o.key)
			s.deselected.forget(o.key)
			// A copy a write in doubt created after the release (doubt.go).
			return s.settleUnsynced(ctx, o.key)
		}
		return done, fmt.Errorf("reading consumer object: %w", err)
	}
	if !o.cobj.GetDeletionTimestamp().IsZero() {
		// Its finalizer held: the release decides (vanished.go).
		s.holds.held(o.key)
	}
	scope := s.currentScope()
	var inScope bool
	o.policy, inScope = scope.covers(o.key.Namespace)
	if isImported(o.cobj) {
		// Another Connection's imported copy is that Connection's Syncer's.
		o.imported = o.cobj.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation] == s.target.Connection
		if !o.imported {
			return done, nil
		}
		return next, nil
	}
	selected, elsewhere, err := s.selected(ctx, scope, o.policy, inScope, o.cobj)
	if err != nil {
		return done, err
	}
	if elsewhere != "" {
		// Another Connection's binding claims it: its route, its finalizer.
		// What this route may still hold of it is its copy here, released
		// for the move — also when this route saw it unselected a moment
		// ago (a relabel in two steps, deselect.go).
		s.deselected.forget(o.key)
		s.results.forget(s.target, o.key)
		o.movedTo = elsewhere
		return next, nil
	}
	if !inScope {
		s.deselected.forget(o.key)
		s.results.forget(s.target, o.key)
		return done, nil
	}
	if !selected && !controllerutil.ContainsFinalizer(o.cobj, kbindv1alpha1.SyncerFinalizer) {
		// Never synced, or released: no finalizer, no write — but a
		// copy a write in doubt created after the release (doubt.go).
		s.deselected.forget(o.key)
		s.results.forget(s.target, o.key)
		return s.settleUnsynced(ctx, o.key)
	}
	// A deselection is released only once it persists on freshly
	// computed claims; until then the copy and the finalizer stay and
	// nothing is written (deselect.go).
	switch s.decideSelection(ctx, o, selected, elsewhere) {
	case SelectionWait:
		return done, nil
	case SelectionRelease:
		o.deselected = !selected
	}
	return next, nil
}

// selected applies the binding's filters to the consumer object, and
// tells an object another Connection's binding selects (elsewhere) from
// one nobody does; the namespace's labels come from the consumer cache
// (metadata only). A failed read is an error, never "not selected":
// deselecting releases.
func (s *Syncer) selected(ctx context.Context, scope Scope, policy Policy, inScope bool, cobj *unstructured.Unstructured) (selected bool, elsewhere string, err error) {
	var nsLabels map[string]string
	if ((inScope && policy.Namespaces != nil) || scope.selectsNamespaces()) && cobj.GetNamespace() != "" {
		if nsLabels, err = namespaceLabels(ctx, s.ccache, cobj.GetNamespace()); err != nil {
			return false, "", fmt.Errorf("reading the labels of namespace %s for the bindings' namespaceSelectors: %w", cobj.GetNamespace(), err)
		}
	}
	if inScope && policy.selects(nsLabels, cobj.GetLabels()) {
		return true, "", nil
	}
	return false, scope.claimedElsewhere(cobj.GetNamespace(), nsLabels, cobj.GetLabels()), nil
}

// namespaceLabels reads a consumer namespace's labels from the cache's
// metadata-only Namespace informer (the one the bindings use).
func namespaceLabels(ctx context.Context, c client.Reader, name string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// place maps the consumer object to its provider key under the
// Connection's isolation. An object with no place there is never written
// somewhere surprising: it is failed (the binding says the same).
func (s *Syncer) place(_ context.Context, o *objectSync) (outcome, error) {
	pkey, err := s.target.Isolation.Object(o.key)
	if err != nil {
		s.unplaceable(o.cobj, err)
		return done, nil
	}
	o.pkey = pkey
	return next, nil
}

// readProvider reads the provider copy from the session cache.
func (s *Syncer) readProvider(ctx context.Context, o *objectSync) (outcome, error) {
	var err error
	if o.pobj, o.exists, err = s.providerGet(ctx, o.pkey); err != nil {
		return done, err
	}
	return next, nil
}

// releaseMoved releases, for an object another Connection's binding
// claims now, the copy this route made of it on its provider
// (releaser.releaseMoved, under this route's binding's default for a
// Terminating object); the sync ends there.
//
// An object deleted before the new route took it over (its route
// annotation still names this route: the new route's holdFinalizer never
// ran, and for a deleting object it never will) is this route's to
// release as a deletion: the new route leaves it to the route annotation
// names (releaseDeleted: routedElsewhere), so without this its finalizer
// would stay forever.
func (s *Syncer) releaseMoved(ctx context.Context, o *objectSync) (outcome, error) {
	if o.movedTo == "" {
		return next, nil
	}
	if deletedBeforeMove(o.cobj, s.target.Connection) {
		return s.releaser.releaseDeleted(ctx, o.cobj, o.policy, o.pobj, o.exists)
	}
	return s.releaser.releaseMoved(ctx, o.cobj, o.pobj, o.exists, o.movedTo, o.policy.Deletion)
}

// deletedBeforeMove reports whether cobj, which another Connection's
// binding claims now, is being deleted while it still holds the syncer
// finalizer under this route's annotation (conn): the new route never
// took it over, and never will (holdFinalizer runs only for an object not
// being deleted), so its release is this route's.
func deletedBeforeMove(cobj *unstructured.Unstructured, conn string) bool {
	return !cobj.GetDeletionTimestamp().IsZero() &&
		controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) &&
		cobj.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation] == conn
}

// releaseDeleting hands a deleting consumer object, or one the binding's
// filters no longer select, to the releaser (release.go); the sync ends
// there.
func (s *Syncer) releaseDeleting(ctx context.Context, o *objectSync) (outcome, error) {
	if o.cobj.GetDeletionTimestamp().IsZero() && !o.deselected {
		return next, nil
	}
	return s.releaser.releaseDeleted(ctx, o.cobj, o.policy, o.pobj, o.exists)
}

// holdFinalizer adds the syncer finalizer before the first provider write
// (SYNC-D), with the route annotation naming the Connection the object
// syncs through (docs/bindings.md#one-api-several-providers), and goes on
// with the patched object: no round trip through the informer before that
// write. An object that holds the finalizer already costs no write — the
// annotation is output only, and an object synced before it existed gets
// it with its next metadata write, never with a write of its own — unless
// its annotation names another Connection: it moved here
// (docs/bindings.md#moving-between-providers), and the annotation follows.
func (s *Syncer) holdFinalizer(ctx context.Context, o *objectSync) (outcome, error) {
	route, annotated := o.cobj.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation]
	if controllerutil.ContainsFinalizer(o.cobj, kbindv1alpha1.SyncerFinalizer) && (!annotated || route == s.target.Connection) {
		return next, nil
	}
	rv, adding := o.cobj.GetResourceVersion(), !controllerutil.ContainsFinalizer(o.cobj, kbindv1alpha1.SyncerFinalizer)
	err := patch.AddFinalizerAnnotated(ctx, s.consumer, o.cobj, kbindv1alpha1.SyncerFinalizer,
		map[string]string{kbindv1alpha1.ConnectionAnnotation: s.target.Connection})
	if storage.TooLarge(err) {
		return s.tooLarge(o.cobj, err)
	}
	log.FromContext(ctx).V(1).Info("Holding the syncer finalizer before the first provider write", "resourceVersion", rv, "error", errString(err))
	if err == nil && adding {
		// A DELETE racing this write may still remove the object with
		// the finalizer on it (vanished.go).
		policy, known := deletionPolicyOf(o.cobj.GetAnnotations(), o.policy.Deletion)
		s.holds.added(o.key, o.cobj.GetUID(), policy, known)
	}
	return afterConsumerWrite(err)
}

// waitTerminating waits for a terminating provider copy instead of racing
// it (SYNC-5): its deletion event brings the object back.
func (s *Syncer) waitTerminating(_ context.Context, o *objectSync) (outcome, error) {
	if !o.exists || o.pobj.GetDeletionTimestamp().IsZero() {
		return next, nil
	}
	s.results.set(s.target, o.key, Result{State: StatePending})
	return done, nil
}

// syncStatus copies the provider status down (SYNC-2).
func (s *Syncer) syncStatus(ctx context.Context, o *objectSync) (outcome, error) {
	return afterConsumerWrite(s.statusDown(ctx, o.cobj, o.pobj, o.policy.Down, o.seen))
}

// resolveConflict clears the conflict annotation of an object that syncs
// cleanly again.
func (s *Syncer) resolveConflict(ctx context.Context, o *objectSync) (outcome, error) {
	return afterConsumerWrite(s.clearConflict(ctx, o.cobj))
}

// afterConsumerWrite is the outcome of a phase that wrote the consumer
// object: a conflict or a gone object is retried with backoff without an
// error (the retry reads it again); any other error is returned.
func afterConsumerWrite(err error) (outcome, error) {
	switch {
	case err == nil:
		return next, nil
	case isConflictOrGone(err):
		return requeue, nil
	default:
		return done, err
	}
}

// providerGet reads the provider copy from the session cache.
func (s *Syncer) providerGet(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, bool, error) {
	pobj := s.newProviderObject()
	if err := s.session.Cache().Get(ctx, key, pobj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		// Never taken as absence: retried.
		return nil, false, fmt.Errorf("reading the provider copy: %w", err)
	}
	return pobj, true, nil
}

// annotationsOf returns the annotations of obj, nil when there is none.
func annotationsOf(obj *unstructured.Unstructured) map[string]string {
	if obj == nil {
		return nil
	}
	return obj.GetAnnotations()
}

// isConflictOrGone reports whether a consumer write failed on a conflict
// or a gone object: retried, without an error.
func isConflictOrGone(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// errString is err's message, "" for none (for a log value).
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
