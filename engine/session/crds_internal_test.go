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

package session

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

// A summary of an exported CRD is discovered exactly as the whole CRD, and
// holds no schema: the List of the exports may answer with summaries.
func TestSummaryDiscoversAsTheWholeCRD(t *testing.T) {
	exported := map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}
	version := func(name string, served bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served, Storage: served,
			Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}}
	}
	crd := func(name, plural, group string, scope apiextensionsv1.ResourceScope, labels map[string]string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) apiextensionsv1.CustomResourceDefinition {
		return apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7", Labels: labels, Annotations: map[string]string{"a": "b"}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: scope, Versions: versions,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "K", ListKind: "KList", ShortNames: []string{"k"}}},
		}
	}
	for _, tc := range []struct {
		name string
		crd  apiextensionsv1.CustomResourceDefinition
	}{
		{"namespaced, one version", crd("widgets.example.org", "widgets", "example.org", apiextensionsv1.NamespaceScoped, exported, version("v1", true))},
		{"cluster-scoped", crd("gadgets.example.org", "gadgets", "example.org", apiextensionsv1.ClusterScoped, exported, version("v1", true))},
		{"an unserved version", crd("things.example.org", "things", "example.org", apiextensionsv1.NamespaceScoped, exported, version("v1", true), version("v2", false))},
		{"no version served", crd("things.example.org", "things", "example.org", apiextensionsv1.NamespaceScoped, exported, version("v1", false))},
		{"not exported", crd("things.example.org", "things", "example.org", apiextensionsv1.NamespaceScoped, map[string]string{"other": "x"}, version("v1", true))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summary(&tc.crd)
			if got, want := kbindschema.ExportsFromCRDs([]apiextensionsv1.CustomResourceDefinition{*s}), kbindschema.ExportsFromCRDs([]apiextensionsv1.CustomResourceDefinition{tc.crd}); !reflect.DeepEqual(got, want) {
				t.Errorf("the summary discovers %+v, the whole CRD %+v", got, want)
			}
			if s.Name != tc.crd.Name || s.ResourceVersion != tc.crd.ResourceVersion {
				t.Errorf("the summary is %s at %s, want %s at %s", s.Name, s.ResourceVersion, tc.crd.Name, tc.crd.ResourceVersion)
			}
			for _, v := range s.Spec.Versions {
				if v.Schema != nil || v.Subresources != nil {
					t.Errorf("the summary keeps version %s's schema or subresources", v.Name)
				}
			}
			s.Labels["mutated"] = "yes"
			s.Spec.Names.ShortNames[0] = "mutated"
			if tc.crd.Labels["mutated"] != "" || tc.crd.Spec.Names.ShortNames[0] != "k" {
				t.Error("the summary shares its labels or names with the CRD")
			}
		})
	}
}
