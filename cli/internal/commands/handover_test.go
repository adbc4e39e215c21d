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

package commands

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestHandOverProblemAndDone(t *testing.T) {
	obj := func(ann map[string]string, finalizers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAnnotations(ann)
		u.SetFinalizers(finalizers)
		return u
	}
	imported := map[string]string{kbindv1alpha1.OwnerAnnotation: kbindv1alpha1.OwnerProvider}
	toC, toP := kbindv1alpha1.HandOverConsumer, kbindv1alpha1.HandOverProvider
	deleting := obj(imported)
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	for _, tc := range []struct {
		name    string
		obj     *unstructured.Unstructured
		to      string
		problem string // "" when it can be asked
		done    bool
	}{
		{"adopt an imported object", obj(imported), toC, "", false},
		{"adopt a consumer object", obj(nil, kbindv1alpha1.SyncerFinalizer), toC, "the consumer's already", true},
		{"release a synced consumer object", obj(nil, kbindv1alpha1.SyncerFinalizer), toP, "", false},
		{"release an imported object", obj(imported), toP, "the provider's already", true},
		{"release an object kbind does not sync", obj(nil), toP, "no provider copy", false},
		{"a deleting object", deleting, toC, "being deleted", false},
		{"asked, not done yet", obj(map[string]string{kbindv1alpha1.OwnerAnnotation: kbindv1alpha1.OwnerProvider, kbindv1alpha1.HandOverAnnotation: toC}), toC, "", false},
	} {
		if got := handOverProblem(tc.obj, tc.to); (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
			t.Errorf("%s: problem %q, want one containing %q", tc.name, got, tc.problem)
		}
		if got := handedOver(tc.obj, tc.to); got != tc.done {
			t.Errorf("%s: handedOver = %v, want %v", tc.name, got, tc.done)
		}
	}
}
