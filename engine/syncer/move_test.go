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

package syncer

import (
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/ownership"
)

func TestDecideMove(t *testing.T) {
	const (
		none   = kbindv1alpha1.DeletionPolicy("")
		orphan = kbindv1alpha1.DeletionPolicyOrphan
		del    = kbindv1alpha1.DeletionPolicyDelete
	)
	annotated := func(v string) map[string]string { return map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: v} }
	for _, tc := range []struct {
		name           string
		owned          ownership.Ownership
		copyDeleting   bool
		annotations    map[string]string
		def            kbindv1alpha1.DeletionPolicy // the binding's spec.deletionPolicy
		objectDeleting bool
		want           MoveAction
	}{
		{"no copy", ownership.Absent, false, nil, none, false, MoveNothing},
		{"someone else's copy is never touched", ownership.Another, false, annotated(kbindv1alpha1.DeletionPolicyDelete), none, false, MoveNothing},
		{"an unmarked copy is never touched", ownership.Unmarked, false, nil, none, true, MoveNothing},
		{"a copy going already", ownership.Ours, true, annotated(kbindv1alpha1.DeletionPolicyDelete), none, false, MoveNothing},
		{"default: kept (a relabel never destroys a database)", ownership.Ours, false, nil, none, false, MoveKeep},
		{"Orphan: kept", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyOrphan), none, false, MoveKeep},
		{"Delete explicitly: deleted", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyDelete), none, false, MoveDelete},
		{"a live object ignores its binding's Delete default: kept", ownership.Ours, false, nil, del, false, MoveKeep},
		{"a live object ignores its binding's Orphan default, its annotation Delete wins", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyDelete), orphan, false, MoveDelete},
		{"an object being deleted: its old copy goes too", ownership.Ours, false, nil, none, true, MoveDelete},
		{"an object being deleted with Orphan: kept", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyOrphan), none, true, MoveKeep},
		{"an object being deleted, no annotation, its binding's default Orphan: kept (issue #52)", ownership.Ours, false, nil, orphan, true, MoveKeep},
		{"an object being deleted, no annotation, its binding's default Delete: deleted", ownership.Ours, false, nil, del, true, MoveDelete},
		{"an object being deleted, no annotation, its binding's default Foreground: deleted", ownership.Ours, false, nil, kbindv1alpha1.DeletionPolicyForeground, true, MoveDelete},
		{"an object being deleted: its annotation Delete beats the binding's Orphan", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyDelete), orphan, true, MoveDelete},
		{"an object being deleted: its annotation Orphan beats the binding's Delete", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyOrphan), del, true, MoveKeep},
		{"an unknown policy is not Delete", ownership.Ours, false, annotated("delete"), none, false, MoveKeep},
		{"an object being deleted with a typo (orphan): kept, never guessed at", ownership.Ours, false, annotated("orphan"), none, true, MoveKeep},
		{"an object being deleted with an empty annotation: kept, never guessed at", ownership.Ours, false, annotated(""), del, true, MoveKeep},
		{"an object being deleted with Foreground: its old copy goes", ownership.Ours, false, annotated(kbindv1alpha1.DeletionPolicyForeground), none, true, MoveDelete},
	} {
		if got := DecideMove(tc.owned, tc.copyDeleting, tc.annotations, tc.def, tc.objectDeleting); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
