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

package binding

import (
	"strings"
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestHoldDeletion(t *testing.T) {
	cases := []struct {
		name string
		in   holdInput
		want bool
	}{
		{"live, protected: nothing to hold", holdInput{Protected: true, Finalizer: true}, false},
		{"deleting, unprotected: the deletion proceeds", holdInput{Deleting: true, Finalizer: true}, false},
		{"deleting, protected: held", holdInput{Deleting: true, Protected: true, Finalizer: true}, true},
		{"deleting, protected, the finalizer gone: nothing holds it", holdInput{Deleting: true, Protected: true}, false},
		{"a Binding whose namespace is being deleted: not covered", holdInput{Deleting: true, Protected: true, Finalizer: true, NamespaceDeleting: true}, false},
	}
	for _, tc := range cases {
		if got := holdDeletion(tc.in); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestHeldMessage(t *testing.T) {
	status := &kbindv1alpha1.BindingStatus{
		BoundAPIs: []kbindv1alpha1.BoundAPI{
			{Name: "widgets.example.org", Instances: &kbindv1alpha1.InstanceCounts{Total: 12, Synced: 12}, UnbindDeletesCRD: true},
			{Name: "gadgets.example.org"},
		},
		RelatedResources: &kbindv1alpha1.RelatedStatus{Copies: 3},
	}
	cases := []struct {
		name, kind string
		policy     kbindv1alpha1.DeletionPolicy
		failed     string
		want       []string
	}{
		{"counts, the consumer CRD and the way forward", "ClusterBinding", "", "", []string{
			"deletion held: spec.deletionProtection is true, so nothing is drained or deleted and the ClusterBinding keeps syncing as before",
			"release 12 object(s) of widgets.example.org (deletionPolicy Delete: their provider copies are deleted",
			"then delete the consumer CRD widgets.example.org with every object of it",
			"release its objects (not counted yet) of gadgets.example.org",
			"delete its 3 related cop(ies)",
			"set spec.deletionProtection to false to let the deletion proceed (a Terminating ClusterBinding cannot be revived)",
		}},
		{"Orphan keeps the copies", "Binding", kbindv1alpha1.DeletionPolicyOrphan, "", []string{
			"deletionPolicy Orphan: their provider copies are kept", "a Terminating Binding cannot be revived",
		}},
		{"a failed reconcile is said too", "Binding", "", "reconciling failed, retrying with backoff: boom", []string{
			"reconciling failed, retrying with backoff: boom; set spec.deletionProtection to false",
		}},
	}
	for _, tc := range cases {
		got := heldMessage(tc.kind, []string{"widgets.example.org", "gadgets.example.org"}, status, tc.policy, tc.failed)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q\nlacks %q", tc.name, got, w)
			}
		}
	}
	if got := heldMessage("Binding", nil, &kbindv1alpha1.BindingStatus{}, "", ""); strings.Contains(got, "would") {
		t.Errorf("a binding that lists nothing: %q", got)
	}
	// An API listed but not bound now (its Connection not usable): its
	// objects are not counted, and their drain is still said.
	want := "its deletion would release the objects of widgets.example.org (not counted now; deletionPolicy Delete: their provider copies are deleted)"
	if got := heldMessage("ClusterBinding", []string{"widgets.example.org"}, &kbindv1alpha1.BindingStatus{}, "", ""); !strings.Contains(got, want) {
		t.Errorf("an API listed, not bound: %q\nlacks %q", got, want)
	}
}
