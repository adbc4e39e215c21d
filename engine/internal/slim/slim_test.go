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

package slim

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestTransform(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	u.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"size":1}}`, "team": "a"})
	u.SetManagedFields(managed)
	out, err := Transform()(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if len(got.GetManagedFields()) > 0 || len(got.GetAnnotations()) != 1 || got.GetAnnotations()["team"] != "a" || got.Object["spec"] == nil {
		t.Errorf("bound object kept %v %v", got.GetManagedFields(), got.GetAnnotations())
	}

	only := &unstructured.Unstructured{Object: map[string]any{}}
	only.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: "{}"})
	out, _ = Transform()(only)
	if _, ok := out.(*unstructured.Unstructured).Object["metadata"].(map[string]any)["annotations"]; ok {
		t.Errorf("an empty annotations map was left: %v", out)
	}

	// Typed objects keep their annotations (a Secret's are its own).
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}, ManagedFields: managed}}
	out, _ = Transform()(s)
	if sec := out.(*corev1.Secret); len(sec.ManagedFields) > 0 || len(sec.Annotations) != 1 {
		t.Errorf("typed object: %v %v", sec.ManagedFields, sec.Annotations)
	}
}

// An unstructured object keeps every other field, and the annotations map
// it had is edited in place (no copy): kept when other keys remain.
func TestTransformKeepsTheRest(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.org/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "a", "namespace": "n", "labels": map[string]any{"l": "1"},
			"managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec": map[string]any{"size": int64(1)}, "status": map[string]any{"phase": "Ready"},
	}}
	out, err := Transform()(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	want := map[string]any{
		"apiVersion": "example.org/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "a", "namespace": "n", "labels": map[string]any{"l": "1"}},
		"spec":     map[string]any{"size": int64(1)}, "status": map[string]any{"phase": "Ready"},
	}
	if !reflect.DeepEqual(got.Object, want) {
		t.Errorf("got %v, want %v", got.Object, want)
	}
	// Without metadata nothing happens (and nothing panics).
	if _, err := Transform()(&unstructured.Unstructured{Object: map[string]any{"metadata": "garbage"}}); err != nil {
		t.Fatal(err)
	}
}
