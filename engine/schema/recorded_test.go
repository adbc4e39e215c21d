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
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	clienttesting "k8s.io/client-go/testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// recordedDiscovery serves discovery from a fixed resource list and
// /openapi/v3 from recorded documents: testdata holds what a real
// kube-apiserver served (engine/schema/internal/recordfixture).
type recordedDiscovery struct {
	*fake.FakeDiscovery
	openapi openapi.Client
	// failed group versions make ServerPreferredResources fail partly.
	failed map[schema.GroupVersion]error
}

func (r *recordedDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	if len(r.failed) > 0 {
		return r.Resources, &discovery.ErrGroupDiscoveryFailed{Groups: r.failed}
	}
	return r.Resources, nil
}

func (r *recordedDiscovery) OpenAPIV3() openapi.Client { return r.openapi }

func newRecordedDiscovery(t testing.TB, docs map[string][]byte) *recordedDiscovery {
	t.Helper()
	paths := map[string]openapi.GroupVersion{}
	for path, doc := range docs {
		paths[path] = openapitest.FakeGroupVersion{GVSpec: doc}
	}
	return &recordedDiscovery{
		FakeDiscovery: &fake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
			{GroupVersion: "example.org/v1alpha1", APIResources: []metav1.APIResource{
				{Name: "widgets", SingularName: "widget", Kind: "Widget", Namespaced: true},
				{Name: "widgets/status", Kind: "Widget", Namespaced: true},
				{Name: "unschemed", Kind: "Unschemed", Namespaced: true},
			}},
			{GroupVersion: "broken.example.org/v1", APIResources: []metav1.APIResource{{Name: "things", Kind: "Thing", Namespaced: true}}},
			{GroupVersion: "missing.example.org/v1", APIResources: []metav1.APIResource{{Name: "ghosts", Kind: "Ghost"}}},
			{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true}}},
		}}},
		openapi: &openapitest.FakeClient{PathsMap: paths},
	}
}

func recorded(t *testing.T) []byte {
	t.Helper()
	data, err := readRecorded()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readRecorded() ([]byte, error) {
	return os.ReadFile("testdata/openapi-example.org-v1alpha1.json")
}

func TestOpenAPIExportsSkipsBrokenGroups(t *testing.T) {
	d := &Discoverer{Discovery: newRecordedDiscovery(t, map[string][]byte{
		"apis/example.org/v1alpha1":  recorded(t),
		"apis/broken.example.org/v1": []byte("{this is not JSON"),
		// missing.example.org has no document at all.
	})}
	exports, unreadable, err := d.OpenAPIExports(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Only the resource with a usable schema; the resource without a
	// schema and the built-in group are skipped.
	if len(exports) != 1 || exports[0].Name != "widgets.example.org" || exports[0].Scope != kbindv1alpha1.APIScopeNamespaced {
		t.Fatalf("exports %+v", exports)
	}
	// The broken document and the missing one are not "no export": their
	// groups are unreadable, and the Connection keeps what it exported
	// before.
	if len(unreadable) != 2 || unreadable[0].Group != "broken.example.org" || !strings.Contains(unreadable[0].Error(), "not valid OpenAPI v3 JSON") ||
		unreadable[1].Group != "missing.example.org" || !strings.Contains(unreadable[1].Error(), "index does not list") {
		t.Fatalf("unreadable %+v", unreadable)
	}
}

// failingGroupVersion is an /openapi/v3 entry whose fetch fails.
type failingGroupVersion struct{ err error }

func (f failingGroupVersion) Schema(string) ([]byte, error) { return nil, f.err }
func (f failingGroupVersion) ServerRelativeURL() string     { return "" }

func TestOpenAPIExportsReportsReadErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no"))
	d := newRecordedDiscovery(t, map[string][]byte{"apis/example.org/v1alpha1": recorded(t)})
	paths := d.openapi.(*openapitest.FakeClient).PathsMap
	paths["apis/broken.example.org/v1"] = failingGroupVersion{err: apierrors.NewServiceUnavailable("down")}
	paths["apis/missing.example.org/v1"] = failingGroupVersion{err: forbidden}
	exports, unreadable, err := (&Discoverer{Discovery: d}).OpenAPIExports(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(exports) != 1 || len(unreadable) != 2 {
		t.Fatalf("exports %+v unreadable %+v", exports, unreadable)
	}
	if !apierrors.IsServiceUnavailable(unreadable[0].Err) || !apierrors.IsForbidden(unreadable[1].Err) ||
		!strings.Contains(unreadable[1].Error(), "get /openapi/v3/apis/missing.example.org/v1") {
		t.Errorf("unreadable %v", unreadable)
	}

	// Discovery of a group failing (an aggregated API down) makes it
	// unreadable too, never absent.
	d.failed = map[schema.GroupVersion]error{{Group: "down.example.org", Version: "v1"}: errors.New("503")}
	_, unreadable, err = (&Discoverer{Discovery: d}).OpenAPIExports(context.Background())
	if err != nil || len(unreadable) != 3 || unreadable[1].Group != "down.example.org" {
		t.Fatalf("unreadable %+v, err %v", unreadable, err)
	}

	// The /openapi/v3 index itself failing fails the pass.
	d.openapi = &openapitest.FakeClient{ForcedErr: errors.New("index down")}
	if _, _, err := (&Discoverer{Discovery: d}).OpenAPIExports(context.Background()); err == nil {
		t.Fatal("a failed /openapi/v3 index must fail discovery, not look like no exports")
	}
}

func TestSynthesisFromRecordedDocument(t *testing.T) {
	d := &Discoverer{Discovery: newRecordedDiscovery(t, map[string][]byte{"apis/example.org/v1alpha1": recorded(t)})}
	api, err := d.ReadOpenAPI(context.Background(), kbindv1alpha1.ExportedAPI{Name: "widgets.example.org", Group: "example.org", Resource: "widgets"})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := FromOpenAPI(api, "p")
	if err != nil {
		t.Fatal(err)
	}
	v := crd.Spec.Versions[0]
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("the discovered status subresource is missing")
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if spec.Properties["size"].Type != "integer" || string(spec.Properties["size"].Default.Raw) != "3" ||
		len(spec.Properties["color"].Enum) != 2 || spec.Properties["tags"].Items.Schema.Type != "string" ||
		spec.Properties["labels"].AdditionalProperties.Schema.Type != "string" || len(spec.Required) != 1 {
		t.Errorf("recorded schema not carried over: %+v", spec)
	}
	if errs := structuralErrors(v.Schema.OpenAPIV3Schema); len(errs) > 0 {
		t.Errorf("not structural: %v", errs)
	}
	again, _ := FromOpenAPI(api, "p")
	if SpecHash(&crd.Spec) != SpecHash(&again.Spec) {
		t.Error("synthesis is not deterministic")
	}
}

// TestOpenAPIMissingDocumentIsUnreadable (issue #52): a group version that
// server discovery announces but the /openapi/v3 index does not list (yet,
// or briefly: an aggregated API restarting, a CRD's document being
// rebuilt) is unreadable, not "no export": the Connection keeps the last
// known exports of its group, where skipping it dropped them — and with
// autoBind drained them.
func TestOpenAPIMissingDocumentIsUnreadable(t *testing.T) {
	const oapi = kbindv1alpha1.ActiveSchemaSourceOpenAPI
	previous := []kbindv1alpha1.ExportedAPI{
		{Name: "ghosts.missing.example.org", Group: "missing.example.org", Resource: "ghosts", Scope: kbindv1alpha1.APIScopeCluster, Versions: []string{"v1"}},
		{Name: "widgets.example.org", Group: "example.org", Resource: "widgets", Scope: kbindv1alpha1.APIScopeNamespaced, Versions: []string{"v1alpha1"}},
	}
	cases := []struct {
		name string
		docs map[string][]byte
		want string // exports kept, then unreadable groups
	}{
		{"the group version's document missing from the index",
			map[string][]byte{"apis/example.org/v1alpha1": recorded(t), "apis/broken.example.org/v1": recorded(t)},
			"[ghosts.missing.example.org widgets.example.org] [missing.example.org]"},
		{"every document missing",
			map[string][]byte{},
			"[ghosts.missing.example.org widgets.example.org] [broken.example.org example.org missing.example.org]"},
	}
	for _, tc := range cases {
		fresh, unreadable, err := (&Discoverer{Discovery: newRecordedDiscovery(t, tc.docs)}).OpenAPIExports(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var names, groups []string
		for _, e := range KeepUnreadable(fresh, unreadable, previous, oapi, oapi) {
			names = append(names, e.Name)
		}
		for _, u := range unreadable {
			groups = append(groups, u.Group)
			if !strings.Contains(u.Error(), "/openapi/v3/apis/"+u.Group+"/") {
				t.Errorf("%s: the error does not name the document: %v", tc.name, u)
			}
		}
		if got := fmt.Sprint(names) + " " + fmt.Sprint(groups); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
