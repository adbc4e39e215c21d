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

package schema

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// namedCRD is a CRD of group with spec.names n (singular and list kind
// left for defaulted to fill in, as the API server does) and, when
// accepted, the same status.acceptedNames.
func namedCRD(name, group string, n apiextensionsv1.CustomResourceDefinitionNames, accepted bool) apiextensionsv1.CustomResourceDefinition {
	crd := apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	crd.Spec.Group, crd.Spec.Names = group, n
	if accepted {
		crd.Status.AcceptedNames = defaulted(n)
	}
	return crd
}

func names4(plural, singular, kind string, short ...string) apiextensionsv1.CustomResourceDefinitionNames {
	return apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ShortNames: short}
}

func describe(cs []NameConflict) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s of %s", c.Field, c.Name, c.CRD))
	}
	return strings.Join(out, "; ")
}

// NameConflicts follows the consumer API server's naming controller:
// within one group plural, singular and short names share one namespace
// (each against the others' plural, singular and short names), kind and
// list kind share another; other groups and the CRD itself never count.
// One rule is kbind's own: names only asked for count too.
func TestNameConflicts(t *testing.T) {
	gizmoz := Stamp("gizmoz.acme.io", apiextensionsv1.CustomResourceDefinitionSpec{Group: "acme.io",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmoz", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList", ShortNames: []string{"gz"}}}, "c")
	cases := []struct {
		name  string
		other apiextensionsv1.CustomResourceDefinition
		want  string
	}{
		{"the issue's case: another plural, the same kind (KindConflict), singular and list kind",
			namedCRD("gizmos.acme.io", "acme.io", names4("gizmos", "", "Gizmo"), true),
			"singular gizmo of gizmos.acme.io; kind Gizmo of gizmos.acme.io; list kind GizmoList of gizmos.acme.io"},
		{"free: everything differs", namedCRD("widgets.acme.io", "acme.io", names4("widgets", "", "Widget", "wd"), true), ""},
		{"another group never counts", namedCRD("gizmos.other.io", "other.io", names4("gizmoz", "gizmo", "Gizmo", "gz"), true), ""},
		{"the CRD itself (as cached) never counts", namedCRD("gizmoz.acme.io", "acme.io", names4("gizmoz", "gizmo", "Gizmo", "gz"), true), ""},
		{"our plural is their singular", namedCRD("things.acme.io", "acme.io", names4("things", "gizmoz", "Thing"), true),
			"plural gizmoz of things.acme.io"},
		{"our singular is their plural", namedCRD("gizmo.acme.io", "acme.io", names4("gizmo", "gizmothing", "GizmoThing"), true),
			"singular gizmo of gizmo.acme.io"},
		{"our short name is their plural", namedCRD("gz.acme.io", "acme.io", names4("gz", "gzthing", "GzThing"), true),
			"short name gz of gz.acme.io"},
		{"our plural is their short name", namedCRD("others.acme.io", "acme.io", names4("others", "", "Other", "gizmoz"), true),
			"plural gizmoz of others.acme.io"},
		{"short name against short name", namedCRD("others.acme.io", "acme.io", names4("others", "", "Other", "gz"), true),
			"short name gz of others.acme.io"},
		{"our kind is their list kind", namedCRD("lists.acme.io", "acme.io",
			apiextensionsv1.CustomResourceDefinitionNames{Plural: "lists", Kind: "List", ListKind: "Gizmo"}, true),
			"kind Gizmo of lists.acme.io"},
		{"our list kind is their kind", namedCRD("gizmolists.acme.io", "acme.io", names4("gizmolists", "", "GizmoList"), true),
			"list kind GizmoList of gizmolists.acme.io"},
		{"kinds and resource names are separate namespaces: kind gizmoz is no plural", namedCRD("zs.acme.io", "acme.io",
			apiextensionsv1.CustomResourceDefinitionNames{Plural: "zs", Singular: "z", Kind: "gizmoz", ListKind: "gz"}, true), ""},
		{"kbind's rule: names asked for but not (yet) accepted count", namedCRD("gizmos.acme.io", "acme.io", names4("gizmos", "", "Gizmo"), false),
			"singular gizmo of gizmos.acme.io; kind Gizmo of gizmos.acme.io; list kind GizmoList of gizmos.acme.io"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(NameConflicts(gizmoz, []apiextensionsv1.CustomResourceDefinition{tc.other})); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	// Accepted names that differ from spec (spec changed since) count as
	// the API server counts them.
	moved := namedCRD("gadgets.acme.io", "acme.io", names4("gadgets", "", "Gadget"), false)
	moved.Status.AcceptedNames = defaulted(names4("gizmoz", "", "Gadget"))
	if got := describe(NameConflicts(gizmoz, []apiextensionsv1.CustomResourceDefinition{moved})); got != "plural gizmoz of gadgets.acme.io" {
		t.Errorf("accepted names: %q", got)
	}
	if NameConflicts(nil, []apiextensionsv1.CustomResourceDefinition{moved}) != nil {
		t.Error("no desired CRD, conflicts")
	}
	// The holder is kbind's: said so.
	kb := namedCRD("gizmos.acme.io", "acme.io", names4("gizmos", "", "Gizmo"), true)
	kb.Labels = map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}
	if cs := NameConflicts(gizmoz, []apiextensionsv1.CustomResourceDefinition{kb}); len(cs) == 0 || !cs[0].Kbind {
		t.Errorf("kbind's holder: %+v", cs)
	}
}

func TestDescribeNameConflicts(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	spec := apiextensionsv1.CustomResourceDefinitionSpec{Group: "acme.io", Names: names4("gizmoz", "gizmo", "Gizmo")}
	projected := Stamp("gizmoz.acme.io", spec, "c")
	projected.Annotations[kbindv1alpha1.ProviderAPIAnnotation] = "widgets.example.org"
	plain := Stamp("gizmoz.acme.io", spec, "c")
	conflicts := []NameConflict{{CRD: "gizmos.acme.io", Field: "kind", Name: "Gizmo"}, {CRD: "gizmos.acme.io", Field: "singular", Name: "gizmo"},
		{CRD: "other.acme.io", Field: "plural", Name: "gizmoz", Kbind: true}}
	for _, tc := range []struct {
		name      string
		desired   *apiextensionsv1.CustomResourceDefinition
		conflicts []NameConflict
		wants     []string
	}{
		{"projected", projected, conflicts, []string{
			"the consumer API gizmoz.acme.io is not installed", "group acme.io", "kind Gizmo, singular gizmo of the CRD gizmos.acme.io (which kbind did not create)",
			"plural gizmoz of the CRD other.acme.io (which kbind installed for another API)", "project widgets.example.org onto another kind and plural"}},
		{"unprojected: a cluster admin can project it", plain, conflicts[:1], []string{
			"kind Gizmo of the CRD gizmos.acme.io", "a cluster admin can bind gizmoz.acme.io with a ClusterBinding that projects it onto another kind and plural"}},
		{"released a moment ago", projected, []NameConflict{{CRD: "gizmos.acme.io", Field: "kind", Name: "Gizmo", GoneSince: now.Add(-12 * time.Second)}}, []string{
			"kind Gizmo of the CRD gizmos.acme.io (which kbind did not create), deleted 12s ago", "for 1m0s", "deleted and created again"}},
	} {
		got := DescribeNameConflicts(tc.desired, tc.conflicts, now)
		for _, w := range tc.wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}

// A CRD of the cluster's that held names kbind wanted keeps them for
// NamesHold after kbind first sees it gone: deleted and created again (an
// operator upgrade), it finds them free.
func TestReleasedNames(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	desired := Stamp("gizmoz.acme.io", apiextensionsv1.CustomResourceDefinitionSpec{Group: "acme.io", Names: names4("gizmoz", "gizmo", "Gizmo")}, "c")
	foreign := namedCRD("gizmos.acme.io", "acme.io", names4("gizmos", "", "Gizmo"), true)
	kbinds := namedCRD("gizmoes.acme.io", "acme.io", names4("gizmoes", "", "Gizmo"), true)
	kbinds.Labels = map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}
	live := []apiextensionsv1.CustomResourceDefinition{foreign, kbinds}

	var r ReleasedNames
	r.Observe("acme.io", live, NameConflicts(desired, live), now)
	if got := r.Conflicts(desired); len(got) != 0 {
		t.Fatalf("while the holders exist they are live conflicts, not released ones: %+v", got)
	}
	r.Observe("acme.io", nil, nil, now.Add(5*time.Second)) // both gone
	got := r.Conflicts(desired)
	if describe(got) != "singular gizmo of gizmos.acme.io; kind Gizmo of gizmos.acme.io; list kind GizmoList of gizmos.acme.io" || !got[0].GoneSince.Equal(now.Add(5*time.Second)) {
		t.Errorf("the foreign CRD's names right after it went (kbind's own is not held): %+v", got)
	}
	r.Observe("other.io", nil, nil, now.Add(time.Hour)) // another group: untouched
	if len(r.Conflicts(desired)) == 0 {
		t.Error("a check of another group forgot acme.io's released names")
	}
	r.Observe("acme.io", nil, nil, now.Add(5*time.Second+NamesHold-time.Second))
	if len(r.Conflicts(desired)) == 0 {
		t.Error("released names free before NamesHold")
	}
	// Created again within the hold: a live holder again, no longer gone.
	r.Observe("acme.io", []apiextensionsv1.CustomResourceDefinition{foreign}, nil, now.Add(30*time.Second))
	if got := r.Conflicts(desired); len(got) != 0 {
		t.Errorf("a holder created again is still remembered gone: %+v", got)
	}
	r.Observe("acme.io", nil, nil, now.Add(40*time.Second))
	r.Observe("acme.io", nil, nil, now.Add(40*time.Second+NamesHold))
	if got := r.Conflicts(desired); len(got) != 0 {
		t.Errorf("released names still held after NamesHold: %+v", got)
	}
}

func TestRefusedNeverServed(t *testing.T) {
	base := func(mutate func(*apiextensionsv1.CustomResourceDefinition)) *apiextensionsv1.CustomResourceDefinition {
		crd := Stamp("gizmoz.acme.io", apiextensionsv1.CustomResourceDefinitionSpec{Group: "acme.io", Names: names4("gizmoz", "gizmo", "Gizmo")}, "c")
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse, Reason: "KindConflict", Message: `"Gizmo" is already in use`},
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted"},
		}
		if mutate != nil {
			mutate(crd)
		}
		return crd
	}
	deleting := metav1.Now()
	for _, tc := range []struct {
		name string
		crd  *apiextensionsv1.CustomResourceDefinition
		want bool
	}{
		{"kbind's, names refused, never established: delete", base(nil), true},
		{"no status yet: the naming controller has not looked", base(func(c *apiextensionsv1.CustomResourceDefinition) { c.Status.Conditions = nil }), false},
		{"names accepted", base(func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.Conditions[0].Status = apiextensionsv1.ConditionTrue
		}), false},
		{"established (then a names update was refused): it served, objects may be stored", base(func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.Conditions[1].Status = apiextensionsv1.ConditionTrue
		}), false},
		{"another Connection's", base(func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Annotations[kbindv1alpha1.ConnectionAnnotation] = "d"
		}), false},
		{"stamped under pullPolicy None (no schema hash): not kbind's", base(func(c *apiextensionsv1.CustomResourceDefinition) {
			delete(c.Annotations, kbindv1alpha1.SchemaHashAnnotation)
		}), false},
		{"not kbind's at all", base(func(c *apiextensionsv1.CustomResourceDefinition) { c.Labels = nil }), false},
		{"already being deleted", base(func(c *apiextensionsv1.CustomResourceDefinition) { c.DeletionTimestamp = &deleting }), false},
		{"absent", nil, false},
	} {
		got := RefusedNeverServed(tc.crd, "c")
		if (got != "") != tc.want {
			t.Errorf("%s: %q, want refused %v", tc.name, got, tc.want)
		}
		if tc.want && got != `KindConflict: "Gizmo" is already in use` {
			t.Errorf("%s: %q does not carry the API server's reason and message", tc.name, got)
		}
	}
}

func TestDecideReplace(t *testing.T) {
	spec := apiextensionsv1.CustomResourceDefinitionSpec{Group: "acme.io", Names: names4("gizmos", "gizmo", "Gizmo")}
	unprojected := Stamp("gizmos.acme.io", spec, "c") // a Binding's: the provider's gizmos.acme.io
	desired := Stamp("gizmos.acme.io", spec, "c")
	desired.Annotations[kbindv1alpha1.ProviderAPIAnnotation] = "widgets.example.org"
	desired.Annotations[kbindv1alpha1.ProviderKindAnnotation] = "Widget"
	foreign := unprojected.DeepCopy()
	foreign.Labels = nil
	for _, tc := range []struct {
		name     string
		existing *apiextensionsv1.CustomResourceDefinition
		owner    string
		h        Holders
		ok       bool
		action   Action
		wants    []string
	}{
		{"nothing holds it: replace", unprojected, "c", Holders{}, true, ActionReplace, nil},
		{"another Connection's, nothing holds it: replace", Stamp("gizmos.acme.io", spec, "d"), "d", Holders{}, true, ActionReplace, nil},
		{"a live Binding lists it", unprojected, "c", Holders{Bindings: []string{"team-x/gizmos"}}, true, ActionReport,
			[]string{"CRD gizmos.acme.io serves the provider's gizmos.acme.io (Connection \"c\")", "Binding team-x/gizmos lists it",
				"remove gizmos.acme.io from those bindings", "project widgets.example.org onto another group or kind"}},
		{"it holds objects", unprojected, "c", Holders{Objects: 3}, true, ActionReport, []string{"it holds 3 object(s), which deleting it would delete"}},
		{"Bindings and objects, both named", unprojected, "c", Holders{Bindings: []string{"team-x/a", "team-y/b"}, Objects: 1}, true, ActionReport,
			[]string{"Binding team-x/a, team-y/b lists it", "it holds 1 object(s)"}},
		{"a ClusterBinding lists it: never taken", unprojected, "c", Holders{ClusterBindings: []string{"gizmos"}}, true, ActionReport,
			[]string{"ClusterBinding gizmos lists it (a ClusterBinding never takes"}},
		{"its Connection installs every export", unprojected, "c", Holders{PullsAll: true}, true, ActionReport, []string{`Connection "c" installs every export (pullPolicy All)`}},
		{"not kbind's: Collision's message stands", foreign, "", Holders{}, false, "", nil},
		{"stamped under pullPolicy None: not kbind's", func() *apiextensionsv1.CustomResourceDefinition {
			c := unprojected.DeepCopy()
			delete(c.Annotations, kbindv1alpha1.SchemaHashAnnotation)
			return c
		}(), "c", Holders{}, false, "", nil},
		{"the same API: no collision (DecideTakeOver's, or Decide's)", desired.DeepCopy(), "c", Holders{}, false, "", nil},
		{"absent", nil, "c", Holders{}, false, "", nil},
	} {
		d, ok := DecideReplace(tc.existing, desired, tc.owner, tc.h)
		if ok != tc.ok || d.Action != tc.action {
			t.Errorf("%s: %v %v (%s), want %v %v", tc.name, d.Action, ok, d.Problem, tc.action, tc.ok)
		}
		for _, w := range tc.wants {
			if !strings.Contains(d.Problem, w) {
				t.Errorf("%s: %q lacks %q", tc.name, d.Problem, w)
			}
		}
	}
}
