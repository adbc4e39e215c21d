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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecideHandOver(t *testing.T) {
	toConsumer, toProvider := kbindv1alpha1.HandOverConsumer, kbindv1alpha1.HandOverProvider
	imported := HandOverState{Imported: true, Importing: true, ProviderExists: true, SelectedAfter: true}
	owned := HandOverState{Finalized: true, Importing: true, ProviderExists: true, Reserved: true, SelectedAfter: true}
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
			s.Requested, s.SelectedAfter, s.Selector, s.Labels = toProvider, false, "sync=yes", "app=db"
		}), HandOverRefuse},
		{"release done on the consumer: unreserved even if the selector changed since", with(owned, func(s *HandOverState) {
			s.Imported, s.Finalized, s.SelectedAfter = true, false, false
		}), HandOverUnreserve},
		{"adopt: the objectSelector would release it at once (issue #51)", with(imported, func(s *HandOverState) {
			s.Requested, s.SelectedAfter, s.Selector, s.Labels = toConsumer, false, "sync=yes", ""
		}), HandOverRefuse},
		{"adopt: reserved, then the object's labels left the selector: unreserved, then refused", with(imported, func(s *HandOverState) {
			s.Requested, s.Reserved, s.SelectedAfter = toConsumer, true, false
		}), HandOverUnreserve},
	}
	for _, tc := range cases {
		if got, why := DecideHandOver(tc.s); got != tc.want || (got == HandOverRefuse) != (why != "") {
			t.Errorf("%s: DecideHandOver = %s (%q), want %s", tc.name, got, why, tc.want)
		}
	}
}

// TestSelectedAfter: a hand-over is refused unless the entry's
// objectSelector selects the object as the side taking it over reads it:
// the consumer object's labels for an adoption, the provider copy's
// labels without kbind's markers for a release.
func TestSelectedAfter(t *testing.T) {
	sel := func(s string) labels.Selector {
		out, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	markedWith := func(l map[string]string) *unstructured.Unstructured {
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
		unmarked bool
		want     bool
		selector string
	}{
		{"no objectSelector: always", Policy{}, nil, true, true, ""},
		{"release: the selector's label copied up (spec.metadata.labels)", Policy{Objects: sel("sync=yes")}, map[string]string{"sync": "yes"}, true, true, "sync=yes"},
		{"release: the selector's label only on the consumer object", Policy{Objects: sel("sync=yes")}, map[string]string{"app": "db"}, true, false, "sync=yes"},
		{"release: a selector on kbind's markers never counts them", Policy{Objects: sel(kbindv1alpha1.ManagedLabel + "=true")}, nil, true, false, kbindv1alpha1.ManagedLabel + "=true"},
		{"release: a negative selector", Policy{Objects: sel("tier!=gold")}, map[string]string{"tier": "silver"}, true, true, "tier!=gold"},
		{"adopt: the imported copy carries the label", Policy{Objects: sel("sync=yes")}, map[string]string{"sync": "yes"}, false, true, "sync=yes"},
		{"adopt: the label only on the provider object", Policy{Objects: sel("sync=yes")}, map[string]string{"app": "db"}, false, false, "sync=yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, selector, read := selectedAfter(tc.policy, markedWith(tc.labels), tc.unmarked)
			if ok != tc.want || selector != tc.selector {
				t.Fatalf("selectedAfter = %v, %q (labels read %q); want %v, %q", ok, selector, read, tc.want, tc.selector)
			}
			if tc.unmarked && strings.Contains(read, "core.kbind.io/") {
				t.Errorf("the labels left after a release hold kbind's markers: %q", read)
			}
		})
	}
}
