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
// and not already going is touched. A live object's move follows its
// annotations only: the copy is deleted when its deletion-policy
// annotation says Delete, and kept otherwise — a binding-wide default
// must not turn every relabel into a deletion. An object that is itself
// being deleted follows its deletion policy as a deletion would
// (deletionPolicyOf: the annotation, else def, the binding's
// spec.deletionPolicy, else Delete): Delete and Foreground delete the
// copy, Orphan keeps it, and a value that names no policy (a typo of
// Orphan) keeps it.
func DecideMove(copyOwnership ownership.Ownership, copyDeleting bool, annotations map[string]string, def kbindv1alpha1.DeletionPolicy, objectDeleting bool) MoveAction {
	switch {
	case copyOwnership != ownership.Ours || copyDeleting:
		return MoveNothing
	case objectDeleting:
		if policy, known := deletionPolicyOf(annotations, def); known && policy != kbindv1alpha1.DeletionPolicyOrphan {
			return MoveDelete
		}
		return MoveKeep
	case annotations[kbindv1alpha1.DeletionPolicyAnnotation] == kbindv1alpha1.DeletionPolicyDelete:
		return MoveDelete
	default:
		return MoveKeep
	}
}
