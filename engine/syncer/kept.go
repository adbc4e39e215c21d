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
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// KeptBy is the core.kbind.io/kept-by value naming binding b on the
// provider copies its deletion protection keeps (BIND-5):
// "ClusterBinding/<name>" or "Binding/<namespace>/<name>".
func KeptBy(b kbindv1alpha1.BindingObject) string {
	if b.BindingKind() == "ClusterBinding" {
		return "ClusterBinding/" + b.GetName()
	}
	return "Binding/" + b.GetNamespace() + "/" + b.GetName()
}

// KeptByProtection is the KeptBy value of binding b while its deletion
// protection keeps the provider copies it stops syncing (BIND-5):
// spec.deletionProtection is true and b is not being deleted. It is ""
// otherwise — unprotected, or being deleted (protection off, or a Binding
// whose namespace is being deleted): the copies are released under the
// deletion policy as before.
func KeptByProtection(b kbindv1alpha1.BindingObject) string {
	if !b.BindingSpec().DeletionProtection || !b.GetDeletionTimestamp().IsZero() {
		return ""
	}
	return KeptBy(b)
}

// keptFor reports whether the provider copy pobj carries deletion
// protection's keep for the binding keptBy: the label
// core.kbind.io/kept: DeletionProtection and the kept-by annotation naming
// that binding.
func keptFor(pobj *unstructured.Unstructured, keptBy string) bool {
	return pobj.GetLabels()[kbindv1alpha1.KeptLabel] == kbindv1alpha1.KeptDeletionProtection &&
		pobj.GetAnnotations()[kbindv1alpha1.KeptByAnnotation] == keptBy
}

// keepPatch is the JSON merge patch that marks the provider copy pobj kept
// by the deletion protection of binding keptBy: the kept label and the
// kept-by annotation, on exactly that copy (its UID: a replaced copy is
// refused, not patched). kbind's markers are left as they are, so the
// copy is the object's own again once it is selected again.
func keepPatch(pobj *unstructured.Unstructured, keptBy string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         string(pobj.GetUID()),
		"labels":      map[string]any{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection},
		"annotations": map[string]any{kbindv1alpha1.KeptByAnnotation: keptBy},
	}})
}

// releaseAction is what releaser.release does with an object it releases
// (decideRelease).
type releaseAction int

const (
	// stepRelease removes the finalizer: nothing of kbind's to delete or
	// keep (no copy, a foreign one, or one already kept under Orphan).
	stepRelease releaseAction = iota
	// stepUnknownPolicy keeps the object and its copy: its annotation
	// names no deletion policy.
	stepUnknownPolicy
	// stepDelete deletes the owned copy; the finalizer goes once it is
	// gone.
	stepDelete
	// stepKeepOrphan labels the owned copy core.kbind.io/kept: Orphan
	// first.
	stepKeepOrphan
	// stepKeepProtected labels and annotates the owned copy kept by the
	// binding's deletion protection first (keepPatch).
	stepKeepProtected
	// stepReleaseProtected removes the finalizer of an object whose owned
	// copy carries the binding's keep already, and says so (CopiesKept).
	stepReleaseProtected
)

// decideRelease decides the release of a consumer object (releaser.release):
// owned is whether its provider copy exists and is ownership.Ours; deleting
// whether the object itself is being deleted; policy and known its deletion
// policy (deletionPolicyOf); keptBy the binding whose deletion protection
// keeps the copies it stops syncing (KeptByProtection: "" for none); kept
// whether the copy carries that binding's keep already (keptFor), keptOrphan
// whether it carries the Orphan label. Deletion protection wins over every
// deletion policy, a typo included, for an object that is not being deleted
// itself (BIND-5: deselected, or its API drained out of a live protected
// binding); the object's own deletion follows its policy as always.
func decideRelease(owned, deleting bool, policy kbindv1alpha1.DeletionPolicy, known bool, keptBy string, kept, keptOrphan bool) releaseAction {
	switch {
	case !owned:
		return stepRelease
	case keptBy != "" && !deleting && kept:
		return stepReleaseProtected
	case keptBy != "" && !deleting:
		return stepKeepProtected
	case !known:
		return stepUnknownPolicy
	case policy != kbindv1alpha1.DeletionPolicyOrphan:
		return stepDelete
	case !keptOrphan:
		return stepKeepOrphan
	default:
		return stepRelease
	}
}
