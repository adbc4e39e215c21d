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

package doctor

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// TestCopiesKeptFinding: a binding whose CopiesKept condition is True gets
// a note (never an error or a warning: nothing is wrong) with the counts
// and the kubectl kbind kept commands; no note without the condition, or
// with it False, and the other findings stay.
func TestCopiesKeptFinding(t *testing.T) {
	kept := func(kind, ns string, status metav1.ConditionStatus, counts ...kbindv1alpha1.KeptCopies) BindingState {
		return BindingState{Kind: kind, Meta: metav1.ObjectMeta{Name: "provider", Namespace: ns},
			Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}},
			Status: kbindv1alpha1.BindingStatus{KeptCopies: counts, Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionTrue},
				{Type: string(kbindv1alpha1.ConditionCopiesKept), Status: status, Reason: "DeletionProtected", Message: "kept 3 copies"}}}}
	}
	for _, tc := range []struct {
		name string
		b    BindingState
		want []string
	}{
		{"a ClusterBinding that kept copies", kept("ClusterBinding", "", metav1.ConditionTrue,
			kbindv1alpha1.KeptCopies{Name: "widgets.example.org", Count: 2}, kbindv1alpha1.KeptCopies{Name: "gadgets.example.org", Count: 1}), []string{
			"kept 3 provider copies (widgets.example.org: 2, gadgets.example.org: 1)",
			"kubectl kbind kept clusterbinding/provider   # lists them on the provider",
			"kubectl kbind kept clusterbinding/provider --delete   # deletes them",
			"CopiesKept=True reason DeletionProtected: kept 3 copies"}},
		{"a Binding", kept("Binding", "team-a", metav1.ConditionTrue, kbindv1alpha1.KeptCopies{Name: "widgets.example.org", Count: 1}), []string{
			"kubectl kbind kept binding/provider -n team-a --delete"}},
		{"the condition without counts yet", kept("ClusterBinding", "", metav1.ConditionTrue), []string{"kept provider copies of objects it no longer syncs"}},
		{"the condition False", kept("ClusterBinding", "", metav1.ConditionFalse), nil},
	} {
		f := copiesKeptFinding(tc.b)
		if (f != nil) != (tc.want != nil) {
			t.Errorf("%s: finding %+v", tc.name, f)
			continue
		}
		if f == nil {
			continue
		}
		if f.Severity != SeverityNote || f.Check != "binding.copiesKept" || f.Doc != "docs/bindings.md#deletion-protection" {
			t.Errorf("%s: %s %s %s", tc.name, f.Severity, f.Check, f.Doc)
		}
		all := f.Problem + "\n" + f.Fix + "\n" + f.Evidence
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, w, all)
			}
		}
	}
	// Through checkBinding: the note comes with the binding's other
	// findings, and does not hide them.
	b := kept("ClusterBinding", "", metav1.ConditionTrue, kbindv1alpha1.KeptCopies{Name: "widgets.example.org", Count: 1})
	b.Status.BoundAPIs = []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org", Instances: &kbindv1alpha1.InstanceCounts{Total: 3, Synced: 1, Failed: 2}}}
	conn := connection()
	got := checks(checkBinding(b, bindingContext{Conn: &conn}, now, 0, cmd))
	if strings.Join(got, " ") != "binding.failedInstances binding.copiesKept" {
		t.Errorf("checkBinding: %v, want the failed instances and the kept copies", got)
	}
}
