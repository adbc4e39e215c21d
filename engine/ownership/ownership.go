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

// Package ownership decides whose a provider object is (SYNC-4): kbind's
// for this consumer cluster and object, nobody's, or someone else's — and
// what the binding's conflict policy then allows. kbind writes and deletes
// only what this package calls Ours (or adopts under the Adopt policy).
package ownership

import (
	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Ownership is how a provider object relates to a consumer object of the
// same name (SYNC-4).
type Ownership string

const (
	// Absent means there is no provider object.
	Absent Ownership = "Absent"
	// Ours means both markers equal this consumer cluster and object.
	Ours Ownership = "Ours"
	// Unmarked means the provider object carries no ownership markers.
	Unmarked Ownership = "Unmarked"
	// Another means partial markers, another cluster or another object.
	Another Ownership = "Another"
)

// Classify decides the ownership of a provider object from its annotations
// (nil when it does not exist). Empty markers, or an unknown (empty) UID on
// kbind's side, never make an object Ours: kbind writes and deletes only
// what carries both of its non-empty UIDs.
func Classify(exists bool, annotations map[string]string, clusterUID, objectUID string) Ownership {
	if !exists {
		return Absent
	}
	cluster, hasCluster := annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation]
	object, hasObject := annotations[kbindv1alpha1.ConsumerObjectUIDAnnotation]
	switch {
	case !hasCluster && !hasObject:
		return Unmarked
	case clusterUID != "" && objectUID != "" && cluster == clusterUID && object == objectUID:
		return Ours
	default:
		return Another
	}
}

// Verdict is what to do with a consumer object given the ownership of its
// provider target and the binding's conflict policy.
type Verdict struct {
	// Write is true when kbind may (create or) apply the provider copy.
	Write bool
	// Adopt is true when the copy is taken over (markers stamped).
	Adopt bool
	// Conflict is the conflict reason, "" when there is none.
	Conflict kbindv1alpha1.Reason
}

// Decide applies the conflict policy to an ownership: unmarked objects are
// adopted only under Adopt; objects marked by anyone else are never taken.
func Decide(o Ownership, policy kbindv1alpha1.ConflictPolicy) Verdict {
	switch o {
	case Absent, Ours:
		return Verdict{Write: true}
	case Unmarked:
		if policy == kbindv1alpha1.ConflictPolicyAdopt {
			return Verdict{Write: true, Adopt: true}
		}
		return Verdict{Conflict: kbindv1alpha1.ReasonForeignObjectExists}
	default:
		return Verdict{Conflict: kbindv1alpha1.ReasonOwnedByAnother}
	}
}

// Namespace is the conflict an existing isolated provider
// namespace means for this consumer cluster: none when kbind created it for
// this cluster, ForeignObjectExists when nobody marked it, OwnedByAnother
// when another consumer cluster did.
func Namespace(annotations map[string]string, clusterUID string) kbindv1alpha1.Reason {
	owner, marked := annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation]
	switch {
	case !marked:
		return kbindv1alpha1.ReasonForeignObjectExists
	case owner == "" || owner != clusterUID:
		return kbindv1alpha1.ReasonOwnedByAnother
	default:
		return ""
	}
}
