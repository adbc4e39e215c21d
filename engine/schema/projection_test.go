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
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// widgetsCRD is a provider CRD's consumer CRD before projection.
func widgetsCRD() *apiextensionsv1.CustomResourceDefinition {
	spec := apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.org",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget",
			ShortNames: []string{"wd"}, Categories: []string{"all"}},
		Scope: apiextensionsv1.NamespaceScoped,
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
			Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "string", JSONPath: ".spec.size"}},
			Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
	}
	return Stamp("widgets.example.org", spec, "provider")
}

func TestProject(t *testing.T) {
	ref := kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget", ShortNames: []string{"aw"}}}
	got := Project(widgetsCRD(), ref, "provider")
	if got.Name != "acmewidgets.acme.io" || got.Spec.Group != "acme.io" {
		t.Fatalf("name %s, group %s; want acmewidgets.acme.io, acme.io", got.Name, got.Spec.Group)
	}
	want := apiextensionsv1.CustomResourceDefinitionNames{Kind: "AcmeWidget", ListKind: "AcmeWidgetList", Plural: "acmewidgets", Singular: "acmewidget", ShortNames: []string{"aw"}}
	if !sameNames(got.Spec.Names, want) {
		t.Errorf("names %+v, want %+v", got.Spec.Names, want)
	}
	if v := got.Spec.Versions[0]; v.Subresources == nil || len(v.AdditionalPrinterColumns) != 1 || v.Schema == nil {
		t.Errorf("the version lost its subresources, printer columns or schema: %+v", v)
	}
	if got.Annotations[kbindv1alpha1.ProviderAPIAnnotation] != "widgets.example.org" || got.Annotations[kbindv1alpha1.ProviderKindAnnotation] != "Widget" {
		t.Errorf("annotations %v", got.Annotations)
	}
	if got.Annotations[kbindv1alpha1.SchemaHashAnnotation] != SpecHash(&got.Spec) || got.Annotations[kbindv1alpha1.ConnectionAnnotation] != "provider" {
		t.Errorf("markers %v", got.Annotations)
	}
	if gvk := ProviderGVK(got, "v1"); gvk != (schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}) {
		t.Errorf("ProviderGVK = %v", gvk)
	}
	if ProviderAPI(got) != "widgets.example.org" || !Projected(got) || !Serves(ref, got) {
		t.Errorf("ProviderAPI %q, Projected %v, Serves %v", ProviderAPI(got), Projected(got), Serves(ref, got))
	}

	// Only the group: the provider's names, without short names and
	// categories.
	group := Project(widgetsCRD(), kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io"}}, "provider")
	if group.Name != "widgets.acme.io" || group.Spec.Names.Kind != "Widget" || group.Spec.Names.Singular != "widget" || len(group.Spec.Names.ShortNames) != 0 || len(group.Spec.Names.Categories) != 0 {
		t.Errorf("group-only projection: %s %+v", group.Name, group.Spec.Names)
	}

	// No projection: unchanged, and the CRD is the provider's API.
	plain := widgetsCRD()
	if Project(plain, kbindv1alpha1.APIReference{Name: "widgets.example.org"}, "provider") != plain {
		t.Error("an entry without projection changed the CRD")
	}
	if gvk := ProviderGVK(plain, "v1"); gvk != (schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}) || Projected(plain) {
		t.Errorf("unprojected ProviderGVK = %v", gvk)
	}
}

func TestCollision(t *testing.T) {
	aw := kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget"}}
	projected := Project(widgetsCRD(), aw, "provider")
	gadgets := Project(widgetsCRD(), aw, "provider")
	gadgets.Annotations[kbindv1alpha1.ProviderAPIAnnotation] = "gadgets.example.org"
	otherNames := Project(widgetsCRD(), kbindv1alpha1.APIReference{Name: "widgets.example.org",
		Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget", ShortNames: []string{"x"}}}, "provider")
	foreign := projected.DeepCopy()
	foreign.Labels = nil
	// A provider API bound unprojected under the consumer name another
	// entry projects onto.
	plainAtProjected := widgetsCRD()
	plainAtProjected.Name = "acmewidgets.acme.io"
	for _, tc := range []struct {
		name              string
		existing, desired *apiextensionsv1.CustomResourceDefinition
		want              string
	}{
		{"absent", nil, projected, ""},
		{"the same projection", projected, projected, ""},
		{"unprojected, the same", widgetsCRD(), widgetsCRD(), ""},
		{"another provider API", gadgets, projected, "serves the provider's gadgets.example.org"},
		{"the same provider API, other names", projected, otherNames, "projection as kind AcmeWidget"},
		{"an unprojected API at the name", plainAtProjected, projected, "serves the provider's acmewidgets.acme.io"},
		{"not kbind's, projected onto", foreign, projected, "which kbind did not create"},
		{"not kbind's, unprojected: Decide reports it", foreign, widgetsCRD(), ""},
		{"no desired CRD", projected, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Collision(tc.existing, tc.desired)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Collision = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestServes(t *testing.T) {
	aw := kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget"}}
	projected := Project(widgetsCRD(), aw, "provider")
	for _, tc := range []struct {
		name string
		ref  kbindv1alpha1.APIReference
		crd  *apiextensionsv1.CustomResourceDefinition
		want bool
	}{
		{"unprojected", kbindv1alpha1.APIReference{Name: "widgets.example.org"}, widgetsCRD(), true},
		{"the projection", aw, projected, true},
		{"another provider API", kbindv1alpha1.APIReference{Name: "gadgets.example.org", Projection: aw.Projection}, projected, false},
		{"another kind", kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "Other", Plural: "acmewidgets"}}, projected, false},
		{"other short names", kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget", ShortNames: []string{"aw"}}}, projected, false},
		{"unprojected entry, projected CRD", kbindv1alpha1.APIReference{Name: "widgets.example.org"}, projected, false},
		{"projected entry, unprojected CRD", kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{}}, widgetsCRD(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Serves(tc.ref, tc.crd); got != tc.want {
				t.Errorf("Serves = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProjectionProblem(t *testing.T) {
	ref := func(group string) kbindv1alpha1.APIReference {
		return kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: group, Kind: "AcmeWidget"}}
	}
	for _, tc := range []struct {
		name       string
		ref        kbindv1alpha1.APIReference
		pull       kbindv1alpha1.PullPolicy
		want       string
		namespaced bool
	}{
		{"no projection", kbindv1alpha1.APIReference{Name: "widgets.example.org"}, kbindv1alpha1.PullPolicyNone, "", false},
		{"a custom group", ref("acme.io"), kbindv1alpha1.PullPolicyBound, "", false},
		{"the provider's group", ref(""), kbindv1alpha1.PullPolicyBound, "", false},
		{"apps.k8s.io", ref("apps.k8s.io"), kbindv1alpha1.PullPolicyBound, "reserved", false},
		{"k8s.io", ref("k8s.io"), kbindv1alpha1.PullPolicyBound, "reserved", false},
		{"networking.kubernetes.io", ref("networking.kubernetes.io"), kbindv1alpha1.PullPolicyBound, "reserved", false},
		{"core.kbind.io", ref("core.kbind.io"), kbindv1alpha1.PullPolicyAll, "reserved", false},
		{"cluster.x-k8s.io is not Kubernetes'", ref("cluster.x-k8s.io"), kbindv1alpha1.PullPolicyBound, "", false},
		{"a built-in group without a dot", ref("apps"), kbindv1alpha1.PullPolicyBound, "needs a dot", false},
		{"pullPolicy None", ref("acme.io"), kbindv1alpha1.PullPolicyNone, "pullPolicy is None", false},
		{"a Binding cannot project", ref("acme.io"), kbindv1alpha1.PullPolicyBound, "a Binding cannot project", true},
		{"a Binding without a projection", kbindv1alpha1.APIReference{Name: "widgets.example.org"}, kbindv1alpha1.PullPolicyBound, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ProjectionProblem(tc.ref, tc.namespaced, tc.pull)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("ProjectionProblem = %q, want %q", got, tc.want)
			}
		})
	}
}
