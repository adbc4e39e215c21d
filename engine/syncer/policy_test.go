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
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/mutation"
)

func TestFiltersSelect(t *testing.T) {
	sel := func(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }
	spec := func(objects, namespaces *metav1.LabelSelector) kbindv1alpha1.BindingSpec {
		return kbindv1alpha1.BindingSpec{NamespaceSelector: namespaces, APIs: []kbindv1alpha1.APIReference{
			{Name: "widgets.example.org", ObjectSelector: objects},
			{Name: "gadgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io"}, ObjectSelector: sel(map[string]string{"g": "1"})},
		}}
	}
	for _, tc := range []struct {
		name    string
		spec    kbindv1alpha1.BindingSpec
		crd     string
		ns, obj map[string]string
		want    bool
	}{
		{"no filters: everything", spec(nil, nil), "widgets.example.org", nil, nil, true},
		{"object selected", spec(sel(map[string]string{"sync": "yes"}), nil), "widgets.example.org", nil, map[string]string{"sync": "yes"}, true},
		{"object not selected", spec(sel(map[string]string{"sync": "yes"}), nil), "widgets.example.org", nil, map[string]string{"sync": "no"}, false},
		{"namespace selected", spec(nil, sel(map[string]string{"p": "east"})), "widgets.example.org", map[string]string{"p": "east"}, nil, true},
		{"namespace not selected", spec(nil, sel(map[string]string{"p": "east"})), "widgets.example.org", map[string]string{"p": "west"}, nil, false},
		{"both must match", spec(sel(map[string]string{"sync": "yes"}), sel(map[string]string{"p": "east"})), "widgets.example.org",
			map[string]string{"p": "east"}, map[string]string{"sync": "no"}, false},
		{"a projected entry by its consumer name", spec(nil, nil), "gadgets.acme.io", nil, map[string]string{"g": "1"}, true},
		{"a projected entry's selector", spec(nil, nil), "gadgets.acme.io", nil, nil, false},
		{"an empty selector selects everything", spec(&metav1.LabelSelector{}, nil), "widgets.example.org", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policyOf(tc.spec, tc.crd, mutation.ClusterLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.selects(tc.ns, tc.obj); got != tc.want {
				t.Errorf("selects = %v, want %v", got, tc.want)
			}
		})
	}
}

// A selector that does not parse gives no policy: the binding gives no
// scope, so nothing is synced and nothing released.
func TestFiltersInvalid(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sync", Operator: "Sometimes"}}}
	for name, spec := range map[string]kbindv1alpha1.BindingSpec{
		"objectSelector":    {APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org", ObjectSelector: bad}}},
		"namespaceSelector": {NamespaceSelector: bad, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}},
	} {
		if _, err := policyOf(spec, "widgets.example.org", mutation.ClusterLimits); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
}

// statusDown hands the down rules the provider status the session cache
// holds: shaping it must never change the cached object.
func TestDownRulesLeaveTheCachedStatus(t *testing.T) {
	spec := kbindv1alpha1.BindingSpec{APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org", Mutations: &kbindv1alpha1.Mutations{
		Down: []kbindv1alpha1.MutationRule{{Path: ".status.nested.ready", Expression: "true"}, {Path: ".status.phase", Delete: true}},
	}}}}
	_, down, err := Mutations(spec, "widgets.example.org", mutation.ClusterLimits)
	if err != nil {
		t.Fatal(err)
	}
	cached := map[string]any{"phase": "Up", "nested": map[string]any{"x": int64(1)}}
	pobj := map[string]any{"status": cached}
	shaped := map[string]any{"status": cached}
	if err := down.Apply(shaped, pobj, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cached) != "map[nested:map[x:1] phase:Up]" {
		t.Errorf("the cached status changed: %v", cached)
	}
	if fmt.Sprint(shaped["status"]) != "map[nested:map[ready:true x:1]]" {
		t.Errorf("shaped %v", shaped["status"])
	}
	// The same rules compile once.
	if _, again, _ := Mutations(spec, "widgets.example.org", mutation.ClusterLimits); again != down {
		t.Error("the same rules compiled twice")
	}
}

// A namespaced Binding's rules run under the namespaced limits, a
// ClusterBinding's under the API server's; the compiled programs are
// cached per rules and limits, so the same rules in both are two programs.
func TestMutationLimits(t *testing.T) {
	if got := MutationLimits(&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "b"}}); got != mutation.NamespacedLimits {
		t.Errorf("a Binding's limits %+v", got)
	}
	if got := MutationLimits(&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}}); got != mutation.ClusterLimits {
		t.Errorf("a ClusterBinding's limits %+v", got)
	}
	spec := kbindv1alpha1.BindingSpec{APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org", Mutations: &kbindv1alpha1.Mutations{
		Up: []kbindv1alpha1.MutationRule{{Path: ".spec.all", Expression: "object.spec.items.all(x, x >= 0)"}},
	}}}}
	cluster, _, err := Mutations(spec, "widgets.example.org", mutation.ClusterLimits)
	if err != nil {
		t.Fatal(err)
	}
	namespaced, _, err := Mutations(spec, "widgets.example.org", mutation.NamespacedLimits)
	if err != nil {
		t.Fatal(err)
	}
	if again, _, _ := Mutations(spec, "widgets.example.org", mutation.NamespacedLimits); again != namespaced || namespaced == cluster {
		t.Fatal("programs are not cached per rules and limits")
	}
	// 1000 items cost about 3000: over the namespaced per-call limit only.
	items := make([]any, 1000)
	for i := range items {
		items[i] = int64(i)
	}
	object := map[string]any{"spec": map[string]any{"items": items}}
	if err := cluster.Apply(map[string]any{}, object, nil); err != nil {
		t.Errorf("under a ClusterBinding's limits: %v", err)
	}
	if err := namespaced.Apply(map[string]any{}, object, nil); err == nil || !strings.Contains(err.Error(), "a namespaced Binding's") {
		t.Errorf("under a Binding's limits: %v", err)
	}
}
