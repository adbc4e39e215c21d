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

package compat

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// baseCRD is the baseline every case edits a copy of.
const baseCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: connections.core.kbind.io
spec:
  group: core.kbind.io
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [secretRef]
            properties:
              secretRef:
                type: object
                description: The Secret.
                properties:
                  name: {type: string}
                  namespace: {type: string}
              mode:
                type: string
                enum: [Shared, Dedicated]
              labels:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    value: {type: string}
              apis:
                type: array
                items:
                  type: object
                  properties:
                    name: {type: string}
                    kind: {type: string}
`

func decodeCRD(t *testing.T, doc string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func specOf(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	return &spec
}

// editSpec edits the spec schema of the first version in place.
func editSpec(crd *apiextensionsv1.CustomResourceDefinition, edit func(spec *apiextensionsv1.JSONSchemaProps)) {
	spec := specOf(crd)
	edit(spec)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = *spec
}

func editProp(props map[string]apiextensionsv1.JSONSchemaProps, name string, edit func(p *apiextensionsv1.JSONSchemaProps)) {
	p := props[name]
	edit(&p)
	props[name] = p
}

func enum(values ...string) []apiextensionsv1.JSON {
	var out []apiextensionsv1.JSON
	for _, v := range values {
		out = append(out, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return out
}

func TestCompareCRD(t *testing.T) {
	const p = "connections.core.kbind.io v1alpha1: "
	cases := []struct {
		name       string
		edit       func(crd *apiextensionsv1.CustomResourceDefinition)
		breaking   []string
		compatible []string
	}{
		{
			name: "unchanged",
			edit: func(*apiextensionsv1.CustomResourceDefinition) {},
		},
		{
			name: "a description changed passes and is not reported",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					s.Description = "new words"
					editProp(s.Properties, "secretRef", func(r *apiextensionsv1.JSONSchemaProps) { r.Description = "Another Secret." })
				})
			},
		},
		{
			name: "a new optional field passes",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "secretRef", func(r *apiextensionsv1.JSONSchemaProps) {
						r.Properties["key"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
					})
				})
			},
			compatible: []string{p + ".spec.secretRef.key: added"},
		},
		{
			name: "a removed property fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "secretRef", func(r *apiextensionsv1.JSONSchemaProps) { delete(r.Properties, "namespace") })
				})
			},
			breaking: []string{p + ".spec.secretRef.namespace: removed"},
		},
		{
			name: "a removed property of list items fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "apis", func(a *apiextensionsv1.JSONSchemaProps) { delete(a.Items.Schema.Properties, "kind") })
				})
			},
			breaking: []string{p + ".spec.apis[*].kind: removed"},
		},
		{
			name: "a removed property of map values fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "labels", func(l *apiextensionsv1.JSONSchemaProps) {
						delete(l.AdditionalProperties.Schema.Properties, "value")
					})
				})
			},
			breaking: []string{p + ".spec.labels{*}.value: removed"},
		},
		{
			name: "required added to an existing field fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "secretRef", func(r *apiextensionsv1.JSONSchemaProps) { r.Required = []string{"namespace"} })
				})
			},
			breaking: []string{p + ".spec.secretRef.namespace: newly required"},
		},
		{
			name: "a new required property fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					s.Properties["owner"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
					s.Required = append(s.Required, "owner")
				})
			},
			breaking:   []string{p + ".spec.owner: newly required"},
			compatible: []string{p + ".spec.owner: added"},
		},
		{
			name: "a field no longer required passes",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) { s.Required = nil })
			},
			compatible: []string{p + ".spec.secretRef: no longer required"},
		},
		{
			name: "an enum value removed fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "mode", func(m *apiextensionsv1.JSONSchemaProps) { m.Enum = enum("Shared") })
				})
			},
			breaking: []string{p + `.spec.mode: enum value "Dedicated" removed`},
		},
		{
			name: "an enum where there was none fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "secretRef", func(r *apiextensionsv1.JSONSchemaProps) {
						editProp(r.Properties, "namespace", func(n *apiextensionsv1.JSONSchemaProps) { n.Enum = enum("kbind", "default") })
					})
				})
			},
			breaking: []string{p + `.spec.secretRef.namespace: enum added (only "kbind", "default" allowed)`},
		},
		{
			name: "an enum widened passes",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "mode", func(m *apiextensionsv1.JSONSchemaProps) { m.Enum = enum("Dedicated", "Shared", "Prefixed") })
				})
			},
			compatible: []string{p + `.spec.mode: enum value "Prefixed" added`},
		},
		{
			name: "a changed type fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				editSpec(crd, func(s *apiextensionsv1.JSONSchemaProps) {
					editProp(s.Properties, "mode", func(m *apiextensionsv1.JSONSchemaProps) { m.Type, m.Enum = "integer", nil })
				})
			},
			breaking: []string{p + ".spec.mode: type changed from string to integer"},
		},
		{
			name: "a removed served version fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Versions[0].Name = "v1beta1"
			},
			breaking:   []string{p + "served version removed"},
			compatible: []string{"connections.core.kbind.io v1beta1: version added"},
		},
		{
			name: "a version no longer served fails",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Versions[0].Served = false
			},
			breaking: []string{p + "no longer served"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := decodeCRD(t, baseCRD)
			after := old.DeepCopy()
			tc.edit(after)
			breaking, compatible := split(CompareCRD(old, after))
			if !slices.Equal(breaking, tc.breaking) {
				t.Errorf("breaking:\n got %q\nwant %q", breaking, tc.breaking)
			}
			if !slices.Equal(compatible, tc.compatible) {
				t.Errorf("compatible:\n got %q\nwant %q", compatible, tc.compatible)
			}
		})
	}
}

func TestCompareCRDs(t *testing.T) {
	conn := decodeCRD(t, baseCRD)
	other := conn.DeepCopy()
	other.Name = "bindings.core.kbind.io"
	old := map[string]*apiextensionsv1.CustomResourceDefinition{conn.Name: conn}
	after := map[string]*apiextensionsv1.CustomResourceDefinition{other.Name: other}
	breaking, compatible := split(CompareCRDs(old, after))
	if want := []string{"connections.core.kbind.io v1alpha1: served version removed"}; !slices.Equal(breaking, want) {
		t.Errorf("a removed CRD: breaking %q, want %q", breaking, want)
	}
	if want := []string{"bindings.core.kbind.io: CRD added"}; !slices.Equal(compatible, want) {
		t.Errorf("an added CRD: compatible %q, want %q", compatible, want)
	}
}

func split(changes []Change) (breaking, compatible []string) {
	for _, c := range changes {
		if c.Breaking {
			breaking = append(breaking, c.Message)
		} else {
			compatible = append(compatible, c.Message)
		}
	}
	return breaking, compatible
}
