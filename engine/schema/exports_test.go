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
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func crd(plural, group string, scope apiextensionsv1.ResourceScope, label string, served ...bool) apiextensionsv1.CustomResourceDefinition {
	c := apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural}},
	}
	if label != "" {
		c.Labels[kbindv1alpha1.ExportedLabel] = label
	}
	for i, s := range served {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: fmt.Sprintf("v%d", i+1), Served: s})
	}
	return c
}

func TestExportsFromCRDs(t *testing.T) {
	got := ExportsFromCRDs([]apiextensionsv1.CustomResourceDefinition{
		crd("widgets", "example.org", apiextensionsv1.NamespaceScoped, "true", true, false, true),
		crd("clusters", "example.org", apiextensionsv1.ClusterScoped, "true", true),
		crd("unlabelled", "example.org", apiextensionsv1.NamespaceScoped, ""),
		crd("truthy", "example.org", apiextensionsv1.NamespaceScoped, "True", true), // only exact "true"
		crd("unserved", "example.org", apiextensionsv1.NamespaceScoped, "true", false),
	})
	want := "[{clusters.example.org example.org clusters Cluster [v1]} {widgets.example.org example.org widgets Namespaced [v1 v3]}]"
	if fmt.Sprint(got) != want {
		t.Errorf("exports\n got %v\nwant %s", got, want)
	}
}

func TestBuiltInGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"": true, "apps": true, "batch": true, "extensions": true, "policy": true, "autoscaling": true,
		"rbac.authorization.k8s.io": true, "apiextensions.k8s.io": true, "k8s.io": true,
		"example.org": false, "core.kcp.io": false, "notk8s.io": false, "apps.example.org": false,
	} {
		if BuiltInGroup(group) != want {
			t.Errorf("BuiltInGroup(%q) = %v, want %v", group, !want, want)
		}
	}
}

func TestFindSchema(t *testing.T) {
	withGVK := func(group, version, kind string) *spec.Schema {
		s := &spec.Schema{}
		s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": group, "version": version, "kind": kind}})
		return s
	}
	doc := &spec3.OpenAPI{Components: &spec3.Components{Schemas: map[string]*spec.Schema{
		"org.example.v1.Widget":     withGVK("example.org", "v1", "Widget"),
		"org.example.v1.WidgetList": withGVK("example.org", "v1", "WidgetList"),
		"org.example.v1.Plain":      {},
		"org.example.v1.Null":       nil, // "name": null in a document
	}}}
	if got := FindSchema(doc, schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}); got != "org.example.v1.Widget" {
		t.Errorf("FindSchema = %q", got)
	}
	if got := FindSchema(doc, schema.GroupVersionKind{Group: "example.org", Version: "v2", Kind: "Widget"}); got != "" {
		t.Errorf("FindSchema for a missing version = %q", got)
	}
	if got := FindSchema(&spec3.OpenAPI{}, schema.GroupVersionKind{}); got != "" {
		t.Errorf("FindSchema without components = %q", got)
	}
}

func TestKeepUnreadable(t *testing.T) {
	api := func(name, group string) kbindv1alpha1.ExportedAPI {
		return kbindv1alpha1.ExportedAPI{Name: name, Group: group}
	}
	const crdSrc, oapi = kbindv1alpha1.ActiveSchemaSourceCRD, kbindv1alpha1.ActiveSchemaSourceOpenAPI
	previous := []kbindv1alpha1.ExportedAPI{api("a.one.org", "one.org"), api("b.two.org", "two.org"), api("c.two.org", "two.org")}
	broken := []GroupError{{Group: "two.org", Err: fmt.Errorf("503")}}
	cases := []struct {
		name       string
		fresh      []kbindv1alpha1.ExportedAPI
		unreadable []GroupError
		prevSource kbindv1alpha1.ActiveSchemaSource
		want       string
	}{
		{"a successful read removes what it no longer lists", []kbindv1alpha1.ExportedAPI{api("a.one.org", "one.org")}, nil, oapi, "[a.one.org]"},
		{"an unreadable group keeps its last exports", []kbindv1alpha1.ExportedAPI{api("a.one.org", "one.org")}, broken, oapi, "[a.one.org b.two.org c.two.org]"},
		{"an unreadable group, nothing else read", nil, broken, oapi, "[b.two.org c.two.org]"},
		{"no duplicates when the group was partly read", []kbindv1alpha1.ExportedAPI{api("b.two.org", "two.org")}, broken, oapi, "[b.two.org c.two.org]"},
		{"exports of another source are not kept", nil, broken, crdSrc, "[]"},
	}
	for _, tc := range cases {
		got := KeepUnreadable(tc.fresh, tc.unreadable, previous, tc.prevSource, oapi)
		names := []string{}
		for _, e := range got {
			names = append(names, e.Name)
		}
		if fmt.Sprint(names) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, names, tc.want)
		}
	}
}

// TestAutoStaysCRD: Auto resolved to CRD never falls through to OpenAPI
// (issue #52: a label removal went unseen behind the fallback).
func TestAutoStaysCRD(t *testing.T) {
	const auto, crdSrc, oapi = kbindv1alpha1.SchemaSourceAuto, kbindv1alpha1.SchemaSourceCRD, kbindv1alpha1.SchemaSourceOpenAPI
	cases := []struct {
		source   kbindv1alpha1.SchemaSource
		resolved kbindv1alpha1.ActiveSchemaSource
		want     bool
	}{
		{auto, kbindv1alpha1.ActiveSchemaSourceCRD, true},
		{"", kbindv1alpha1.ActiveSchemaSourceCRD, true},
		{auto, kbindv1alpha1.ActiveSchemaSourceOpenAPI, false},
		{auto, "", false},
		{crdSrc, kbindv1alpha1.ActiveSchemaSourceCRD, false}, // CRD never falls through anyway
		{oapi, kbindv1alpha1.ActiveSchemaSourceCRD, false},
	}
	for _, tc := range cases {
		if got := AutoStaysCRD(tc.source, tc.resolved); got != tc.want {
			t.Errorf("AutoStaysCRD(%q, %q) = %v, want %v", tc.source, tc.resolved, got, tc.want)
		}
	}
}
