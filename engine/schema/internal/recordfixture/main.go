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

// Command recordfixture records the /openapi/v3 document a real
// kube-apiserver serves for the schema package's fixture CRD (the local
// control plane, see engine/testenv), into
// engine/schema/testdata/openapi-example.org-v1alpha1.json:
//
//	go run ./engine/schema/internal/recordfixture
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/kbind/kbind/engine/test/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "recordfixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := testenv.StartCluster("fixture", testenv.ClusterOptions{Dir: dir, CRDs: []*apiextensionsv1.CustomResourceDefinition{fixture()}})
	if err != nil {
		return err
	}
	defer c.Stop()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	// The API server publishes a new CRD's document shortly after it is
	// established.
	var data []byte
	for deadline := time.Now().Add(time.Minute); ; {
		data, err = dc.RESTClient().Get().AbsPath("/openapi/v3/apis/example.org/v1alpha1").Do(context.Background()).Raw()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	return os.WriteFile("engine/schema/testdata/openapi-example.org-v1alpha1.json", data, 0o644)
}

// fixture is a Widget CRD with nested objects, a list, a map, defaults and
// a status subresource.
func fixture() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.org", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{"size"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size":   {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("3")}},
							"color":  {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"red"`)}, {Raw: []byte(`"blue"`)}}},
							"tags":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
							"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": str}},
					},
				}},
			}},
		},
	}
}
