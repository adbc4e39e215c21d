package syncer

import (
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/ownership"
)

func TestDecideMove(t *testing.T) {
	for _, tc := range []struct {
		name           string
		owned          ownership.Ownership
		copyDeleting   bool
		policy         string
		objectDeleting bool
		want           MoveAction
	}{
		{"no copy", ownership.Absent, false, "", false, MoveNothing},
		{"someone else's copy is never touched", ownership.Another, false, kbindv1alpha1.DeletionPolicyDelete, false, MoveNothing},
		{"an unmarked copy is never touched", ownership.Unmarked, false, "", true, MoveNothing},
		{"a copy going already", ownership.Ours, true, kbindv1alpha1.DeletionPolicyDelete, false, MoveNothing},
		{"default: kept (a relabel never destroys a database)", ownership.Ours, false, "", false, MoveKeep},
		{"Orphan: kept", ownership.Ours, false, kbindv1alpha1.DeletionPolicyOrphan, false, MoveKeep},
		{"Delete explicitly: deleted", ownership.Ours, false, kbindv1alpha1.DeletionPolicyDelete, false, MoveDelete},
		{"an object being deleted: its old copy goes too", ownership.Ours, false, "", true, MoveDelete},
		{"an object being deleted with Orphan: kept", ownership.Ours, false, kbindv1alpha1.DeletionPolicyOrphan, true, MoveKeep},
		{"an unknown policy is not Delete", ownership.Ours, false, "delete", false, MoveKeep},
		{"an object being deleted with a typo (orphan): kept, never guessed at", ownership.Ours, false, "orphan", true, MoveKeep},
		{"an object being deleted with Foreground: its old copy goes", ownership.Ours, false, kbindv1alpha1.DeletionPolicyForeground, true, MoveDelete},
	} {
		if got := DecideMove(tc.owned, tc.copyDeleting, tc.policy, tc.objectDeleting); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
