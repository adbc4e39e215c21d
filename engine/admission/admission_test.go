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

package admission

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecide(t *testing.T) {
	teamA := Namespace{Name: "team-a", Found: true, Labels: map[string]string{"kubernetes.io/metadata.name": "team-a", "tenant": "yes"}}
	teamX := Namespace{Name: "team-x", Found: true, Labels: map[string]string{"kubernetes.io/metadata.name": "team-x"}}
	gone := Namespace{Name: "gone"}
	selector := func(s *metav1.LabelSelector) kbindv1alpha1.NamespacedBindings {
		return kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesSelector, Selector: s}
	}
	byName := selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}}}})
	byLabel := selector(&metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "yes"}})
	cases := []struct {
		name   string
		policy kbindv1alpha1.NamespacedBindings
		ns     Namespace
		admit  bool
		why    []string
	}{
		{"unset admits none (stored before the field)", kbindv1alpha1.NamespacedBindings{}, teamA, false, []string{"spec.namespacedBindings.from is None", "only ClusterBindings"}},
		{"None admits none", kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesNone}, teamA, false, []string{"from is None"}},
		{"an unknown value admits none", kbindv1alpha1.NamespacedBindings{From: "Same"}, teamA, false, []string{"from is None"}},
		{"All admits every namespace", kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}, teamX, true, nil},
		{"All does not need the namespace", kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}, gone, true, nil},
		{"Selector by name admits a listed namespace", byName, teamA, true, nil},
		{"Selector by name refuses another", byName, teamX, false, []string{`namespace "team-x" do not match spec.namespacedBindings.selector`, "kubernetes.io/metadata.name in (team-a,team-b)"}},
		{"Selector by label admits a labelled namespace", byLabel, teamA, true, nil},
		{"Selector by label refuses an unlabelled one", byLabel, teamX, false, []string{"tenant=yes"}},
		{"Selector refuses a namespace not found", byLabel, gone, false, []string{`namespace "gone" was not found`}},
		{"the empty selector admits every namespace", selector(&metav1.LabelSelector{}), teamX, true, nil},
		{"the empty selector still needs the namespace", selector(&metav1.LabelSelector{}), gone, false, []string{"not found"}},
		{"Selector without a selector admits none", selector(nil), teamA, false, []string{"without a selector"}},
		{"an invalid selector admits none", selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tenant", Operator: "Near"}}}), teamA, false, []string{"selector is invalid", "Near"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.policy, tc.ns)
			if d.Admitted != tc.admit {
				t.Fatalf("admitted = %v (%q), want %v", d.Admitted, d.Why, tc.admit)
			}
			if d.Admitted && d.Why != "" {
				t.Errorf("an admission explains a refusal: %q", d.Why)
			}
			for _, f := range tc.why {
				if !strings.Contains(d.Why, f) {
					t.Errorf("why %q lacks %q", d.Why, f)
				}
			}
		})
	}
}

func TestMessageNamesConnectionNamespaceFieldAndWho(t *testing.T) {
	msg := Message("admin-only", "team-x", Decide(kbindv1alpha1.NamespacedBindings{}, Namespace{Name: "team-x", Found: true}))
	for _, f := range []string{`Connection "admin-only"`, `namespace "team-x"`, "spec.namespacedBindings", "a cluster admin", "ClusterBinding"} {
		if !strings.Contains(msg, f) {
			t.Errorf("message %q lacks %q", msg, f)
		}
	}
}
