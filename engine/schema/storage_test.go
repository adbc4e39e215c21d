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
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestStorageVersion(t *testing.T) {
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage}
	}
	cases := []struct {
		name     string
		versions []apiextensionsv1.CustomResourceDefinitionVersion
		want     string // "": none
	}{
		{"one version", []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true)}, "v1"},
		{"storage first", []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), version("v2", false)}, "v1"},
		{"storage last", []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", false), version("v2", true)}, "v2"},
		{"none marked", []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", false)}, ""},
		{"no versions", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.org", Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget"}, Versions: tc.versions,
			}}
			v := StorageVersion(crd)
			switch {
			case tc.want == "" && v != nil:
				t.Errorf("StorageVersion = %s, want none", v.Name)
			case tc.want != "" && (v == nil || v.Name != tc.want):
				t.Errorf("StorageVersion = %v, want %s", v, tc.want)
			case v != nil && v != &crd.Spec.Versions[0] && v != &crd.Spec.Versions[len(crd.Spec.Versions)-1]:
				t.Error("StorageVersion returned a copy, not the CRD's version")
			}
			gvk, ok := StorageGVK(crd)
			if want := (schema.GroupVersionKind{Group: "example.org", Version: tc.want, Kind: "Widget"}); gvk != want || ok != (tc.want != "") {
				t.Errorf("StorageGVK = %v, %v; want %v, %v", gvk, ok, want, tc.want != "")
			}
		})
	}
}
