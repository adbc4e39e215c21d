package syncer

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecideHandOver(t *testing.T) {
	toConsumer, toProvider := kbindv1alpha1.HandOverConsumer, kbindv1alpha1.HandOverProvider
	imported := HandOverState{Imported: true, Importing: true, ProviderExists: true}
	owned := HandOverState{Finalized: true, Importing: true, ProviderExists: true, Reserved: true, Reimportable: true}
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
		{"release: the objectSelector would not import it back (issue #51)", with(owned, func(s *HandOverState) {
			s.Requested, s.Reimportable, s.Selector, s.ProviderLabels = toProvider, false, "sync=yes", "app=db"
		}), HandOverRefuse},
		{"release done on the consumer: unreserved even if the selector changed since", with(owned, func(s *HandOverState) {
			s.Imported, s.Finalized, s.Reimportable = true, false, false
		}), HandOverUnreserve},
	}
	for _, tc := range cases {
		if got, why := DecideHandOver(tc.s); got != tc.want || (got == HandOverRefuse) != (why != "") {
			t.Errorf("%s: DecideHandOver = %s (%q), want %s", tc.name, got, why, tc.want)
		}
	}
}

// TestReimportable: a release is refused unless the entry's objectSelector
// selects the provider copy's labels as import reads them, kbind's markers
// removed.
func TestReimportable(t *testing.T) {
	sel := func(s string) labels.Selector {
		out, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	copyWith := func(l map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		marked := map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.ConsumerClusterUIDLabel: "c1",
			kbindv1alpha1.ConsumerNamespaceLabel: "team-a", kbindv1alpha1.ConsumerNameLabel: "db"}
		for k, v := range l {
			marked[k] = v
		}
		u.SetLabels(marked)
		return u
	}
	for _, tc := range []struct {
		name     string
		policy   Policy
		labels   map[string]string
		want     bool
		selector string
	}{
		{"no objectSelector: always", Policy{}, nil, true, ""},
		{"the selector's label copied up (spec.metadata.labels)", Policy{Objects: sel("sync=yes")}, map[string]string{"sync": "yes"}, true, "sync=yes"},
		{"the selector's label only on the consumer object", Policy{Objects: sel("sync=yes")}, map[string]string{"app": "db"}, false, "sync=yes"},
		{"a selector on kbind's markers never counts them", Policy{Objects: sel(kbindv1alpha1.ManagedLabel + "=true")}, nil, false, kbindv1alpha1.ManagedLabel + "=true"},
		{"a negative selector", Policy{Objects: sel("tier!=gold")}, map[string]string{"tier": "silver"}, true, "tier!=gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, selector, left := reimportable(tc.policy, copyWith(tc.labels))
			if ok != tc.want || selector != tc.selector {
				t.Fatalf("reimportable = %v, %q (labels left %q); want %v, %q", ok, selector, left, tc.want, tc.selector)
			}
			if strings.Contains(left, "core.kbind.io/") {
				t.Errorf("the labels left after a release hold kbind's markers: %q", left)
			}
		})
	}
}
