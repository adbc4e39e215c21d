package syncer

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestConfirmAbsence(t *testing.T) {
	cases := []struct {
		name                              string
		cached, hasFinalizer, seen, check bool
	}{
		{"the cache holds the copy: it is deleted, nothing to confirm", true, true, false, false},
		{"no finalizer: nothing is held", false, false, false, false},
		{"absent from the cache, its deletion not reported: ask the provider", false, true, false, true},
		{"absent from the cache after the informer reported the deleted copy gone", false, true, true, false},
	}
	for _, tc := range cases {
		if got := confirmAbsence(tc.cached, tc.hasFinalizer, tc.seen); got != tc.check {
			t.Errorf("%s: confirmAbsence = %v, want %v", tc.name, got, tc.check)
		}
	}
}

// Only the informer's report of the very copy release deleted spares the
// provider GET; anything else keeps it.
func TestDeletions(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	type step struct {
		op  string // expect, observed, forget
		uid types.UID
	}
	cases := []struct {
		name  string
		steps []step
		seen  bool
	}{
		{"nothing recorded", nil, false},
		{"deletion sent, not reported yet", []step{{"expect", "u1"}}, false},
		{"deletion sent and reported", []step{{"expect", "u1"}, {"observed", "u1"}}, true},
		{"another copy reported deleted", []step{{"expect", "u1"}, {"observed", "u2"}}, false},
		{"reported before release waited for it", []step{{"observed", "u1"}, {"expect", "u1"}}, false},
		{"expected again after the report (a retried release)", []step{{"expect", "u1"}, {"observed", "u1"}, {"expect", "u1"}}, true},
		{"a new copy expected after the old one was reported", []step{{"expect", "u1"}, {"observed", "u1"}, {"expect", "u2"}}, false},
		{"applied again: forgotten, a late report ignored", []step{{"expect", "u1"}, {"forget", ""}, {"observed", "u1"}}, false},
		{"finalizer released", []step{{"expect", "u1"}, {"observed", "u1"}, {"forget", ""}}, false},
	}
	for _, tc := range cases {
		var d deletions
		for _, s := range tc.steps {
			switch s.op {
			case "expect":
				d.expect(key, s.uid)
			case "observed":
				d.observed(key, s.uid)
			case "forget":
				d.forget(key)
			}
		}
		if got := d.seen(key); got != tc.seen {
			t.Errorf("%s: seen = %v, want %v", tc.name, got, tc.seen)
		}
		if d.seen(types.NamespacedName{Namespace: "ns", Name: "other"}) {
			t.Errorf("%s: another key seen", tc.name)
		}
	}
}
