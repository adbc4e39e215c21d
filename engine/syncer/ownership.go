package syncer

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
// (nil when it does not exist).
func Classify(exists bool, annotations map[string]string, clusterUID, objectUID string) Ownership {
	if !exists {
		return Absent
	}
	cluster, hasCluster := annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation]
	object, hasObject := annotations[kbindv1alpha1.ConsumerObjectUIDAnnotation]
	switch {
	case !hasCluster && !hasObject:
		return Unmarked
	case cluster == clusterUID && object == objectUID:
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
