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
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// FuzzOpenAPIDocument feeds arbitrary /openapi/v3 documents through
// discovery, schema reading and CRD synthesis: a provider can serve
// anything, and kbind must report it, never panic.
func FuzzOpenAPIDocument(f *testing.F) {
	f.Add([]byte(`{"components":{"schemas":{"org.example.v1alpha1.Widget":null}}}`))
	f.Add([]byte(`{"components":{"schemas":null}}`))
	f.Add([]byte(`{"components":null}`))
	f.Add([]byte(`{"components":{"schemas":{"w":{"x-kubernetes-group-version-kind":[{"group":"example.org","version":"v1alpha1","kind":"Widget"}],"properties":{"spec":null}}}}}`))
	f.Add([]byte(`{"components":{"schemas":{"w":{"x-kubernetes-group-version-kind":[{"group":"example.org","version":"v1alpha1","kind":"Widget"}],"items":{"$ref":"#/x"},"additionalProperties":true}}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{this is not JSON`))
	if data, err := readRecorded(); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d := &Discoverer{Discovery: newRecordedDiscovery(t, map[string][]byte{"apis/example.org/v1alpha1": doc})}
		_, _, _ = d.OpenAPIExports(context.Background())
		api, err := d.ReadOpenAPI(context.Background(), kbindv1alpha1.ExportedAPI{Name: "widgets.example.org", Group: "example.org", Resource: "widgets"})
		if err != nil {
			return
		}
		_, _ = FromOpenAPI(api, "p")
	})
}

// FuzzUpdated feeds arbitrary existing consumer CRDs (labels or annotations
// stripped by hand, odd versions and stored versions) to the update path.
func FuzzUpdated(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"w"}}`))
	f.Add([]byte(`{"metadata":{"name":"w","labels":null,"annotations":null},"status":{"storedVersions":["v0","v1","v0"]}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"core.kbind.io/connection":"p"}},"spec":{"versions":[{"name":"v0"}]},"status":{"storedVersions":["v0"]}}`))
	desired := Stamp("w", apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}}, "p")
	f.Fuzz(func(t *testing.T, raw []byte) {
		existing := &apiextensionsv1.CustomResourceDefinition{}
		if err := json.Unmarshal(raw, existing); err != nil {
			return
		}
		got := Updated(existing, desired)
		seen := map[string]bool{}
		for _, v := range got.Spec.Versions {
			if seen[v.Name] {
				t.Fatalf("version %s twice: %+v", v.Name, got.Spec.Versions)
			}
			seen[v.Name] = true
		}
		for _, stored := range existing.Status.StoredVersions {
			if !seen[stored] {
				t.Fatalf("stored version %s dropped", stored)
			}
		}
		_ = Decide(existing, desired, "w", "p", kbindv1alpha1.SchemaPolicy{PullPolicy: kbindv1alpha1.PullPolicyBound, UpdatePolicy: kbindv1alpha1.UpdatePolicyAlways}, kbindv1alpha1.ActiveSchemaSourceCRD)
	})
}
