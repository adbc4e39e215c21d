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

package fieldpath

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		path  string
		want  Path
		error string
	}{
		{path: ".spec.writeConnectionSecretToRef.name", want: Path{"spec", "writeConnectionSecretToRef", "name"}},
		{path: ".spec.config_ref.name-v2", want: Path{"spec", "config_ref", "name-v2"}},
		{path: ".spec.name", want: Path{"spec", "name"}},
		{path: "spec.secretRef.name", error: `must start with "."`},
		{path: "", error: `must start with "."`},
		{path: ".spec", error: "must name a field under .spec"},
		{path: ".status.secretName", error: "must name a field under .spec"},
		{path: ".metadata.name", error: "must name a field under .spec"},
		{path: ".spec.refs[0].name", error: `invalid segment "refs[0]"`},
		{path: ".spec.refs.*.name", error: `invalid segment "*"`},
		{path: ".spec..name", error: `invalid segment ""`},
		{path: ".spec.name.", error: `invalid segment ""`},
		{path: ".spec.0name", error: `invalid segment "0name"`},
		{path: ".spec.-name", error: `invalid segment "-name"`},
		{path: "{.spec.secretRef.name}", error: `must start with "."`},
		{path: ".spec['secretRef'].name", error: "must name a field under .spec"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := Parse(tc.path)
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("Parse(%q) = %v, %v; want an error with %q", tc.path, got, err, tc.error)
				}
				if !strings.Contains(err.Error(), "such as .spec.writeConnectionSecretToRef.name") {
					t.Errorf("the error does not show what is allowed: %v", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) || got.String() != tc.path {
				t.Fatalf("Parse(%q) = %v (%q), %v", tc.path, got, got.String(), err)
			}
		})
	}
}

func TestName(t *testing.T) {
	path := Path{"spec", "secretRef", "name"}
	for _, tc := range []struct {
		name  string
		spec  any
		want  string
		error string
	}{
		{name: "set", spec: map[string]any{"secretRef": map[string]any{"name": "db-conn"}}, want: "db-conn"},
		{name: "no spec", spec: nil},
		{name: "no ref", spec: map[string]any{}},
		{name: "null ref", spec: map[string]any{"secretRef": nil}},
		{name: "empty name", spec: map[string]any{"secretRef": map[string]any{"name": ""}}},
		{name: "number", spec: map[string]any{"secretRef": map[string]any{"name": int64(3)}}, error: "not a string"},
		{name: "ref is a string", spec: map[string]any{"secretRef": "db"}, error: ".spec.secretRef is not an object"},
		{name: "invalid name", spec: map[string]any{"secretRef": map[string]any{"name": "Not/A/Name"}}, error: "not a valid object name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			if tc.spec != nil {
				obj.Object["spec"] = tc.spec
			}
			got, err := Name(obj, path)
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("Name = %q, %v; want an error with %q", got, err, tc.error)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Name = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSet(t *testing.T) {
	path := Path{"spec", "secretRef", "name"}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"secretRef": map[string]any{"name": "db"}}}}
	Set(obj, path, "team-a.db")
	if got, _ := Name(obj, path); got != "team-a.db" {
		t.Errorf("Set: %q", got)
	}
	for _, spec := range []any{nil, map[string]any{}, map[string]any{"secretRef": "x"}, map[string]any{"secretRef": map[string]any{"name": ""}}} {
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		before := obj.DeepCopy()
		Set(obj, path, "team-a.db")
		if !reflect.DeepEqual(obj, before) {
			t.Errorf("Set changed an object that names nothing: %v", obj.Object)
		}
	}
}
