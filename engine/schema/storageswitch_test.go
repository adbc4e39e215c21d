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

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// props is an object schema with the given properties.
func props(p map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: p}
}

func TestPrunedFields(t *testing.T) {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	keep := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}
	mapOf := func(s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &s}}
	}
	arrayOf := func(s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &s}}
	}
	root := func(spec apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
		r := props(map[string]apiextensionsv1.JSONSchemaProps{"spec": spec, "metadata": {Type: "object"}, "apiVersion": str, "kind": str})
		return &r
	}
	cases := []struct {
		name     string
		old, new *apiextensionsv1.JSONSchemaProps
		want     string
	}{
		{"same schema", root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), ""},
		{"superset", root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str, "color": str})), ""},
		{"a field dropped", root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str, "color": str})), root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), "spec.color"},
		{"a field renamed", root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), root(props(map[string]apiextensionsv1.JSONSchemaProps{"replicas": str})), "spec.size"},
		{"nested, in array items", root(props(map[string]apiextensionsv1.JSONSchemaProps{"ports": arrayOf(props(map[string]apiextensionsv1.JSONSchemaProps{"name": str, "port": str}))})),
			root(props(map[string]apiextensionsv1.JSONSchemaProps{"ports": arrayOf(props(map[string]apiextensionsv1.JSONSchemaProps{"port": str}))})), "spec.ports[*].name"},
		{"array items no longer described", root(props(map[string]apiextensionsv1.JSONSchemaProps{"ports": arrayOf(str)})),
			root(props(map[string]apiextensionsv1.JSONSchemaProps{"ports": {Type: "array"}})), "spec.ports[*]"},
		{"new keeps unknown fields", root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), root(keep), ""},
		{"old kept unknown fields, new does not", root(keep), root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), "spec.*"},
		{"both keep unknown fields", root(keep), root(keep), ""},
		{"map values kept", root(mapOf(str)), root(mapOf(str)), ""},
		{"a map turned into fixed properties", root(mapOf(str)), root(props(map[string]apiextensionsv1.JSONSchemaProps{"a": str})), "spec.*"},
		{"fixed properties into a map", root(props(map[string]apiextensionsv1.JSONSchemaProps{"a": props(map[string]apiextensionsv1.JSONSchemaProps{"x": str})})),
			root(mapOf(props(map[string]apiextensionsv1.JSONSchemaProps{"y": str}))), "spec.a.x"},
		{"spec dropped entirely", root(props(map[string]apiextensionsv1.JSONSchemaProps{"size": str})), &apiextensionsv1.JSONSchemaProps{Type: "object"}, "spec"},
		{"metadata, apiVersion and kind are never pruned", root(keep), &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": keep}}, ""},
		{"status is the provider's: not counted", &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": keep, "status": keep}},
			&apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": keep}}, ""},
		{"a nested status is the consumer's", root(props(map[string]apiextensionsv1.JSONSchemaProps{"status": str})), root(props(map[string]apiextensionsv1.JSONSchemaProps{})), "spec.status"},
		{"no old schema", nil, root(keep), ""},
		{"no new schema", root(keep), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(PrunedFields(tc.old, tc.new), ", "); got != tc.want {
				t.Errorf("PrunedFields = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideStorageSwitch(t *testing.T) {
	schema := func(fields ...string) *apiextensionsv1.CustomResourceValidation {
		p := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, f := range fields {
			p[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		spec := props(map[string]apiextensionsv1.JSONSchemaProps{"spec": props(p)})
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &spec}
	}
	version := func(name string, storage bool, fields ...string) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage, Schema: schema(fields...)}
	}
	crd := func(conversion string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
		c := Stamp("widgets.example.org", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org", Versions: versions}, "p")
		if conversion != "" {
			c.Annotations[kbindv1alpha1.ProviderConversionAnnotation] = conversion
		}
		return c
	}
	accepted := func(c *apiextensionsv1.CustomResourceDefinition, v string) *apiextensionsv1.CustomResourceDefinition {
		c.Annotations[kbindv1alpha1.AcceptStorageVersionAnnotation] = v
		return c
	}
	const none, webhook = "None", "Webhook"
	cases := []struct {
		name              string
		existing, desired *apiextensionsv1.CustomResourceDefinition
		refused           bool
		problem           []string // fragments of Problem
	}{
		{"no existing CRD: a create, no switch", nil, crd(none, version("v2", true, "size")), false, nil},
		{"no desired CRD", crd(none, version("v1", true, "size")), nil, false, nil},
		{"same storage version, schema changed: no switch", crd(none, version("v1", true, "size")), crd(none, version("v1", true)), false, nil},
		{"None, superset: proceeds", crd(none, version("v1", true, "size"), version("v2", false, "size")),
			crd(none, version("v1", false, "size"), version("v2", true, "size", "color")), false, nil},
		{"None, identical schemas: proceeds", crd(none, version("v1alpha1", true, "size")),
			crd(none, version("v1alpha1", false, "size"), version("v1", true, "size")), false, nil},
		{"OpenAPI source (no conversion recorded), superset: proceeds", crd("", version("v1", true, "size")),
			crd("", version("v1", false, "size"), version("v2", true, "size")), false, nil},
		{"None, a field dropped: refused", crd(none, version("v1", true, "size", "color"), version("v2", false, "size")),
			crd(none, version("v1", false, "size", "color"), version("v2", true, "size")), true,
			[]string{"from v1 to v2", "keeps the consumer CRD at v1", "v2 schema lacks fields of v1", "spec.color",
				"kubectl annotate crd widgets.example.org core.kbind.io/accept-storage-version=v2"}},
		{"Webhook, renamed: refused naming both", crd(webhook, version("v1", true, "size")),
			crd(webhook, version("v2", true, "replicas")), true, []string{"conversion webhook", "spec.size", "accept-storage-version=v2"}},
		{"Webhook, same fields: refused", crd(webhook, version("v1", true, "size")),
			crd(webhook, version("v2", true, "size")), true, []string{"conversion webhook", "sync goes on at v1"}},
		{"the provider turned to a webhook with the switch: refused", crd(none, version("v1", true, "size")),
			crd(webhook, version("v2", true, "size")), true, []string{"conversion webhook"}},
		{"the existing CRD recorded a webhook: refused", crd(webhook, version("v1", true, "size")),
			crd("", version("v2", true, "size")), true, []string{"conversion webhook"}},
		{"accepted: proceeds", accepted(crd(webhook, version("v1", true, "size")), "v2"),
			crd(webhook, version("v2", true, "replicas")), false, nil},
		{"accepted for another version: refused", accepted(crd(webhook, version("v1", true, "size")), "v3"),
			crd(webhook, version("v2", true, "size")), true, []string{"accept-storage-version=v2"}},
		{"accepted earlier, next switch: refused again", accepted(crd(none, version("v2", true, "size", "color")), "v2"),
			crd(none, version("v3", true, "size")), true, []string{"spec.color", "accept-storage-version=v3"}},
	}
	// e2e/suite/schema_test.go's switch: v1 (spec and status keep unknown
	// fields) back to v1alpha1 (spec only): followed, status being the
	// provider's.
	preserving := func(name string, storage bool, status bool) apiextensionsv1.CustomResourceDefinitionVersion {
		p := map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptrTrue()}}
		if status {
			p["status"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}
		}
		root := props(p)
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root}}
	}
	cases = append(cases, struct {
		name              string
		existing, desired *apiextensionsv1.CustomResourceDefinition
		refused           bool
		problem           []string
	}{"None, back to a version without status: proceeds", crd(none, preserving("v1alpha1", false, false), preserving("v1", true, true)),
		crd(none, preserving("v1alpha1", true, false), preserving("v1", false, true)), false, nil})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideStorageSwitch(tc.existing, tc.desired)
			if got.Refused != tc.refused {
				t.Fatalf("DecideStorageSwitch = %+v, want refused %v", got, tc.refused)
			}
			if !tc.refused && got.Problem != "" {
				t.Errorf("a switch that proceeds carries a problem: %q", got.Problem)
			}
			for _, f := range tc.problem {
				if !strings.Contains(got.Problem, f) {
					t.Errorf("problem %q lacks %q", got.Problem, f)
				}
			}
		})
	}
}

// FromCRD records the provider's conversion strategy; a projection keeps
// it.
func TestFromCRDRecordsTheProviderConversion(t *testing.T) {
	provider := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.org", Scope: apiextensionsv1.NamespaceScoped,
		Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}},
	}}
	provider.Name = "widgets.example.org"
	for _, tc := range []struct {
		conversion *apiextensionsv1.CustomResourceConversion
		want       string
	}{
		{nil, "None"},
		{&apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}, "None"},
		{&apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}, "Webhook"},
	} {
		provider.Spec.Conversion = tc.conversion
		crd, _, err := FromCRD(provider, "p")
		if err != nil {
			t.Fatal(err)
		}
		if got := crd.Annotations[kbindv1alpha1.ProviderConversionAnnotation]; got != tc.want {
			t.Errorf("conversion %+v: annotation %q, want %q", tc.conversion, got, tc.want)
		}
		projected := Project(crd, kbindv1alpha1.APIReference{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Kind: "Gizmo"}}, "p")
		if got := projected.Annotations[kbindv1alpha1.ProviderConversionAnnotation]; got != tc.want {
			t.Errorf("projected: annotation %q, want %q", got, tc.want)
		}
	}
}
