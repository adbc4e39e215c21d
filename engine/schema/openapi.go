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
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// OpenAPIVersion is one discovered version of an API, as the OpenAPI source
// sees it.
type OpenAPIVersion struct {
	Version   string
	Resource  metav1.APIResource
	HasStatus bool
	Schema    *spec.Schema
}

// OpenAPIAPI is everything the OpenAPI source knows about one API.
type OpenAPIAPI struct {
	Group, Resource string
	// Preferred is the discovery-preferred version; it becomes the storage
	// version.
	Preferred string
	// Versions in discovery order.
	Versions []OpenAPIVersion
}

// ReadOpenAPI collects discovery and /openapi/v3 data of one export.
func (d *Discoverer) ReadOpenAPI(_ context.Context, export kbindv1alpha1.ExportedAPI) (*OpenAPIAPI, error) {
	groups, err := d.Discovery.ServerGroups()
	if err != nil {
		return nil, &ListError{Verb: "discover", Resource: "server API groups", Err: err}
	}
	api := &OpenAPIAPI{Group: export.Group, Resource: export.Resource}
	root := openapi3.NewRoot(d.Discovery.OpenAPIV3())
	for _, g := range groups.Groups {
		if g.Name != export.Group {
			continue
		}
		api.Preferred = g.PreferredVersion.Version
		for _, gv := range g.Versions {
			list, err := d.Discovery.ServerResourcesForGroupVersion(gv.GroupVersion)
			if err != nil {
				return nil, &ListError{Verb: "discover", Resource: gv.GroupVersion, Err: err}
			}
			v := OpenAPIVersion{Version: gv.Version}
			found := false
			for _, r := range list.APIResources {
				switch r.Name {
				case export.Resource:
					v.Resource, found = r, true
				case export.Resource + "/status":
					v.HasStatus = true
				}
			}
			if !found {
				continue
			}
			doc, err := root.GVSpec(schema.GroupVersion{Group: g.Name, Version: gv.Version})
			if err != nil {
				return nil, fmt.Errorf("reading /openapi/v3 of %s: %w", gv.GroupVersion, err)
			}
			name := FindSchema(doc, schema.GroupVersionKind{Group: g.Name, Version: gv.Version, Kind: v.Resource.Kind})
			if name == "" {
				return nil, fmt.Errorf("/openapi/v3 of %s has no schema for kind %s", gv.GroupVersion, v.Resource.Kind)
			}
			v.Schema = doc.Components.Schemas[name]
			api.Versions = append(api.Versions, v)
		}
	}
	if len(api.Versions) == 0 {
		return nil, fmt.Errorf("%s is not served by the provider", export.Name)
	}
	return api, nil
}

// FromOpenAPI synthesizes the consumer CRD of an API from discovery and
// OpenAPI (SCHEMA-2): every discovered version served, the preferred
// one stored, names from discovery, the status subresource only when
// discovered, and each $ref replaced by a permissive object that keeps
// unknown fields. The output is deterministic: the same input gives a
// byte-identical CRD.
func FromOpenAPI(api *OpenAPIAPI, connection string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if len(api.Versions) == 0 {
		return nil, fmt.Errorf("%s.%s: no versions", api.Resource, api.Group)
	}
	preferred := api.Versions[0]
	for _, v := range api.Versions {
		if v.Version == api.Preferred {
			preferred = v
		}
	}
	res := preferred.Resource
	singular := res.SingularName
	if singular == "" {
		singular = strings.ToLower(res.Kind)
	}
	spec := apiextensionsv1.CustomResourceDefinitionSpec{
		Group: api.Group,
		Names: apiextensionsv1.CustomResourceDefinitionNames{
			Plural: api.Resource, Singular: singular, Kind: res.Kind, ListKind: res.Kind + "List",
			ShortNames: res.ShortNames, Categories: res.Categories,
		},
		Scope:      apiextensionsv1.ClusterScoped,
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
	}
	if res.Namespaced {
		spec.Scope = apiextensionsv1.NamespaceScoped
	}
	for _, v := range api.Versions {
		props, err := structural(v.Schema)
		if err != nil {
			return nil, fmt.Errorf("%s.%s %s: %w", api.Resource, api.Group, v.Version, err)
		}
		version := apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.Version, Served: true, Storage: v.Version == preferred.Version,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props},
		}
		if v.HasStatus {
			version.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
		}
		spec.Versions = append(spec.Versions, version)
	}
	return Stamp(api.Resource+"."+api.Group, spec, connection), nil
}

// structural turns an OpenAPI schema into a structural CRD schema.
func structural(s *spec.Schema) (*apiextensionsv1.JSONSchemaProps, error) {
	if s == nil {
		return nil, fmt.Errorf("no schema")
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding schema: %w", err)
	}
	props := &apiextensionsv1.JSONSchemaProps{}
	if err := json.Unmarshal(data, props); err != nil {
		return nil, fmt.Errorf("decoding schema: %w", err)
	}
	sanitize(props)
	// The root: an object whose metadata the API server owns.
	props.Type = "object"
	props.XPreserveUnknownFields = nil
	if props.Properties == nil {
		props.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	}
	props.Properties["apiVersion"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	props.Properties["kind"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	props.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	if len(props.Properties) == 3 {
		// Nothing known beyond the envelope: keep whatever is sent.
		props.XPreserveUnknownFields = ptrTrue()
	}
	return props, nil
}

func ptrTrue() *bool { t := true; return &t }

// permissive is what a $ref (or anything without a usable shape) becomes.
func permissive(description string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Description: description, XPreserveUnknownFields: ptrTrue()}
}

// sanitize rewrites a schema node in place into what a structural CRD
// schema allows: no $ref, no logical junctors, no CEL rules (they may name
// fields that became permissive), a type on every node.
func sanitize(p *apiextensionsv1.JSONSchemaProps) {
	hadJunctor := len(p.AllOf)+len(p.OneOf)+len(p.AnyOf) > 0 || p.Not != nil
	if p.Ref != nil || (p.Type == "" && hadJunctor && p.Properties == nil && p.Items == nil) {
		*p = permissive(p.Description)
		return
	}
	p.AllOf, p.OneOf, p.AnyOf, p.Not = nil, nil, nil, nil
	p.ID, p.Schema, p.Definitions, p.Dependencies, p.PatternProperties, p.AdditionalItems = "", "", nil, nil, nil, nil
	p.XValidations = nil
	for name, child := range p.Properties {
		sanitize(&child)
		p.Properties[name] = child
	}
	if p.Items != nil {
		if p.Items.Schema != nil {
			sanitize(p.Items.Schema)
		}
		if len(p.Items.JSONSchemas) > 0 {
			p.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}}
		}
	}
	if p.AdditionalProperties != nil {
		if len(p.Properties) > 0 {
			p.AdditionalProperties = nil
		} else if p.AdditionalProperties.Schema != nil {
			sanitize(p.AdditionalProperties.Schema)
		}
	}
	if p.Type == "" && !p.XIntOrString && (p.XPreserveUnknownFields == nil || !*p.XPreserveUnknownFields) {
		switch {
		case p.Properties != nil || p.AdditionalProperties != nil:
			p.Type = "object"
		case p.Items != nil:
			p.Type = "array"
		default:
			// Untyped means any value: keep it, whatever its shape.
			p.XPreserveUnknownFields = ptrTrue()
		}
	}
	if p.Type == "object" && p.XEmbeddedResource {
		p.XPreserveUnknownFields = ptrTrue()
	}
}
