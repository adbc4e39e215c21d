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

func TestImportFindings(t *testing.T) {
	importing := BindingState{Kind: "ClusterBinding", Meta: metav1.ObjectMeta{Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org", ProviderObjects: kbindv1alpha1.ProviderObjectsImport}, {Name: "gadgets.example.org"}},
	}, Status: kbindv1alpha1.BindingStatus{BoundAPIs: []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org",
		Instances: &kbindv1alpha1.InstanceCounts{Total: 5, Synced: 5, Imported: 3}}}}}
	plain := BindingState{Kind: "Binding", Meta: metav1.ObjectMeta{Namespace: "team-a", Name: "w"}, Spec: kbindv1alpha1.BindingSpec{
		APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}}}
	got := importFindings([]BindingState{importing, plain}, Commands{Consumer: "kubectl --context=consumer"})
	if len(got) != 1 {
		t.Fatalf("findings %+v, want one (the importing entry)", got)
	}
	f := got[0]
	if f.Check != "binding.imports" || f.Severity != SeverityNote || f.Doc != docImport || f.Object.Name != "widgets" {
		t.Errorf("finding %+v", f)
	}
	for _, want := range []string{"3 imported of 5 object(s)"} {
		if !strings.Contains(f.Evidence, want) {
			t.Errorf("evidence %q lacks %q", f.Evidence, want)
		}
	}
	for _, want := range []string{`OWNER:.metadata.annotations.core\.kbind\.io/owner`, "kubectl kbind adopt widgets.example.org/<name>"} {
		if !strings.Contains(f.Fix, want) {
			t.Errorf("fix %q lacks %q", f.Fix, want)
		}
	}
}
