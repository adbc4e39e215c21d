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

package doctor

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestRouteFindings(t *testing.T) {
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AsExpected"}}
	binding := func(kind, ns, name, conn string, sel map[string]string, apis ...string) BindingState {
		b := BindingState{Kind: kind, Meta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:   kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: conn}},
			Status: kbindv1alpha1.BindingStatus{Conditions: ready}}
		if sel != nil {
			b.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: sel}
		}
		for _, a := range apis {
			b.Spec.APIs = append(b.Spec.APIs, kbindv1alpha1.APIReference{Name: a})
		}
		return b
	}
	east := binding("ClusterBinding", "", "caches-east", "mp-east", map[string]string{"region": "east"}, "caches.example.org")
	west := binding("ClusterBinding", "", "caches-west", "mp-west", map[string]string{"region": "west"}, "caches.example.org")
	teamB := binding("Binding", "team-b", "caches", "mp-west", nil, "caches.example.org", "widgets.example.org")
	covered := teamB
	covered.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "covered"}}
	overlapping := binding("ClusterBinding", "", "caches-all", "mp-west", nil, "caches.example.org")
	overlapping.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonOverlappingBinding), Message: "overlaps"}}
	widgets := binding("ClusterBinding", "", "widgets", "mp-east", nil, "widgets.example.org")

	cases := []struct {
		name     string
		bindings []BindingState
		want     []string // the evidence of each finding, in order
	}{
		{"one Connection per API: nothing to explain", []BindingState{east, widgets}, nil},
		{"two Connections through ClusterBindings", []BindingState{west, east},
			[]string{"Connection mp-east: ClusterBinding caches-east routes namespaces region=east; Connection mp-west: ClusterBinding caches-west routes namespaces region=west"}},
		{"a namespace's Binding after the ClusterBindings; one the ClusterBinding covers waits", []BindingState{covered, east, widgets},
			[]string{"Connection mp-east: ClusterBinding caches-east routes namespaces region=east; Connection mp-west: Binding team-b/caches routes namespace team-b (not yet: Ready=False/Pending)",
				"Connection mp-east: ClusterBinding widgets routes every namespace; Connection mp-west: Binding team-b/caches routes namespace team-b (not yet: Ready=False/Pending)"}},
		{"a namespace's Binding is a route of its own", []BindingState{teamB, east},
			[]string{"Connection mp-east: ClusterBinding caches-east routes namespaces region=east; Connection mp-west: Binding team-b/caches routes namespace team-b"}},
		{"a refused binding is no route, and says why", []BindingState{east, overlapping},
			[]string{"Connection mp-east: ClusterBinding caches-east routes namespaces region=east; refused (OverlappingBinding): ClusterBinding caches-all through Connection mp-west"}},
	}
	cmd := Commands{Consumer: "kubectl --context=consumer"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := routeFindings(tc.bindings, cmd)
			var evidence []string
			for _, f := range got {
				if f.Check != "api.routes" || f.Severity != SeverityNote || f.Doc != docRoutes {
					t.Errorf("finding %+v", f)
				}
				if !strings.Contains(f.Fix, `CONNECTION:.metadata.annotations.core\.kbind\.io/connection`) {
					t.Errorf("fix %q does not list each object's route", f.Fix)
				}
				evidence = append(evidence, f.Evidence)
			}
			if !reflect.DeepEqual(evidence, tc.want) {
				t.Fatalf("evidence\n%q\nwant\n%q", evidence, tc.want)
			}
		})
	}
}

func TestRouteString(t *testing.T) {
	cb := &BindingState{Kind: "ClusterBinding", Meta: metav1.ObjectMeta{Name: "caches-east"}, Spec: kbindv1alpha1.BindingSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "east"}},
		APIs:              []kbindv1alpha1.APIReference{{Name: "caches.example.org"}}}}
	annotated := metav1.ObjectMeta{Annotations: map[string]string{kbindv1alpha1.ConnectionAnnotation: "mp-east"}}
	cases := []struct {
		name string
		in   Instance
		want string
	}{
		{"annotated, with its binding", Instance{API: "caches.example.org", Connection: "mp-east", Meta: annotated, Binding: cb},
			"; synced through Connection mp-east (its core.kbind.io/connection annotation), routed by ClusterBinding caches-east: namespaces region=east"},
		{"synced before the annotation existed: its CRD's Connection", Instance{API: "caches.example.org", Connection: "mp-east", Binding: cb},
			"; synced through Connection mp-east, routed by ClusterBinding caches-east: namespaces region=east"},
		{"no binding known", Instance{API: "caches.example.org", Connection: "mp-east", Meta: annotated},
			"; synced through Connection mp-east (its core.kbind.io/connection annotation)"},
		{"no Connection", Instance{API: "caches.example.org"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeString(tc.in); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
