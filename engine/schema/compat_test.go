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
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// compatCRD is a consumer CRD serving v1 (stored) and v2, both with the
// status subresource and the same schema (built afresh for each).
func compatCRD(connection string) *apiextensionsv1.CustomResourceDefinition {
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}},
			Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: compatSchema()}}
	}
	spec := apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.org",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget",
			ShortNames: []string{"wd"}, Categories: []string{"all"}},
		Scope:      apiextensionsv1.NamespaceScoped,
		Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), version("v2", false)},
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
	}
	return Stamp("widgets.example.org", spec, connection)
}

func compatSchema() *apiextensionsv1.JSONSchemaProps {
	minSize := 1.0
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Description: "A widget.", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": {Type: "string"},
		"kind":       {Type: "string"},
		"metadata":   {Type: "object"},
		"spec": {Type: "object", Description: "What the widget should be.", Required: []string{"size"},
			XValidations: apiextensionsv1.ValidationRules{{Rule: "self.size < 100", Message: "too big"}},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size": {Type: "integer", Minimum: &minSize, Description: "How big."},
				"tier": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"gold"`)}, {Raw: []byte(`"silver"`)}},
					Default: &apiextensionsv1.JSON{Raw: []byte(`"silver"`)}},
				"tags": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}}}}},
				"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true,
					Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			}},
		"status": {Type: "object", XPreserveUnknownFields: ptrTrue()},
	}}
}

// editProp changes the property at names of version v's schema.
func editProp(crd *apiextensionsv1.CustomResourceDefinition, v int, edit func(*apiextensionsv1.JSONSchemaProps), names ...string) {
	editIn(crd.Spec.Versions[v].Schema.OpenAPIV3Schema, edit, names...)
}

func editIn(p *apiextensionsv1.JSONSchemaProps, edit func(*apiextensionsv1.JSONSchemaProps), names ...string) {
	if len(names) == 0 {
		edit(p)
		return
	}
	child := p.Properties[names[0]]
	editIn(&child, edit, names[1:]...)
	p.Properties[names[0]] = child
}

func TestCompatIncompatibility(t *testing.T) {
	const here, there = ` here (Connection "west"), `, ` on the provider of Connection "east"`
	for _, tc := range []struct {
		name      string
		installed func(*apiextensionsv1.CustomResourceDefinition)
		candidate func(*apiextensionsv1.CustomResourceDefinition)
		want      string
	}{
		{name: "identical"},
		{name: "descriptions, titles, examples and externalDocs differ", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.Description, p.Title = "Something else.", "Size"
				p.Example = &apiextensionsv1.JSON{Raw: []byte(`3`)}
				p.ExternalDocs = &apiextensionsv1.ExternalDocumentation{URL: "https://example.org"}
			}, "spec", "size")
			c.Spec.Versions[1].Schema.OpenAPIV3Schema.Description = ""
		}},
		{name: "printer columns, names but kind and plural, metadata, conversion and deprecation differ", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].AdditionalPrinterColumns = nil
			c.Spec.Versions[1].AdditionalPrinterColumns = append(c.Spec.Versions[1].AdditionalPrinterColumns,
				apiextensionsv1.CustomResourceColumnDefinition{Name: "Tier", Type: "string", JSONPath: ".spec.tier"})
			c.Spec.Versions[1].Deprecated = true
			c.Spec.Versions[0].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.tier"}}
			c.Spec.Names.ShortNames, c.Spec.Names.Categories = []string{"w"}, nil
			c.Spec.Names.Singular, c.Spec.Names.ListKind = "", ""
			c.Annotations[kbindv1alpha1.SchemaHashAnnotation] = "sha256:0000000000000000"
			c.Labels = nil
			c.Spec.Conversion = nil
			c.Status.StoredVersions = []string{"v1"}
		}},
		{name: "versions listed in another order", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0], c.Spec.Versions[1] = c.Spec.Versions[1], c.Spec.Versions[0]
		}},
		{name: "an unserved version only on the candidate, with another schema", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v0",
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}})
		}},
		{name: "preserve-unknown-fields false and unset", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			f := false
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.XPreserveUnknownFields = &f }, "spec")
		}},
		{name: "enum in another order, default spelled otherwise", installed: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.Default = &apiextensionsv1.JSON{Raw: []byte(`{"a": 1.0, "b": [2]}`)}
			}, "spec")
		}, candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Enum[0], p.Enum[1] = p.Enum[1], p.Enum[0] }, "spec", "tier")
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.Default = &apiextensionsv1.JSON{Raw: []byte(`{"b":[2],"a":1}`)}
			}, "spec")
		}},
		{name: "only a validation rule's message differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.XValidations = apiextensionsv1.ValidationRules{{Rule: "self.size < 100", Message: "at most 99", MessageExpression: "'too big: ' + string(self.size)"}}
			}, "spec")
		}},
		{name: "group differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Group = "example.com" },
			want: "group: example.org" + here + "example.com" + there},
		{name: "kind differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Kind = "Gadget" },
			want: "kind: Widget" + here + "Gadget" + there},
		{name: "plural differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Plural = "widgetz" },
			want: "plural: widgets" + here + "widgetz" + there},
		{name: "scope differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = apiextensionsv1.ClusterScoped },
			want: "scope: Namespaced" + here + "Cluster" + there},
		{name: "served versions differ", candidate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Served = false },
			want: "served versions: v1, v2" + here + "v1" + there},
		{name: "storage version differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
		}, want: "storage version: v1" + here + "v2" + there},
		{name: "status subresource missing on the candidate", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[1].Subresources = nil
		}, want: "version v2: status subresource: present" + here + "absent" + there},
		{name: "scale subresource only on the candidate", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size"}
		}, want: "version v1: scale subresource: absent" + here + "present" + there},
		{name: "a property's type differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Type = "string" }, "spec", "size")
		}, want: "version v1: .properties.spec.properties.size.type: integer" + here + "string" + there},
		{name: "a property only on the candidate", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			}, "spec")
		}, want: "version v1: .properties.spec.properties.color: absent" + here + "present" + there},
		{name: "a property only on the installed CRD", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 1, func(p *apiextensionsv1.JSONSchemaProps) { delete(p.Properties, "tier") }, "spec")
		}, want: "version v2: .properties.spec.properties.tier: present" + here + "absent" + there},
		{name: "a property with a dot in its name", installed: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.Properties["a.b"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			}, "spec")
		}, want: `version v1: .properties.spec.properties["a.b"]: present` + here + "absent" + there},
		{name: "required differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Required = append(p.Required, "tier") }, "spec")
		}, want: `version v1: .properties.spec.required: "size"` + here + `"size", "tier"` + there},
		{name: "enum differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Enum = p.Enum[:1] }, "spec", "tier")
		}, want: `version v1: .properties.spec.properties.tier.enum: "gold", "silver"` + here + `"gold"` + there},
		{name: "default differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Default = &apiextensionsv1.JSON{Raw: []byte(` "gold"`)} }, "spec", "tier")
		}, want: `version v1: .properties.spec.properties.tier.default: "silver"` + here + `"gold"` + there},
		{name: "default only on the installed CRD", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Default = nil }, "spec", "tier")
		}, want: `version v1: .properties.spec.properties.tier.default: "silver"` + here + "unset" + there},
		{name: "minimum differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Minimum = nil }, "spec", "size")
		}, want: "version v1: .properties.spec.properties.size.minimum: 1" + here + "unset" + there},
		{name: "a nested items property differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.Items.Schema.Properties["name"] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
			}, "spec", "tags")
		}, want: "version v1: .properties.spec.properties.tags.items.properties.name.type: string" + here + "integer" + there},
		{name: "items only on the installed CRD", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.Items = nil }, "spec", "tags")
		}, want: "version v1: .properties.spec.properties.tags.items: present" + here + "absent" + there},
		{name: "additionalProperties' schema differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.AdditionalProperties.Schema.Type = "integer" }, "spec", "labels")
		}, want: "version v1: .properties.spec.properties.labels.additionalProperties.type: string" + here + "integer" + there},
		{name: "list type differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			set := "set"
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.XListType = &set }, "spec", "tags")
		}, want: "version v1: .properties.spec.properties.tags.x-kubernetes-list-type: unset" + here + "set" + there},
		{name: "a validation rule differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) { p.XValidations[0].Rule = "self.size < 10" }, "spec")
		}, want: `version v1: .properties.spec.x-kubernetes-validations: "self.size < 100"` + here + `"self.size < 10"` + there},
		{name: "anyOf differs", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			editProp(c, 0, func(p *apiextensionsv1.JSONSchemaProps) {
				p.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"size"}}}
			}, "spec")
		}, want: "version v1: .properties.spec.anyOf: none" + here + "1 schema" + there},
		{name: "no schema on the candidate's version", candidate: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema = nil
		}, want: "version v1: schema: present" + here + "absent" + there},
	} {
		t.Run(tc.name, func(t *testing.T) {
			installed, candidate := compatCRD("west"), compatCRD("east")
			if tc.installed != nil {
				tc.installed(installed)
				if tc.candidate != nil {
					// The candidate changes the changed schema.
					candidate.Spec = *installed.Spec.DeepCopy()
				}
			}
			if tc.candidate != nil {
				tc.candidate(candidate)
			}
			if got := Incompatibility(installed, candidate, "west", "east"); got != tc.want {
				t.Errorf("Incompatibility =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestCompatNil(t *testing.T) {
	if got := Incompatibility(nil, compatCRD("east"), "west", "east"); got != "" {
		t.Errorf("no installed CRD: %q, want compatible", got)
	}
	want := `schema: present here, absent on the provider of Connection "east"`
	if got := Incompatibility(compatCRD("west"), nil, "", "east"); got != want {
		t.Errorf("no candidate: %q, want %q", got, want)
	}
	// Missing subresources, schemas and nested pointers on either side
	// never panic.
	bare := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{}}}}}
	full := compatCRD("east")
	full.Spec.Group, full.Spec.Names, full.Spec.Scope, full.Spec.Versions = "", apiextensionsv1.CustomResourceDefinitionNames{}, "", full.Spec.Versions[:1]
	full.Spec.Versions[0].Subresources = nil
	if got, want := Incompatibility(bare, full, "west", "east"), `version v1: schema: absent here (Connection "west"), present on the provider of Connection "east"`; got != want {
		t.Errorf("bare vs full: %q, want %q", got, want)
	}
	if got := Incompatibility(bare, bare.DeepCopy(), "west", "east"); got != "" {
		t.Errorf("bare vs bare: %q", got)
	}
}

func TestCompatDoesNotMutate(t *testing.T) {
	installed, candidate := compatCRD("west"), compatCRD("east")
	editProp(candidate, 0, func(p *apiextensionsv1.JSONSchemaProps) {
		p.Default = &apiextensionsv1.JSON{Raw: []byte(`{"b": [2.0], "a": 1.50}`)}
		p.Enum = []apiextensionsv1.JSON{{Raw: []byte(`{"z": 1e2}`)}, {Raw: []byte(`"a"`)}}
		p.Required = []string{"tier", "size"}
	}, "spec")
	editProp(installed, 1, func(p *apiextensionsv1.JSONSchemaProps) { p.Required = []string{"tier", "size"} }, "spec")
	beforeInstalled, beforeCandidate := installed.DeepCopy(), candidate.DeepCopy()
	if got := Incompatibility(installed, candidate, "west", "east"); got == "" {
		t.Fatal("want a difference")
	}
	if got := Incompatibility(candidate, installed, "east", "west"); got == "" {
		t.Fatal("want a difference the other way")
	}
	if !equality.Semantic.DeepEqual(installed, beforeInstalled) || !equality.Semantic.DeepEqual(candidate, beforeCandidate) {
		t.Error("Incompatibility modified its inputs")
	}
}
