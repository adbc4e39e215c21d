// This file releases the provider copy an object leaves behind when it
// moves to another provider (docs/bindings.md#moving-between-providers):
// its route changed — a namespace relabelled across two ClusterBindings'
// selectors, its labels changed across two object selectors, its
// namespace's Binding replaced by one through another Connection — and
// the new route syncs it from now on.

package syncer

import (
	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
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
