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
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
)

// wellFormed matches "<plural>.<group>": a lower-case DNS label, a dot, a
// DNS subdomain.
var wellFormed = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// describeMissing names an API that is not exported, explaining the
// expected form when the name is not "<plural>.<group>".
func describeMissing(name string) string {
	if wellFormed.MatchString(name) {
		return name
	}
	return fmt.Sprintf("%q (not of the form <plural>.<group>, e.g. widgets.example.org: not a Kind, a version or a URL)", name)
}

// desiredConditions decides Ready, Synced, Conflicts and PermissionDenied.
func desiredConditions(o observation) []patch.Condition {
	var out []patch.Condition
	add := func(t kbindv1alpha1.ConditionType, s metav1.ConditionStatus, r kbindv1alpha1.Reason, msg string) {
		out = append(out, patch.Condition{Type: t, Status: s, Reason: r, Message: msg})
	}
	if o.conflicts > 0 {
		reason := kbindv1alpha1.ReasonForeignObjectExists
		if o.ownedByAnother*2 > o.conflicts {
			reason = kbindv1alpha1.ReasonOwnedByAnother
		}
		add(kbindv1alpha1.ConditionConflicts, metav1.ConditionTrue, reason,
			fmt.Sprintf("%d object(s) skipped: their provider objects belong to someone else and were left untouched; see the core.kbind.io/conflict annotation and Events on the consumer objects", o.conflicts))
	} else {
		add(kbindv1alpha1.ConditionConflicts, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, "0 object(s) skipped")
	}

	if o.notAdmitted != "" {
		// BIND-3: the Binding gets nothing, whatever else is true.
		msg := o.notAdmitted
		if o.connProblem != "" {
			msg += "; " + o.connProblem
		}
		add(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, msg)
		add(kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "nothing is synced: the Connection does not admit this namespace (see Ready)")
		return out
	}
	if o.connProblem != "" {
		add(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, o.connProblem)
		add(kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, o.connProblem)
		return out
	}
	if refused := permissionDenied(o); refused != "" {
		add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden, refused)
	} else {
		add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, "the provider allows the schema reads and instance writes")
	}
	// Informational, never Ready: an API served at fewer versions works at
	// the versions it serves; the condition says which, so that it is never
	// a silent half-working API.
	if len(o.reducedVersions) > 0 {
		add(kbindv1alpha1.ConditionAllVersionsServed, metav1.ConditionFalse, kbindv1alpha1.ReasonConversionWebhook, strings.Join(o.reducedVersions, "; "))
	} else {
		add(kbindv1alpha1.ConditionAllVersionsServed, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "every bound API is served at every version its provider serves")
	}

	var notReady []string
	reason := kbindv1alpha1.ReasonPending
	if len(o.notExported) > 0 {
		names := make([]string, 0, len(o.notExported))
		for _, n := range o.notExported {
			names = append(names, describeMissing(n))
		}
		notReady = append(notReady, fmt.Sprintf("not exported by Connection %q: %s", o.connection, strings.Join(names, ", ")))
		reason = kbindv1alpha1.ReasonAPINotExported
	}
	if len(o.clusterScoped) > 0 {
		notReady = append(notReady, fmt.Sprintf("cluster-scoped, which a namespaced Binding cannot activate (use a ClusterBinding): %s", strings.Join(o.clusterScoped, ", ")))
		reason = kbindv1alpha1.ReasonAPINotExported
	}
	if len(o.unconfinable) > 0 {
		notReady = append(notReady, fmt.Sprintf("cluster-scoped, which Connection %q cannot confine to a namespace under %s (bind it through a Connection with isolation None or Prefixed): %s", o.connection, o.isolation, strings.Join(o.unconfinable, ", ")))
		reason = kbindv1alpha1.ReasonAPINotExported
	}
	if len(o.projection) > 0 {
		notReady = append(notReady, "projection refused: "+strings.Join(o.projection, "; "))
		reason = kbindv1alpha1.ReasonProjectionRefused
	}
	notReady = append(notReady, o.namesTaken...)
	if len(o.importRefused) > 0 {
		notReady = append(notReady, "import refused: "+strings.Join(o.importRefused, "; "))
		reason = kbindv1alpha1.ReasonImportRefused
	}
	if len(o.invalidFilters) > 0 {
		notReady = append(notReady, "a selector does not parse, so nothing of this binding syncs (and nothing is released) until it is fixed: "+strings.Join(o.invalidFilters, "; "))
		reason = kbindv1alpha1.ReasonInvalidFilter
	}
	if len(o.invalidMutations) > 0 {
		notReady = append(notReady, "a mutation rule does not compile, so nothing of this binding syncs (and nothing is released) until it is fixed: "+strings.Join(o.invalidMutations, "; "))
		reason = kbindv1alpha1.ReasonInvalidMutation
	}
	if len(o.overlapped) > 0 {
		notReady = append(notReady, fmt.Sprintf("already covered by a ClusterBinding, which takes precedence: %s", strings.Join(o.overlapped, ", ")))
	}
	if len(o.overlapping) > 0 {
		notReady = append(notReady, "could claim the same objects as an earlier binding through another Connection, so none of them route through this one "+
			"(make the namespaceSelectors or objectSelectors disjoint, or delete one binding): "+strings.Join(o.overlapping, "; "))
		reason = kbindv1alpha1.ReasonOverlappingBinding
	}
	notReady, reason = schemaRefusals(o, notReady, reason)
	if len(o.forbidden) > 0 {
		notReady = append(notReady, "the provider refuses a schema read: "+strings.Join(o.forbidden, "; "))
		if reason == kbindv1alpha1.ReasonPending {
			reason = kbindv1alpha1.ReasonForbidden
		}
	}
	notReady = append(notReady, o.problems...)
	notReady = append(notReady, o.pending...)
	if len(o.unbinding) > 0 {
		notReady = append(notReady, "unbinding APIs no longer listed, waiting for their objects to release the provider copies: "+strings.Join(o.unbinding, ", "))
	}

	installed := len(o.bound) - len(o.unbinding) - len(o.problems) - len(o.pending) - len(o.forbidden) - len(o.incompatible) - len(o.storageSwitch)
	if len(notReady) > 0 {
		add(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, reason, strings.Join(notReady, "; "))
		add(kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
			fmt.Sprintf("%d of %d API(s) installed", max(installed, 0), len(o.bound)-len(o.unbinding)+len(o.notExported)+len(o.clusterScoped)+len(o.unconfinable)+len(o.overlapped)+len(o.overlapping)+len(o.projection)+len(o.namesTaken)+len(o.importRefused)))
		return out
	}
	add(kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, fmt.Sprintf("%d API(s) bound", len(o.bound)))
	if len(o.notSyncing) > 0 {
		add(kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "instance sync is starting for: "+strings.Join(o.notSyncing, ", "))
		return out
	}
	add(kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "every listed API is installed and its syncer runs")
	return out
}

// schemaRefusals appends to notReady the provider schemas kbind refuses —
// incompatible with another Connection's consumer CRD, a storage-version
// switch it will not follow — and returns the reason then.
func schemaRefusals(o observation, notReady []string, reason kbindv1alpha1.Reason) ([]string, kbindv1alpha1.Reason) {
	if len(o.incompatible) > 0 {
		notReady = append(notReady, "the provider's schema is not compatible with the consumer CRD another Connection supplies, so nothing of it syncs through this one: "+
			strings.Join(o.incompatible, "; "))
		reason = kbindv1alpha1.ReasonSchemaIncompatible
	}
	if len(o.storageSwitch) > 0 {
		notReady = append(notReady, "storage-version switch refused: "+strings.Join(o.storageSwitch, "; "))
		reason = kbindv1alpha1.ReasonStorageVersionChange
	}
	return notReady, reason
}

// permissionDenied is the PermissionDenied message: the provider's
// refusals of schema reads and instance writes, then the lists either side
// refuses a syncer (each saying what to grant), then the related entries
// kbind itself refuses (another consumer namespace's objects, watches over
// the budget); "" when nothing is refused.
func permissionDenied(o observation) string {
	var parts []string
	if refused := append(append([]string{}, o.forbidden...), o.instanceForbidden...); len(refused) > 0 {
		parts = append(parts, "the provider refuses: "+strings.Join(refused, "; "))
	}
	parts = append(parts, o.accessRefused...)
	if refused := append(append([]string{}, o.instanceRefused...), o.relatedRefused...); len(refused) > 0 {
		parts = append(parts, "kbind refuses: "+strings.Join(refused, "; "))
	}
	return strings.Join(parts, "; ")
}
