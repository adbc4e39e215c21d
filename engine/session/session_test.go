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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
)

func TestOnlyOurContent(t *testing.T) {
	copyOf := func(consumer string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.org/v1", "kind": "Widget",
			"spec": map[string]any{"secretish": "x"}, "status": map[string]any{"phase": "Ready"},
		}}
		u.SetName("w")
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "m"}})
		if consumer != "" {
			u.SetLabels(map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: consumer})
			u.SetAnnotations(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: consumer})
		}
		return u
	}
	in := func(ns string, u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetNamespace(ns)
		return u
	}
	nsA := kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "kbind-a"}
	prefixA := kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}
	cases := []struct {
		name      string
		uid       string
		iso       kbindv1alpha1.Isolation
		in        any
		keepsSpec bool
	}{
		{"our copy keeps its content", "me", kbindv1alpha1.Isolation{}, copyOf("me"), true},
		{"another consumer's copy keeps only metadata", "me", kbindv1alpha1.Isolation{}, copyOf("them"), false},
		{"an unmarked object keeps only metadata", "me", kbindv1alpha1.Isolation{}, copyOf(""), false},
		{"consumer unknown yet: everything is kept", "", kbindv1alpha1.Isolation{}, copyOf("them"), true},
		{"an unmarked object in the consumer's own namespace keeps its content (Import)", "me", nsA, in("kbind-a", copyOf("")), true},
		{"another consumer's copy there keeps only metadata", "me", nsA, in("kbind-a", copyOf("them")), false},
		{"an unmarked object elsewhere keeps only metadata", "me", nsA, in("kbind-b", copyOf("")), false},
		{"an unmarked object in a namespace of the prefix keeps its content (Import)", "me", prefixA, in("a-team", copyOf("")), true},
		{"a marked object there keeps only metadata", "me", prefixA, in("a-team", copyOf("them")), false},
		{"the prefix namespace itself (the Lease's) is not imported from", "me", prefixA, in("a", copyOf("")), false},
		{"an unmarked object elsewhere under Prefixed keeps only metadata", "me", prefixA, in("b-team", copyOf("")), false},
		{"None never keeps an unmarked object's content", "me", kbindv1alpha1.Isolation{}, in("kbind-a", copyOf("")), false},
	}
	for _, tc := range cases {
		want := tc.in.(*unstructured.Unstructured).GetAnnotations()[kbindv1alpha1.ConsumerClusterUIDAnnotation]
		out, err := onlyOurContent(tc.uid, isolation.For(tc.iso))(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		u := out.(*unstructured.Unstructured)
		_, hasSpec := u.Object["spec"]
		_, hasStatus := u.Object["status"]
		if hasSpec != tc.keepsSpec || hasStatus != tc.keepsSpec {
			t.Errorf("%s: spec kept %v, status kept %v", tc.name, hasSpec, hasStatus)
		}
		if u.GetName() != "w" || u.GetKind() != "Widget" || len(u.GetManagedFields()) != 0 {
			t.Errorf("%s: metadata %v", tc.name, u.Object["metadata"])
		}
		if u.GetAnnotations()[kbindv1alpha1.ConsumerClusterUIDAnnotation] != want {
			t.Errorf("%s: the ownership markers must stay", tc.name)
		}
	}
	// Typed objects (namespaces) are kept as they are.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"}}}
	if out, _ := onlyOurContent("me", isolation.Mapping{})(ns); out.(*corev1.Namespace).Labels["x"] != "y" {
		t.Error("typed objects must be kept")
	}
}
