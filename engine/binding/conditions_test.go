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
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
)

func TestDesiredConditions(t *testing.T) {
	bound := []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org"}}
	cases := []struct {
		name string
		obs  observation
		// want is "Type=Status/Reason" joined by spaces, in decision order.
		want string
		// message holds fragments the Ready message must contain.
		message []string
	}{
		{"Connection missing", observation{connection: "p", connProblem: `Connection "p" not found`},
			"Conflicts=False/AsExpected Ready=False/Pending Synced=False/Pending", []string{`Connection "p" not found`}},
		{"namespace not admitted", observation{connection: "p", notAdmitted: `Connection "p" does not admit Bindings in namespace "team-x": …`},
			"Conflicts=False/AsExpected Ready=False/Forbidden Synced=False/Pending", []string{`does not admit Bindings in namespace "team-x"`}},
		{"namespace not admitted, Connection not Ready either", observation{connection: "p", notAdmitted: `Connection "p" does not admit …`, connProblem: "waiting for related copies"},
			"Conflicts=False/AsExpected Ready=False/Forbidden Synced=False/Pending", []string{"does not admit", "waiting for related copies"}},
		{"ready, syncing", observation{bound: bound},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=True/AsExpected", []string{"1 API(s) bound"}},
		{"ready, syncer starting", observation{bound: bound, notSyncing: []string{"widgets.example.org"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=False/Pending", nil},
		{"not exported", observation{connection: "p", notExported: []string{"Widget"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/APINotExported Synced=False/Pending", []string{`"Widget" (not of the form <plural>.<group>`}},
		{"cluster-scoped API in a Binding", observation{clusterScoped: []string{"clusterwidgets.example.org"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/APINotExported Synced=False/Pending", []string{"use a ClusterBinding"}},
		{"covered by a ClusterBinding", observation{overlapped: []string{"widgets.example.org (ClusterBinding all)"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/Pending Synced=False/Pending", []string{"takes precedence"}},
		{"schema read refused", observation{bound: bound, forbidden: []string{"get customresourcedefinitions/widgets.example.org: forbidden"}},
			"Conflicts=False/AsExpected PermissionDenied=True/Forbidden AllVersionsServed=True/AsExpected Ready=False/Forbidden Synced=False/Pending", []string{"the provider refuses a schema read"}},
		{"instance writes refused, still Ready", observation{bound: bound, instanceForbidden: []string{"apply Widget in namespace a: forbidden (3 object(s))"}},
			"Conflicts=False/AsExpected PermissionDenied=True/Forbidden AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=True/AsExpected", nil},
		{"a related entry refused by kbind, still Ready", observation{bound: bound, relatedRefused: []string{"relatedResources[0] needs 24 more related watches, …"}},
			"Conflicts=False/AsExpected PermissionDenied=True/Forbidden AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=True/AsExpected", nil},
		{"a side refuses a syncer its list", observation{bound: bound, notSyncing: []string{"widgets.example.org (last attempt failed: …)"}, accessRefused: []string{"widgets.example.org: the consumer cluster refuses the konnector the list of Widget objects (API group example.org): forbidden; … add \"example.org\" to rbac.boundResourceGroups"}},
			"Conflicts=False/AsExpected PermissionDenied=True/Forbidden AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=False/Pending", nil},
		{"names another CRD of the group holds: not bound, not installed", observation{namesTaken: []string{"the consumer API gizmos.example.org is not installed: … kind Gizmo of the CRD gizmoes.example.org …"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/Pending Synced=False/Pending", []string{"gizmos.example.org is not installed", "gizmoes.example.org"}},
		{"CRD not established", observation{bound: bound, pending: []string{"CRD widgets.example.org is not established yet"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/Pending Synced=False/Pending", []string{"not established"}},
		{"unbinding a removed API", observation{bound: append(bound, kbindv1alpha1.BoundAPI{Name: "gadgets.example.org"}), unbinding: []string{"gadgets.example.org (2 object(s) waiting)"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/Pending Synced=False/Pending", []string{"unbinding APIs no longer listed", "gadgets.example.org (2 object(s) waiting)"}},
		{"storage-version switch refused: not Ready, sync goes on at the old version", observation{bound: bound, storageSwitch: []string{"the provider moved the storage version of widgets.example.org from v1 to v2 and kbind keeps the consumer CRD at v1: …"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=False/StorageVersionChange Synced=False/Pending",
			[]string{"storage-version switch refused", "keeps the consumer CRD at v1"}},
		{"served at fewer versions, still Ready", observation{bound: bound, reducedVersions: []string{"multis.example.org is served at v1 only, not at v1alpha1: the provider converts between its versions with a conversion webhook, which kbind cannot run on the consumer"}},
			"Conflicts=False/AsExpected PermissionDenied=False/AsExpected AllVersionsServed=False/ConversionWebhook Ready=True/AsExpected Synced=True/AsExpected", nil},
		{"conflicts, mostly foreign", observation{bound: bound, conflicts: 3, ownedByAnother: 1},
			"Conflicts=True/ForeignObjectExists PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=True/AsExpected", nil},
		{"conflicts, mostly another consumer's", observation{bound: bound, conflicts: 3, ownedByAnother: 2},
			"Conflicts=True/OwnedByAnother PermissionDenied=False/AsExpected AllVersionsServed=True/AsExpected Ready=True/AsExpected Synced=True/AsExpected", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var ready string
			for _, c := range desiredConditions(tc.obs) {
				got = append(got, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
				if c.Message == "" {
					t.Errorf("%s has no message", c.Type)
				}
				if c.Type == kbindv1alpha1.ConditionReady {
					ready = c.Message
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("conditions\n got %s\nwant %s", strings.Join(got, " "), tc.want)
			}
			for _, f := range tc.message {
				if !strings.Contains(ready, f) {
					t.Errorf("Ready message %q lacks %q", ready, f)
				}
			}
		})
	}
}

// A failed phase changes only Ready, and never shrinks status.boundAPIs
// (what unbinding remembers).
func TestSetStatusAfterAFailedPhase(t *testing.T) {
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 2}}
	cb.Status.BoundAPIs = []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org"}, {Name: "gadgets.example.org"}}
	patch.SetCondition(&cb.Status.Conditions, metav1.Condition{Type: string(kbindv1alpha1.ConditionSynced), Status: metav1.ConditionTrue, Reason: "AsExpected", Message: "ok"}, 1)
	b := access(cb)
	setStatus(b, &observation{bound: []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org"}}}, errors.New("listing bindings: timeout"))
	if len(cb.Status.BoundAPIs) != 2 {
		t.Errorf("boundAPIs shrunk by a failed pass: %+v", cb.Status.BoundAPIs)
	}
	var ready, synced *metav1.Condition
	for i := range cb.Status.Conditions {
		switch cb.Status.Conditions[i].Type {
		case string(kbindv1alpha1.ConditionReady):
			ready = &cb.Status.Conditions[i]
		case string(kbindv1alpha1.ConditionSynced):
			synced = &cb.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "listing bindings: timeout") || ready.ObservedGeneration != 2 {
		t.Errorf("Ready %+v", ready)
	}
	if synced == nil || synced.Status != metav1.ConditionTrue || synced.ObservedGeneration != 1 {
		t.Errorf("a failed pass changed Synced: %+v", synced)
	}

	setStatus(b, &observation{bound: []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org"}}}, nil)
	if len(cb.Status.BoundAPIs) != 1 {
		t.Errorf("a successful pass writes boundAPIs: %+v", cb.Status.BoundAPIs)
	}
}

// A Binding its Connection no longer admits keeps the boundAPIs entries
// of the APIs it still lists (its objects' finalizers belong to them, and
// unbinding reads them), without the counts of a sync that stopped.
func TestNotAdmittedKeepsWhatItBound(t *testing.T) {
	nb := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: "b"}}
	nb.Spec.APIs = []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}, {Name: "gadgets.example.org"}}
	nb.Status.BoundAPIs = []kbindv1alpha1.BoundAPI{
		{Name: "gadgets.example.org", CRDHash: "sha256:g", Instances: &kbindv1alpha1.InstanceCounts{Total: 3}},
		{Name: "removed.example.org", CRDHash: "sha256:r"},
		{Name: "widgets.example.org", CRDHash: "sha256:w", ConflictCount: 1},
	}
	b := access(nb)
	o := &observation{notAdmitted: "not admitted", kept: stillListed(b.spec, nb.Status.DeepCopy()),
		bound: []kbindv1alpha1.BoundAPI{{Name: "removed.example.org", CRDHash: "sha256:r"}}} // still unbinding
	setStatus(b, o, nil)
	want := []kbindv1alpha1.BoundAPI{{Name: "gadgets.example.org", CRDHash: "sha256:g"}, {Name: "removed.example.org", CRDHash: "sha256:r"}, {Name: "widgets.example.org", CRDHash: "sha256:w"}}
	if fmt.Sprint(nb.Status.BoundAPIs) != fmt.Sprint(want) {
		t.Errorf("boundAPIs %+v, want %+v", nb.Status.BoundAPIs, want)
	}
}

func TestPermissionDenied(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  observation
		want string
	}{
		{"nothing refused", observation{}, ""},
		{"the provider refuses", observation{forbidden: []string{"get crd: forbidden"}, instanceForbidden: []string{"apply Widget: forbidden (1 object(s))"}},
			"the provider refuses: get crd: forbidden; apply Widget: forbidden (1 object(s))"},
		{"a syncer's list refused, with what to grant", observation{accessRefused: []string{"widgets.example.org: the consumer cluster refuses …"}},
			"widgets.example.org: the consumer cluster refuses …"},
		{"both", observation{instanceForbidden: []string{"apply Widget: forbidden (1 object(s))"}, accessRefused: []string{"gadgets.example.org: the consumer cluster refuses …"}},
			"the provider refuses: apply Widget: forbidden (1 object(s)); gadgets.example.org: the consumer cluster refuses …"},
		{"kbind refuses related entries", observation{instanceForbidden: []string{"list secrets (provider side)"}, relatedRefused: []string{"relatedResources[0] matches …", "relatedResources[1] needs …"}},
			"the provider refuses: list secrets (provider side); kbind refuses: relatedResources[0] matches …; relatedResources[1] needs …"},
	} {
		if got := permissionDenied(tc.obs); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
