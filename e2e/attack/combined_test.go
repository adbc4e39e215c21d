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

package attack

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kbind/kbind/engine/test/enginetest"
)

// Attacks on features in combination (issue #51): each is played in the
// consumer world of TestConsumerAttacks (its konnector runs with the
// chart's RBAC and the imported-objects policy) and returns its rows of
// the consumer table.

var (
	grabs  = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "grabs"}
	vaults = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "vaults"}
)

// importNamesASecret: a ClusterBinding imports the provider's Grabs
// (Namespace isolation, kbind-team) and copies up, by reference, the
// Secret each Grab names. The provider-side tenant — the grant's
// kubeconfig, tn — creates an unmarked Grab at the place of team-y that
// names team-y's Secret payroll-db, which nobody in team-y ever
// referenced. The Grab is imported; the Secret must never reach the
// provider, where tn could read it. A Grab a team-x user makes names its
// own Secret, which goes up (the positive control, and proof that the
// entry read its owners after the import).
func importNamesASecret(w *consumerWorld, tn *tenant, alice string) []string {
	t, ctx := w.t, context.Background()
	if err := w.apply(w.consumer, `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: grabs}
spec:
  connectionRef: {name: team}
  apis: [{name: grabs.example.org, providerObjects: Import}]
  relatedResources:
  - {resource: secrets, direction: FromConsumer, reference: {api: grabs.example.org, fieldPath: .spec.passwordSecretRef.name}}
`); err != nil {
		t.Fatal(err)
	}
	w.waitCondition("clusterbindings.core.kbind.io", "", "grabs", "Synced", "True")
	w.mustKubectl(w.consumer, "create", "secret", "generic", "payroll-db", "-n", "team-y", "--from-literal=password=hunter2")
	w.mustKubectl(alice, "create", "secret", "generic", "mine-db", "-n", "team-x", "--from-literal=password=mine")

	grab := object(grabs, "kbind-team", "team-y.grab", nil, map[string]any{"spec": map[string]any{"passwordSecretRef": map[string]any{"name": "payroll-db"}}})
	grab.SetKind("Grab")
	create(t, tn, grabs, grab)
	enginetest.EventuallyWithin(t, 60*time.Second, "the tenant's Grab imported into team-y", func() error {
		out, err := w.kubectl(w.consumer, "get", "grabs.example.org", "-n", "team-y", "grab", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/owner}`)
		if err != nil || out != "provider" {
			return fmt.Errorf("owner %q: %v", out, err)
		}
		return nil
	})
	if err := w.apply(alice, "apiVersion: example.org/v1alpha1\nkind: Grab\nmetadata: {name: mine, namespace: team-x}\nspec: {passwordSecretRef: {name: mine-db}}\n"); err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyWithin(t, 60*time.Second, "team-x's own Grab's Secret copied up", func() error {
		_, err := resource(w.provider, secrets, "kbind-team").Get(ctx, "team-x.mine-db", metav1.GetOptions{})
		return err
	})
	// As the attacker would look for it, with the grant's kubeconfig.
	if _, err := resource(tn.dyn, secrets, "kbind-team").Get(ctx, "team-y.payroll-db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ATTACK SUCCEEDED: the provider tenant reads team-y's Secret payroll-db, named by an object it imported: %v", err)
	}
	denied := w.waitCondition("clusterbindings.core.kbind.io", "", "grabs", "PermissionDenied", "True")
	expect(t, denied, "kbind refuses", "imported grabs.example.org object(s)", "team-y/grab")
	return []string{tableRow("a provider tenant creates an unmarked object the import brings into `team-y`, naming in a referenced field a Secret of `team-y` nobody referenced (`providerObjects: Import` + a `FromConsumer` reference entry)",
		"not copied: imported objects own no `FromConsumer` related objects; `PermissionDenied=True` (kbind refuses: … 1 imported grabs.example.org object(s) …: team-y/grab); a Grab made in `team-x` has its Secret copied")}
}

// releaseByUpdater: a ClusterBinding imports the provider's Vaults that
// carry sync=yes (objectSelector) and does not copy that label up. dave,
// who may update but not delete Vaults in team-x, asks for the release of
// a colleague's Vault — which would make it an imported object the import
// no longer selects, and so delete it. The imported-objects policy
// refuses him; alice, who may delete it, asks the same: the konnector
// refuses the release the import would undo, and the Vault and its
// provider copy stay.
func releaseByUpdater(w *consumerWorld, alice string) []string {
	t, ctx := w.t, context.Background()
	if err := w.apply(w.consumer, `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: vaults}
spec:
  connectionRef: {name: team}
  apis: [{name: vaults.example.org, providerObjects: Import, objectSelector: {matchLabels: {sync: "yes"}}}]
`); err != nil {
		t.Fatal(err)
	}
	w.waitCondition("clusterbindings.core.kbind.io", "", "vaults", "Synced", "True")
	dave := w.updater("dave", "team-x")
	if err := w.apply(alice, "apiVersion: example.org/v1alpha1\nkind: Vault\nmetadata: {name: db, namespace: team-x, labels: {sync: \"yes\"}}\nspec: {size: 1}\n"); err != nil {
		t.Fatal(err)
	}
	var uid string
	enginetest.EventuallyWithin(t, 60*time.Second, "the Vault's provider copy", func() error {
		u, err := resource(w.provider, vaults, "kbind-team").Get(ctx, "team-x.db", metav1.GetOptions{})
		if err == nil {
			uid = string(u.GetUID())
		}
		return err
	})
	var rows []string
	out, err := w.kubectl(dave, "annotate", "vaults.example.org", "-n", "team-x", "db", "core.kbind.io/hand-over=provider")
	if err == nil {
		t.Errorf("ATTACK SUCCEEDED: dave, who may not delete Vaults, asked for a release: %s", out)
	} else {
		expect(t, err.Error(), "ValidatingAdmissionPolicy", "only a user who may delete it may ask for that")
		rows = append(rows, tableRow("a user who may update but not delete objects asks for the release (`core.kbind.io/hand-over: provider`) of a colleague's object (konnector chart, `importedObjects.admissionPolicy: true`)",
			"refused (admission policy): … only a user who may delete it may ask for that"))
	}
	w.mustKubectl(alice, "annotate", "vaults.example.org", "-n", "team-x", "db", "core.kbind.io/hand-over=provider")
	w.waitEvent("team-x", "db", "HandOverRefused", "objectSelector (sync=yes)")
	denied := w.waitCondition("clusterbindings.core.kbind.io", "", "vaults", "PermissionDenied", "True")
	expect(t, denied, "kbind refuses: hand-over of 1 object(s), team-x/db")
	if owner := w.mustKubectl(w.consumer, "get", "vaults.example.org", "-n", "team-x", "db", "-o", `jsonpath={.metadata.finalizers}`); !strings.Contains(owner, "core.kbind.io/syncer") {
		t.Errorf("the Vault is no longer the consumer's after the refused release: finalizers %s", owner)
	}
	if u, err := resource(w.provider, vaults, "kbind-team").Get(ctx, "team-x.db", metav1.GetOptions{}); err != nil || string(u.GetUID()) != uid {
		t.Errorf("the Vault's provider copy after the refused release: %v", err)
	}
	rows = append(rows, tableRow("a release of an object the entry's `objectSelector` would not import back (the selected label not copied up), by a user who may delete it",
		"refused by the konnector: `HandOverRefused` Event naming the selector, `PermissionDenied=True` (kbind refuses: hand-over of 1 object(s) …); the object stays the consumer's, its provider copy stays"))

	// dave adopts (which the policy lets anyone who may update do) an
	// imported Vault that carries sync=yes on the provider only: consumer
	// owned, the objectSelector would not select it, and the ordinary sync
	// would release it at once — deleting the provider's own object.
	prov := object(vaults, "kbind-team", "team-x.prov", map[string]string{"sync": "yes"}, map[string]any{"spec": map[string]any{"size": int64(7)}})
	prov.SetKind("Vault")
	adminCreate(t, w.provider, vaults, prov)
	enginetest.EventuallyWithin(t, 60*time.Second, "the provider's Vault imported into team-x", func() error {
		out, err := w.kubectl(w.consumer, "get", "vaults.example.org", "-n", "team-x", "prov", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/owner}`)
		if err != nil || out != "provider" {
			return fmt.Errorf("owner %q: %v", out, err)
		}
		return nil
	})
	before, err := resource(w.provider, vaults, "kbind-team").Get(ctx, "team-x.prov", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.mustKubectl(dave, "annotate", "vaults.example.org", "-n", "team-x", "prov", "core.kbind.io/hand-over=consumer")
	w.waitEvent("team-x", "prov", "HandOverRefused", "objectSelector (sync=yes) does not select this object")
	if after, err := resource(w.provider, vaults, "kbind-team").Get(ctx, "team-x.prov", metav1.GetOptions{}); err != nil || after.GetUID() != before.GetUID() {
		t.Errorf("ATTACK SUCCEEDED: the provider's Vault after dave's adoption: %v", err)
	}
	return append(rows, tableRow("a user who may update but not delete objects adopts (`core.kbind.io/hand-over: consumer`) an imported object the entry's `objectSelector` selects by a label only its provider object carries",
		"refused by the konnector: `HandOverRefused` Event naming the selector; the object stays imported and the provider's object stays (adopted, it would have left the binding at once and its provider object been deleted)"))
}

// updater provisions a namespace user who may read, create, update and
// patch the bound kinds in namespace ns, but not delete them.
func (w *consumerWorld) updater(name, ns string) string {
	w.t.Helper()
	return w.userWith(name, ns, `- apiGroups: [example.org]
  resources: ["*"]
  verbs: [get, list, watch, create, update, patch]
`)
}

// waitEvent waits for an Event of reason on the consumer object ns/name
// whose message holds fragment.
func (w *consumerWorld) waitEvent(ns, name, reason, fragment string) {
	w.t.Helper()
	enginetest.EventuallyWithin(w.t, 60*time.Second, fmt.Sprintf("a %s Event on %s/%s", reason, ns, name), func() error {
		out, err := w.kubectl(w.consumer, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name+",reason="+reason, "-o", "jsonpath={.items[*].message}")
		if err != nil || !strings.Contains(out, fragment) {
			return fmt.Errorf("events %q: %v", out, err)
		}
		return nil
	})
}

func tableRow(attempt, result string) string { return fmt.Sprintf("| %s | %s |", attempt, result) }

// mutationRewritesReference: erin, who may create Bindings in team-w,
// writes one whose up rule points the field a reference entry maps at
// team-y's related copy (team-y.payroll-db, in the isolation namespace
// every consumer namespace shares under Namespace isolation). Before issue
// #51 the rule ran after kbind mapped the field, so the provider copy of
// team-w's Widget named team-y's Secret copy. The rule is refused.
func mutationRewritesReference(w *consumerWorld) []string {
	t := w.t
	w.mustKubectl(w.consumer, "create", "namespace", "team-w")
	w.mustKubectl(w.consumer, "label", "namespace", "team-w", "tenant=team")
	erin := w.user("erin", "team-w")
	if err := w.apply(erin, `apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: redirect, namespace: team-w}
spec:
  connectionRef: {name: team}
  apis:
  - name: widgets.example.org
    mutations:
      up: [{path: .spec.secretRef.name, expression: "'team-y.payroll-db'"}]
  relatedResources:
  - {resource: secrets, direction: FromConsumer, reference: {api: widgets.example.org, fieldPath: .spec.secretRef.name}}
`); err != nil {
		t.Fatal(err)
	}
	ready := w.waitCondition("bindings.core.kbind.io", "team-w", "redirect", "Ready", "False InvalidMutation")
	expect(t, ready, "mutations.up[0] (.spec.secretRef.name)", "relatedResources[0] reads the related object's name from")
	return []string{tableRow("a Binding whose `up` mutation rewrites the field a reference entry maps, to name another namespace's related copy (`team-y.payroll-db`)",
		"refused: `Ready=False`/`InvalidMutation` (… relatedResources[0] reads the related object's name from …); nothing of the Binding syncs")}
}
