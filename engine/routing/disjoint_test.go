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

package routing

import (
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// req builds one match expression.
func req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

// sel builds a selector from match expressions.
func sel(reqs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: reqs}
}

const (
	in           = metav1.LabelSelectorOpIn
	notIn        = metav1.LabelSelectorOpNotIn
	exists       = metav1.LabelSelectorOpExists
	doesNotExist = metav1.LabelSelectorOpDoesNotExist
)

// TestDisjoint covers each rule both ways round: Disjoint(a, b) and
// Disjoint(b, a) must both equal want.
func TestDisjoint(t *testing.T) {
	unsat := sel(req("k", in, "x"), req("k", in, "y"))
	for _, tc := range []struct {
		name string
		a, b *metav1.LabelSelector
		want bool
	}{
		{"nil vs nil", nil, nil, false},
		{"nil vs empty", nil, &metav1.LabelSelector{}, false},
		{"nil vs In", nil, sel(req("k", in, "x")), false},
		{"empty vs In", &metav1.LabelSelector{}, sel(req("k", in, "x")), false},
		{"In vs In, disjoint sets", sel(req("k", in, "x", "y")), sel(req("k", in, "z")), true},
		{"In vs In, common value", sel(req("k", in, "x", "y")), sel(req("k", in, "y", "z")), false},
		{"matchLabels vs matchLabels, other value", &metav1.LabelSelector{MatchLabels: map[string]string{"k": "x"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"k": "y"}}, true},
		{"matchLabels vs matchLabels, same value", &metav1.LabelSelector{MatchLabels: map[string]string{"k": "x"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"k": "x"}}, false},
		{"matchLabels vs In", &metav1.LabelSelector{MatchLabels: map[string]string{"k": "x"}}, sel(req("k", in, "y", "z")), true},
		{"In vs In on different keys", sel(req("k", in, "x")), sel(req("j", in, "y")), false},
		{"own In intersect first", sel(req("k", in, "x", "y"), req("k", in, "y", "z")), sel(req("k", in, "x", "z")), true},
		{"own In intersect, common value", sel(req("k", in, "x", "y"), req("k", in, "y", "z")), sel(req("k", in, "y")), false},
		{"In vs NotIn, subset", sel(req("k", in, "x", "y")), sel(req("k", notIn, "x", "y", "z")), true},
		{"In vs NotIn, equal sets", sel(req("k", in, "x")), sel(req("k", notIn, "x")), true},
		{"In vs NotIn, not a subset", sel(req("k", in, "x", "y")), sel(req("k", notIn, "x")), false},
		{"NotIn vs NotIn", sel(req("k", notIn, "x")), sel(req("k", notIn, "y")), false},
		{"NotIn vs DoesNotExist", sel(req("k", notIn, "x")), sel(req("k", doesNotExist)), false},
		{"Exists vs NotIn", sel(req("k", exists)), sel(req("k", notIn, "x", "y", "z")), false},
		{"Exists vs DoesNotExist", sel(req("k", exists)), sel(req("k", doesNotExist)), true},
		{"In vs DoesNotExist", sel(req("k", in, "x")), sel(req("k", doesNotExist)), true},
		{"Exists vs DoesNotExist on different keys", sel(req("k", exists)), sel(req("j", doesNotExist)), false},
		{"Exists vs Exists", sel(req("k", exists)), sel(req("k", exists)), false},
		{"DoesNotExist vs DoesNotExist", sel(req("k", doesNotExist)), sel(req("k", doesNotExist)), false},
		{"Exists vs In", sel(req("k", exists)), sel(req("k", in, "x")), false},
		{"disjoint on one key of several", sel(req("j", exists), req("k", in, "x")), sel(req("j", in, "y"), req("k", in, "y")), true},
		{"unsatisfiable In+In vs nil", unsat, nil, true},
		{"unsatisfiable In+In vs anything", unsat, sel(req("j", exists)), true},
		{"unsatisfiable Exists+DoesNotExist vs nil", sel(req("k", exists), req("k", doesNotExist)), nil, true},
		{"unsatisfiable In+NotIn vs empty", sel(req("k", in, "x"), req("k", notIn, "x")), &metav1.LabelSelector{}, true},
		{"unparsable vs disjoint", sel(req("k", "Near", "x")), sel(req("k", doesNotExist)), false},
		{"In without values does not parse", sel(req("k", in)), sel(req("k", in, "x")), false},
		{"bad key does not parse", sel(req("k!", exists)), sel(req("k!", doesNotExist)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Disjoint(tc.a, tc.b); got != tc.want {
				t.Errorf("Disjoint(a, b) = %v, want %v", got, tc.want)
			}
			if got := Disjoint(tc.b, tc.a); got != tc.want {
				t.Errorf("Disjoint(b, a) = %v, want %v", got, tc.want)
			}
		})
	}
}

var (
	testKeys   = []string{"k1", "k2"}
	testValues = []string{"x", "y", "z"}
)

// randomSelector builds a small selector over testKeys and testValues: nil,
// empty, or a few matchLabels and match expressions of every operator.
func randomSelector(r *rand.Rand) *metav1.LabelSelector {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return &metav1.LabelSelector{}
	}
	s := &metav1.LabelSelector{}
	if r.IntN(3) == 0 {
		s.MatchLabels = map[string]string{testKeys[r.IntN(2)]: testValues[r.IntN(3)]}
	}
	ops := []metav1.LabelSelectorOperator{in, notIn, exists, doesNotExist}
	for range r.IntN(4) {
		op := ops[r.IntN(len(ops))]
		var values []string
		if op == in || op == notIn {
			for _, v := range testValues {
				if r.IntN(2) == 0 {
					values = append(values, v)
				}
			}
			if len(values) == 0 {
				values = []string{testValues[r.IntN(3)]}
			}
		}
		s.MatchExpressions = append(s.MatchExpressions, req(testKeys[r.IntN(2)], op, values...))
	}
	return s
}

// labelSets lists every label set over testKeys whose values are absent, one
// of testValues, or "other" (a value no random selector names, which
// NotIn {x,y,z} together with Exists needs).
func labelSets() []labels.Set {
	choices := append([]string{""}, append(testValues, "other")...)
	var sets []labels.Set
	for _, v1 := range choices {
		for _, v2 := range choices {
			s := labels.Set{}
			if v1 != "" {
				s["k1"] = v1
			}
			if v2 != "" {
				s["k2"] = v2
			}
			sets = append(sets, s)
		}
	}
	return sets
}

// asSelector is what a selector matches, nil matching everything.
func asSelector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	if s == nil {
		return labels.Everything()
	}
	out, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %v: %v", s, err)
	}
	return out
}

// TestDisjointSound checks random small selectors against every label set:
// whenever Disjoint says true, no label set matches both (soundness), and
// Disjoint is symmetric. It also checks that Disjoint misses nothing for
// these operators: when it says false, some label set matches both.
func TestDisjointSound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	all := labelSets()
	disjoint := 0
	for range 20000 {
		a, b := randomSelector(r), randomSelector(r)
		got := Disjoint(a, b)
		if got {
			disjoint++
		}
		if got != Disjoint(b, a) {
			t.Fatalf("Disjoint not symmetric for %v and %v", a, b)
		}
		sa, sb := asSelector(t, a), asSelector(t, b)
		var both labels.Set
		for _, ls := range all {
			if sa.Matches(ls) && sb.Matches(ls) {
				both = ls
				break
			}
		}
		switch {
		case got && both != nil:
			t.Fatalf("Disjoint(%v, %v) = true, but both match %v", sa, sb, both)
		case !got && both == nil:
			t.Fatalf("Disjoint(%v, %v) = false, but no label set matches both", sa, sb)
		}
	}
	if disjoint < 1000 {
		t.Errorf("only %d of 20000 random pairs were disjoint; the check proves little", disjoint)
	}
	t.Logf("%d of 20000 random pairs disjoint", disjoint)
}
