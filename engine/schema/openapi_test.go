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
	"encoding/json"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// gadgetSchema is shaped like what kube-apiserver publishes in /openapi/v3
// for a built-in-style type: $refs, allOf wrappers, untyped nodes.
const gadgetSchema = `{
  "type": "object",
  "x-kubernetes-group-version-kind": [{"group": "example.org", "version": "v1", "kind": "Gadget"}],
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}},
    "spec": {
      "type": "object",
      "properties": {
        "size": {"type": "integer", "format": "int32"},
        "template": {"$ref": "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec", "description": "the pod"},
        "anything": {"description": "any JSON"},
        "quantity": {"x-kubernetes-int-or-string": true},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "items": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/x"}]}}
      },
      "x-kubernetes-validations": [{"rule": "self.size > 0"}]
    },
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
  }
}`

func gadgetAPI(t *testing.T, versions ...string) *OpenAPIAPI {
	t.Helper()
	api := &OpenAPIAPI{Group: "example.org", Resource: "gadgets", Preferred: "v1"}
	for i, v := range versions {
		s := &spec.Schema{}
		if err := json.Unmarshal([]byte(gadgetSchema), s); err != nil {
			t.Fatal(err)
		}
		api.Versions = append(api.Versions, OpenAPIVersion{
			Version:   v,
			Resource:  metav1.APIResource{Name: "gadgets", SingularName: "gadget", Kind: "Gadget", Namespaced: true, ShortNames: []string{"gd"}, Categories: []string{"all"}},
			HasStatus: i == 0,
			Schema:    s,
		})
	}
	return api
}

func TestFromOpenAPI(t *testing.T) {
	crd, err := FromOpenAPI(gadgetAPI(t, "v1", "v1beta1"), "p")
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "gadgets.example.org" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		crd.Spec.Names.Kind != "Gadget" || crd.Spec.Names.ListKind != "GadgetList" || crd.Spec.Names.ShortNames[0] != "gd" {
		t.Errorf("names %+v", crd.Spec.Names)
	}
	if crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != "p" || crd.Labels[kbindv1alpha1.ManagedLabel] != "true" ||
		crd.Annotations[kbindv1alpha1.SchemaHashAnnotation] != SpecHash(&crd.Spec) {
		t.Errorf("markers %v %v", crd.Labels, crd.Annotations)
	}
	v1, v1beta1 := crd.Spec.Versions[0], crd.Spec.Versions[1]
	if !v1.Storage || v1beta1.Storage || !v1.Served || !v1beta1.Served {
		t.Errorf("the preferred version must be the only stored one: %v/%v", v1.Storage, v1beta1.Storage)
	}
	if v1.Subresources == nil || v1beta1.Subresources != nil {
		t.Errorf("status subresource only where discovered: %+v / %+v", v1.Subresources, v1beta1.Subresources)
	}
	props := v1.Schema.OpenAPIV3Schema.Properties
	specProps := props["spec"].Properties
	if tpl := specProps["template"]; tpl.Type != "object" || tpl.XPreserveUnknownFields == nil || !*tpl.XPreserveUnknownFields || tpl.Ref != nil || tpl.Description != "the pod" {
		t.Errorf("$ref not replaced by a permissive object: %+v", tpl)
	}
	if md := props["metadata"]; md.Type != "object" || len(md.AllOf) != 0 {
		t.Errorf("metadata %+v", md)
	}
	if untyped := specProps["anything"]; untyped.Type != "" || untyped.XPreserveUnknownFields == nil {
		t.Errorf("untyped node must keep any value: %+v", untyped)
	}
	if items := specProps["items"].Items.Schema; items.Type != "object" || items.XPreserveUnknownFields == nil {
		t.Errorf("allOf-wrapped $ref in items: %+v", items)
	}
	if len(props["spec"].XValidations) != 0 {
		t.Error("CEL rules must be dropped: they may name fields that became permissive")
	}
	// The result is a structural schema the API server accepts.
	for _, v := range crd.Spec.Versions {
		if errs := structuralErrors(v.Schema.OpenAPIV3Schema); len(errs) > 0 {
			t.Errorf("%s: not structural: %v", v.Name, errs)
		}
	}
}

func TestFromOpenAPIIsDeterministic(t *testing.T) {
	a, err := FromOpenAPI(gadgetAPI(t, "v1", "v1beta1"), "p")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		b, err := FromOpenAPI(gadgetAPI(t, "v1", "v1beta1"), "p")
		if err != nil {
			t.Fatal(err)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Fatalf("run %d differs:\n%s\n%s", i, ja, jb)
		}
	}
}

// structuralErrors validates a schema the way the API server does.
func structuralErrors(p *apiextensionsv1.JSONSchemaProps) []string {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(p, internal, nil); err != nil {
		return []string{err.Error()}
	}
	s, err := schema.NewStructural(internal)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range schema.ValidateStructural(nil, s) {
		out = append(out, e.Error())
	}
	return out
}
