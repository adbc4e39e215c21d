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

package ownership

import (
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestClassifyAndDecide(t *testing.T) {
	const cluster, object = "c1", "o1"
	marks := func(c, o string) map[string]string {
		m := map[string]string{}
		if c != "" {
			m[kbindv1alpha1.ConsumerClusterUIDAnnotation] = c
		}
		if o != "" {
			m[kbindv1alpha1.ConsumerObjectUIDAnnotation] = o
		}
		return m
	}
	cases := []struct {
		name      string
		exists    bool
		ann       map[string]string
		policy    kbindv1alpha1.ConflictPolicy
		ownership Ownership
		write     bool
		adopt     bool
		conflict  kbindv1alpha1.Reason
	}{
		{"absent", false, nil, kbindv1alpha1.ConflictPolicyFail, Absent, true, false, ""},
		{"ours", true, marks(cluster, object), kbindv1alpha1.ConflictPolicyFail, Ours, true, false, ""},
		{"unmarked, Fail", true, map[string]string{"other": "x"}, kbindv1alpha1.ConflictPolicyFail, Unmarked, false, false, kbindv1alpha1.ReasonForeignObjectExists},
		{"unmarked, Adopt", true, nil, kbindv1alpha1.ConflictPolicyAdopt, Unmarked, true, true, ""},
		{"another cluster", true, marks("c2", object), kbindv1alpha1.ConflictPolicyFail, Another, false, false, kbindv1alpha1.ReasonOwnedByAnother},
		{"another cluster, Adopt", true, marks("c2", object), kbindv1alpha1.ConflictPolicyAdopt, Another, false, false, kbindv1alpha1.ReasonOwnedByAnother},
		{"another object (recreated consumer object)", true, marks(cluster, "o0"), kbindv1alpha1.ConflictPolicyAdopt, Another, false, false, kbindv1alpha1.ReasonOwnedByAnother},
		{"partial: cluster only", true, marks(cluster, ""), kbindv1alpha1.ConflictPolicyAdopt, Another, false, false, kbindv1alpha1.ReasonOwnedByAnother},
		{"partial: object only", true, marks("", object), kbindv1alpha1.ConflictPolicyAdopt, Another, false, false, kbindv1alpha1.ReasonOwnedByAnother},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Classify(tc.exists, tc.ann, cluster, object)
			if o != tc.ownership {
				t.Fatalf("Classify = %s, want %s", o, tc.ownership)
			}
			v := Decide(o, tc.policy)
			if v.Write != tc.write || v.Adopt != tc.adopt || v.Conflict != tc.conflict {
				t.Errorf("Decide = %+v", v)
			}
		})
	}
}

func TestNamespaceOwnership(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        kbindv1alpha1.Reason
	}{
		{"created by kbind for this cluster", map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: "c"}, ""},
		{"nobody's marker", nil, kbindv1alpha1.ReasonForeignObjectExists},
		{"other annotations only", map[string]string{"team": "x"}, kbindv1alpha1.ReasonForeignObjectExists},
		{"another consumer cluster", map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: "d"}, kbindv1alpha1.ReasonOwnedByAnother},
		{"an empty marker", map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: ""}, kbindv1alpha1.ReasonOwnedByAnother},
	}
	for _, tc := range cases {
		if got := Namespace(tc.annotations, "c"); got != tc.want {
			t.Errorf("%s: namespaceOwnership = %q, want %q", tc.name, got, tc.want)
		}
	}
}
