// This file releases the provider copy an object leaves behind when it
// moves to another provider (docs/bindings.md#moving-between-providers):
// its route changed — a namespace relabelled across two ClusterBindings'
// selectors, its labels changed across two object selectors, its
// namespace's Binding replaced by one through another Connection — and
// the new route syncs it from now on.

package syncer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/ownership"
)

// eventMoved is the Event reason on a consumer object that moved to
// another provider.
const eventMoved = "Moved"

// MoveAction is what becomes of the old provider's copy of a moved object.
type MoveAction string

const (
	// MoveNothing means there is no copy of this route's to release.
	MoveNothing MoveAction = "Nothing"
	// MoveKeep means the copy is kept, no longer kbind's: its markers are replaced
	// by the moved annotation (the default: a relabel never destroys a
	// database).
	MoveKeep MoveAction = "Keep"
	// MoveDelete means the copy is deleted: the object's deletion policy says
	// Delete explicitly, or the object is being deleted without Orphan.
	MoveDelete MoveAction = "Delete"
)

// DecideMove decides what becomes of a moved object's copy on the
// provider it left: only a copy that is this route's (ownership Ours)
// and not already going is touched; it is deleted when the object asks
// for it (deletion policy Delete) or is itself being deleted under a
// policy that deletes (none, Delete, Foreground), and kept otherwise — an
// annotation value that names no policy (a typo of Orphan) keeps it.
func DecideMove(copyOwnership ownership.Ownership, copyDeleting bool, deletionPolicy string, objectDeleting bool) MoveAction {
	deletes := deletionPolicy == "" || deletionPolicy == kbindv1alpha1.DeletionPolicyDelete || deletionPolicy == kbindv1alpha1.DeletionPolicyForeground
	switch {
	case copyOwnership != ownership.Ours || copyDeleting:
		return MoveNothing
	case deletionPolicy == kbindv1alpha1.DeletionPolicyDelete, objectDeleting && deletes:
		return MoveDelete
	default:
		return MoveKeep
	}
}

// releaseMoved releases the copy this route made of cobj, which moved to
// Connection to (DecideMove). The consumer object's syncer finalizer is
// the new route's and is never touched here. An Event on the object says
// what became of the copy.
func (r *releaser) releaseMoved(ctx context.Context, cobj, pobj *unstructured.Unstructured, exists bool, to string) (outcome, error) {
	owned := ownership.Classify(exists, annotationsOf(pobj), r.target.ClusterUID, string(cobj.GetUID()))
	deleting := pobj != nil && !pobj.GetDeletionTimestamp().IsZero()
	action := DecideMove(owned, deleting, cobj.GetAnnotations()[kbindv1alpha1.DeletionPolicyAnnotation], !cobj.GetDeletionTimestamp().IsZero())
	if action == MoveNothing {
		return done, nil
	}
	where := fmt.Sprintf("%s %s on the provider of Connection %q", r.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), r.target.Connection)
	switch action {
	case MoveDelete:
		uid := pobj.GetUID()
		if err := r.session.Client.Delete(ctx, pobj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			if refusal.IsForbidden(err) {
				return r.failed(cobj, err, "delete", where)
			}
			return done, fmt.Errorf("deleting the copy a moved object left, %s: %w", where, err)
		}
		r.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventMoved, "Move",
			"moved to Connection %q: its copy %s was deleted", to, where)
	default:
		if err := r.keepMoved(ctx, cobj, pobj, to); err != nil {
			if apierrors.IsConflict(err) {
				return requeue, nil
			}
			if refusal.IsForbidden(err) {
				return r.failed(cobj, err, "patch", where)
			}
			return done, fmt.Errorf("releasing the copy a moved object left, %s: %w", where, err)
		}
		r.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventMoved, "Move",
			"moved to Connection %q: its copy %s was kept, no longer synced and no longer kbind's (annotation %s); "+
				"annotate the object %s=%s to delete the old copy on a move", to, where, kbindv1alpha1.MovedAnnotation,
			kbindv1alpha1.DeletionPolicyAnnotation, kbindv1alpha1.DeletionPolicyDelete)
	}
	log.FromContext(ctx).Info("Released the copy of an object that moved to another provider", "to", to, "action", string(action))
	return done, nil
}

// keepMoved replaces kbind's markers on pobj — the copy kbind read — by
// the moved annotation, conditional on that very copy (resourceVersion):
// it stays on the provider, no longer kbind's, so that no sync, drain or
// reaper touches it again.
func (r *releaser) keepMoved(ctx context.Context, cobj, pobj *unstructured.Unstructured, to string) error {
	base := client.MergeFromWithOptions(pobj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	unmark(pobj)
	ann := pobj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[kbindv1alpha1.MovedAnnotation] = fmt.Sprintf("to Connection %s: consumer object %s (UID %s) of consumer cluster %s",
		to, client.ObjectKeyFromObject(cobj), cobj.GetUID(), r.target.ClusterUID)
	pobj.SetAnnotations(ann)
	err := r.session.Client.Patch(ctx, pobj, base)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// releaseMovedAll releases, for a drain, the copies this route made of
// objects another Connection's binding claims now (to: by object key),
// each read from the provider itself.
func (r *releaser) releaseMovedAll(ctx context.Context, objs []*unstructured.Unstructured, to map[client.ObjectKey]string) error {
	for _, obj := range objs {
		key := client.ObjectKeyFromObject(obj)
		pobj, exists, err := r.providerCopy(ctx, key)
		if err != nil {
			return err
		}
		if _, err := r.releaseMoved(ctx, obj, pobj, exists, to[key]); err != nil {
			return err
		}
	}
	return nil
}
