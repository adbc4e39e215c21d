package syncer

import (
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecideHandOver(t *testing.T) {
	toConsumer, toProvider := kbindv1alpha1.HandOverConsumer, kbindv1alpha1.HandOverProvider
	imported := HandOverState{Imported: true, Importing: true, ProviderExists: true}
	owned := HandOverState{Finalized: true, Importing: true, ProviderExists: true, Reserved: true}
	with := func(s HandOverState, mut func(*HandOverState)) HandOverState {
		mut(&s)
		return s
	}
	cases := []struct {
		name string
		s    HandOverState
		want HandOverStep
	}{
		{"an imported object, nothing asked", imported, HandOverNone},
		{"a consumer object, nothing asked", owned, HandOverNone},
		{"adopt: the provider object is reserved first", with(imported, func(s *HandOverState) { s.Requested = toConsumer }), HandOverReserve},
		{"adopt: reserved, the copy becomes the consumer's", with(imported, func(s *HandOverState) { s.Requested, s.Reserved = toConsumer, true }), HandOverToConsumer},
		{"adopt withdrawn after the reservation: unreserved", with(imported, func(s *HandOverState) { s.Reserved = true }), HandOverUnreserve},
		{"adopt: the provider object gone", with(imported, func(s *HandOverState) { s.Requested, s.ProviderExists = toConsumer, false }), HandOverRefuse},
		{"adopt: the provider object deleting", with(imported, func(s *HandOverState) { s.Requested, s.ProviderDeleting = toConsumer, true }), HandOverRefuse},
		{"adopt: another's markers on the provider object", with(imported, func(s *HandOverState) { s.Requested, s.MarkedByOther = toConsumer, true }), HandOverRefuse},
		{"adopt: no binding imports here", with(imported, func(s *HandOverState) { s.Requested, s.Importing = toConsumer, false }), HandOverRefuse},
		{"adopt: the copy deleting", with(imported, func(s *HandOverState) { s.Requested, s.Deleting = toConsumer, true }), HandOverRefuse},
		{"adopt asked of a consumer object: nothing", with(owned, func(s *HandOverState) { s.Requested = toConsumer }), HandOverNone},
		{"release: the object becomes the provider's", with(owned, func(s *HandOverState) { s.Requested = toProvider }), HandOverToProvider},
		{"release done on the consumer: the provider object is unreserved", with(owned, func(s *HandOverState) { s.Imported, s.Finalized = true, false }), HandOverUnreserve},
		{"release: no binding imports here", with(owned, func(s *HandOverState) { s.Requested, s.Importing = toProvider, false }), HandOverRefuse},
		{"release: no copy of its own", with(owned, func(s *HandOverState) { s.Requested, s.Reserved = toProvider, false }), HandOverRefuse},
		{"release: the copy deleting", with(owned, func(s *HandOverState) { s.Requested, s.ProviderDeleting = toProvider, true }), HandOverRefuse},
		{"release: the object deleting", with(owned, func(s *HandOverState) { s.Requested, s.Deleting = toProvider, true }), HandOverRefuse},
		{"release asked of an imported object: nothing", with(imported, func(s *HandOverState) { s.Requested = toProvider }), HandOverNone},
	}
	for _, tc := range cases {
		if got, why := DecideHandOver(tc.s); got != tc.want || (got == HandOverRefuse) != (why != "") {
			t.Errorf("%s: DecideHandOver = %s (%q), want %s", tc.name, got, why, tc.want)
		}
	}
}
