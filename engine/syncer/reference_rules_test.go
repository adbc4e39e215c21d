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

package syncer

import (
	"strings"
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// TestWritesReference: no up rule may write a field a reference entry of
// the same API reads (issue #51): kbind maps it to the related copy at the
// object's own namespace's place, and a rule could otherwise point the
// provider's controller at another consumer namespace's copy.
func TestWritesReference(t *testing.T) {
	ref := func(api, path string) kbindv1alpha1.RelatedResource {
		return kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer,
			Reference: &kbindv1alpha1.RelatedResourceReference{API: api, FieldPath: path}}
	}
	spec := func(rulePath string, related ...kbindv1alpha1.RelatedResource) kbindv1alpha1.BindingSpec {
		return kbindv1alpha1.BindingSpec{APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org", Mutations: &kbindv1alpha1.Mutations{
			Up: []kbindv1alpha1.MutationRule{{Path: ".spec.tier", Expression: "'gold'"}, {Path: rulePath, Expression: "'team-y.db'"}}}}},
			RelatedResources: related}
	}
	for _, tc := range []struct {
		name    string
		spec    kbindv1alpha1.BindingSpec
		refused bool
	}{
		{"the reference field itself", spec(".spec.secretRef.name", ref("widgets.example.org", ".spec.secretRef.name")), true},
		{"the object holding it", spec(".spec.secretRef", ref("widgets.example.org", ".spec.secretRef.name")), true},
		{"below it", spec(".spec.secretRef.name.x", ref("widgets.example.org", ".spec.secretRef.name")), true},
		{"a sibling field", spec(".spec.secretRef.namespace", ref("widgets.example.org", ".spec.secretRef.name")), false},
		{"a field sharing a prefix of its name", spec(".spec.secretRefs", ref("widgets.example.org", ".spec.secretRef")), false},
		{"another API's reference", spec(".spec.secretRef.name", ref("gadgets.example.org", ".spec.secretRef.name")), false},
		{"a selector entry", spec(".spec.secretRef.name", kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets,
			Direction: kbindv1alpha1.FromConsumer, Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"db"}}}), false},
		{"no related entry", spec(".spec.secretRef.name"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := writesReference(tc.spec, tc.spec.APIs[0])
			if (err != nil) != tc.refused {
				t.Fatalf("writesReference = %v, refused %v", err, tc.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "mutations.up[1]") {
				t.Errorf("the refusal does not name the rule: %v", err)
			}
		})
	}
}
