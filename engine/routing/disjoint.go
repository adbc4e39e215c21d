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

// Package routing decides which bindings could claim the same consumer
// object when one consumer API is served through several Connections
// (providers): team-a's namespace through Connection east, team-b's through
// west. Two bindings through different Connections that could both claim
// one object are a conflict; the later one is refused and names the earlier
// one, never a silent pick.
//
// The package is pure logic: Disjoint proves that two label selectors can
// match no common label set, Overlap says whether two claims could meet on
// one object, and Refusals picks, deterministically, which claims are
// refused and by whom. Reporting (conditions, events) is the caller's.
package routing

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Disjoint reports whether it is provable that no label set matches both
// selectors. A nil or empty selector matches everything. A selector that
// does not parse is never provably disjoint (false); the caller reports the
// parse error.
//
// A label set matches both selectors only when it meets every requirement
// of both, and requirements on different keys are independent, so the
// selectors are disjoint exactly when the requirements on some one key,
// taken together, cannot all hold: In sets with no common value left after
// NotIn values are taken out (In {x} against In {y}, In S against NotIn T
// with S ⊆ T), or a key required both present (In, Exists) and absent
// (DoesNotExist). A selector that matches nothing on its own is thereby
// disjoint from anything.
func Disjoint(a, b *metav1.LabelSelector) bool {
	ra, okA := requirements(a)
	rb, okB := requirements(b)
	if !okA || !okB {
		return false
	}
	byKey := map[string]*keyConstraint{}
	for _, r := range append(ra, rb...) {
		c, ok := byKey[r.Key()]
		if !ok {
			c = &keyConstraint{}
			byKey[r.Key()] = c
		}
		c.add(r)
	}
	for _, c := range byKey {
		if c.unsatisfiable() {
			return true
		}
	}
	return false
}

// requirements parses a selector into its requirements; nil matches
// everything (no requirements). ok is false when the selector does not
// parse.
func requirements(s *metav1.LabelSelector) (labels.Requirements, bool) {
	if s == nil {
		return nil, true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, false
	}
	reqs, _ := sel.Requirements()
	return reqs, true
}

// keyConstraint is what the requirements on one key, taken together, ask
// of that key's label.
type keyConstraint struct {
	present bool             // In or Exists: the label must be set
	absent  bool             // DoesNotExist: the label must not be set
	in      sets.Set[string] // nil: any value; else the value is one of these
	notIn   sets.Set[string] // the value is none of these (or the label is unset)
}

// add folds one requirement into the constraint. Operators a LabelSelector
// cannot produce (Gt, Lt) are ignored: dropping a requirement only widens
// what matches, so a disjointness found without it still holds.
func (c *keyConstraint) add(r labels.Requirement) {
	switch r.Operator() {
	case selection.In, selection.Equals, selection.DoubleEquals:
		c.present = true
		values := sets.New(r.ValuesUnsorted()...)
		if c.in == nil {
			c.in = values
		} else {
			c.in = c.in.Intersection(values)
		}
	case selection.NotIn, selection.NotEquals:
		if c.notIn == nil {
			c.notIn = sets.New[string]()
		}
		c.notIn.Insert(r.ValuesUnsorted()...)
	case selection.Exists:
		c.present = true
	case selection.DoesNotExist:
		c.absent = true
	}
}

// unsatisfiable reports whether no label (set or unset) meets the
// constraint.
func (c *keyConstraint) unsatisfiable() bool {
	if c.present && c.absent {
		return true
	}
	return c.in != nil && c.in.Difference(c.notIn).Len() == 0
}
