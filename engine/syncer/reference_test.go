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
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/isolation"
)

func TestReferences(t *testing.T) {
	ref := func(api, path string) kbindv1alpha1.RelatedResource {
		return kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider,
			Reference: &kbindv1alpha1.RelatedResourceReference{API: api, FieldPath: path}}
	}
	spec := kbindv1alpha1.BindingSpec{APIs: []kbindv1alpha1.APIReference{
		{Name: "widgets.example.org"},
		{Name: "gadgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeGadget"}},
	}, RelatedResources: []kbindv1alpha1.RelatedResource{
		ref("widgets.example.org", ".spec.secretRef.name"),
		{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider, Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"x"}}},
		ref("gadgets.example.org", ".spec.other.name"),
		ref("widgets.example.org", ".spec.configRef.name"),
		ref("widgets.example.org", ".spec.secretRef.name"), // the same field for configmaps, say: once
		ref("widgets.example.org", ".spec.bad[0]"),         // never parses: names nothing
	}}
	got := References(spec, "widgets.example.org")
	want := []fieldpath.Path{{"spec", "secretRef", "name"}, {"spec", "configRef", "name"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("References = %v, want %v", got, want)
	}
	if got := References(spec, "other.example.org"); got != nil {
		t.Errorf("an API no entry reads: %v", got)
	}
	// A projected API is found by its consumer name; reference.api names
	// the entry by the provider's.
	if got := References(spec, "acmegadgets.acme.io"); !reflect.DeepEqual(got, []fieldpath.Path{{"spec", "other", "name"}}) {
		t.Errorf("a projected API: %v", got)
	}
	if got := References(spec, "gadgets.example.org"); got != nil {
		t.Errorf("a projected API by its provider name: %v", got)
	}
}

// Under isolation the provider copy names the related object's provider
// copy: the same mapping that places the related copy.
func TestMapReferences(t *testing.T) {
	refs := []fieldpath.Path{{"spec", "secretRef", "name"}, {"spec", "configRef", "name"}}
	for _, tc := range []struct {
		name      string
		iso       isolation.Mapping
		namespace string
		want      map[string]any
	}{
		{name: "no isolation: unchanged", namespace: "team-a",
			want: map[string]any{"secretRef": map[string]any{"name": "db"}, "configRef": map[string]any{}}},
		{name: "Namespace: <namespace>.<name>", namespace: "team-a", iso: isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"}),
			want: map[string]any{"secretRef": map[string]any{"name": "team-a.db"}, "configRef": map[string]any{}}},
		{name: "Prefixed: the name stays (the namespace is prefixed)", namespace: "team-a", iso: isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}),
			want: map[string]any{"secretRef": map[string]any{"name": "db"}, "configRef": map[string]any{}}},
		{name: "cluster-scoped: unchanged", iso: isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}),
			want: map[string]any{"secretRef": map[string]any{"name": "db"}, "configRef": map[string]any{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"secretRef": map[string]any{"name": "db"}, "configRef": map[string]any{}}}}
			mapReferences(u, tc.namespace, refs, tc.iso)
			if !reflect.DeepEqual(u.Object["spec"], tc.want) {
				t.Errorf("spec %v, want %v", u.Object["spec"], tc.want)
			}
		})
	}
}
