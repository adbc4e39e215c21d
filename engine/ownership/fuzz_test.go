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

// FuzzOwnership classifies provider objects with arbitrary ownership
// annotations (present, absent, empty, someone else's) against arbitrary
// UIDs, and checks what a write or delete rests on: only an object carrying
// exactly this cluster's and this object's non-empty UIDs is Ours; an
// unmarked object is adopted only under Adopt; anything marked by someone
// else is never written.
func FuzzOwnership(f *testing.F) {
	f.Add(true, true, "c1", true, "o1", "c1", "o1", false)
	f.Add(true, true, "", true, "", "", "", false)
	f.Add(true, true, "c1", false, "", "c1", "o1", true)
	f.Add(true, false, "", false, "", "c1", "o1", true)
	f.Add(false, true, "c1", true, "o1", "c1", "o1", false)
	f.Add(true, true, "c2", true, "o1", "c1", "o1", true)
	f.Fuzz(func(t *testing.T, exists, hasCluster bool, cluster string, hasObject bool, object, clusterUID, objectUID string, adopt bool) {
		ann := map[string]string{"unrelated": "x"}
		if hasCluster {
			ann[kbindv1alpha1.ConsumerClusterUIDAnnotation] = cluster
		}
		if hasObject {
			ann[kbindv1alpha1.ConsumerObjectUIDAnnotation] = object
		}
		o := Classify(exists, ann, clusterUID, objectUID)
		switch {
		case !exists:
			if o != Absent {
				t.Fatalf("a missing object is %s", o)
			}
		case o == Ours:
			if !hasCluster || !hasObject || cluster != clusterUID || object != objectUID || clusterUID == "" || objectUID == "" {
				t.Fatalf("Ours with markers %q/%q (present %v/%v) for %q/%q", cluster, object, hasCluster, hasObject, clusterUID, objectUID)
			}
		case o == Unmarked:
			if hasCluster || hasObject {
				t.Fatalf("Unmarked with a marker present")
			}
		case o != Another:
			t.Fatalf("unknown ownership %q", o)
		}
		policy := kbindv1alpha1.ConflictPolicyFail
		if adopt {
			policy = kbindv1alpha1.ConflictPolicyAdopt
		}
		v := Decide(o, policy)
		if v.Write == (v.Conflict != "") {
			t.Fatalf("Decide(%s, %s) = %+v: a write exactly when there is no conflict", o, policy, v)
		}
		if v.Write && o == Another {
			t.Fatalf("writes an object owned by another: %+v", v)
		}
		if v.Adopt != (o == Unmarked && adopt) {
			t.Fatalf("Decide(%s, %s) adopts %v", o, policy, v.Adopt)
		}
		if r := Namespace(ann, clusterUID); r == "" && (!hasCluster || cluster == "" || cluster != clusterUID) {
			t.Fatalf("namespace marked %q (present %v) taken as this cluster's %q", cluster, hasCluster, clusterUID)
		}
	})
}
