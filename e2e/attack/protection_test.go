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
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var gadgetsGVR = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "gadgets"}

// TestDeletionProtectionAttacks: on a consumer whose konnector runs as the
// chart installs it (the deletion-protection policy on, by default), a
// user who may delete kbind's objects and the kubeconfig Secrets — a
// careless operator, a GitOps prune, a script — tries to delete a
// protected ClusterBinding, Binding, Connection and labelled kubeconfig
// Secret: plainly, with another propagation policy, with --dry-run=none,
// through `kubectl replace --force`, and by a DeleteCollection (which the
// API server admits object by object). Each is refused with what would go
// and the way forward, nothing is drained and nothing is left Terminating;
// turning protection off is an ordinary update. Each result is a row of
// docs/isolation.md's deletion-protection table.
func TestDeletionProtectionAttacks(t *testing.T) {
	t.Parallel() // its own pair and konnector
	ctx := context.Background()
	crd := func(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return enginetest.CRD(plural, strings.ToLower(kind), kind, "example.org", apiextensionsv1.NamespaceScoped, true)
	}
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		crd("widgets", "Widget"), crd("gadgets", "Gadget"), crd("sprockets", "Sprocket")}})
	w := &consumerWorld{t: t, pair: pair, consumer: pair.Consumer.KubeconfigPath,
		admin: dynamic.NewForConfigOrDie(pair.Consumer.Config), provider: dynamic.NewForConfigOrDie(pair.Provider.Config)}
	var rows []string
	row := func(attempt, result string) { rows = append(rows, fmt.Sprintf("| %s | %s |", attempt, result)) }

	for _, ns := range []string{"kbind", "team-x"} {
		w.mustKubectl(w.consumer, "create", "namespace", ns)
	}
	w.mustKubectl(w.consumer, "label", "namespace", "team-x", "tenant=team")
	out, errOut, err := plugin(pair.Provider.KubeconfigPath, "grant", "team", "--apis", "widgets.example.org,gadgets.example.org,sprockets.example.org")
	if err != nil {
		t.Fatalf("grant team: %v\n%s", err, errOut)
	}
	// The bundle as grant prints it for production: the Connection and
	// its ClusterBinding protected, the kubeconfig Secret labelled; a
	// namespace's protected Binding; an unprotected ClusterBinding beside
	// them.
	if err := w.apply(w.consumer, enginetest.ConnectionManifestWith("team", "team-kubeconfig", bundleKubeconfig(t, out),
		connectionSpec("{mode: Namespace, namespace: kbind-team}", "{from: Selector, selector: {matchLabels: {tenant: team}}}")+"  deletionProtection: true\n")+`
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: widgets}
spec:
  connectionRef: {name: team}
  apis: [{name: widgets.example.org}]
  deletionProtection: true
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: sprockets}
spec:
  connectionRef: {name: team}
  apis: [{name: sprockets.example.org}]
---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: gadgets, namespace: team-x}
spec:
  connectionRef: {name: team}
  apis: [{name: gadgets.example.org}]
  deletionProtection: true
`); err != nil {
		t.Fatal(err)
	}
	w.mustKubectl(w.consumer, "label", "secret", "team-kubeconfig", "-n", "kbind", "core.kbind.io/deletion-protection=true", "bundle=team")
	// A Secret of the same bundle label, not protected.
	w.mustKubectl(w.consumer, "create", "secret", "generic", "team-notes", "-n", "kbind", "--from-literal=k=v")
	w.mustKubectl(w.consumer, "label", "secret", "team-notes", "-n", "kbind", "bundle=team")
	startKonnector(t, installKonnectorChart(t, pair, map[string]any{}), "--binding-resync", bindingResync.String())
	w.mustKubectl(w.consumer, "wait", "--for=condition=Ready", "connection/team", "clusterbinding/widgets", "clusterbinding/sprockets", "bindings.core.kbind.io/gadgets", "-n", "team-x", "--timeout=90s")
	w.mustKubectl(w.consumer, "apply", "-f", writeManifest(t, `apiVersion: example.org/v1alpha1
kind: Widget
metadata: {name: w1, namespace: team-x}
spec: {size: 1}
---
apiVersion: example.org/v1alpha1
kind: Widget
metadata: {name: w2, namespace: team-x}
spec: {size: 2}
---
apiVersion: example.org/v1alpha1
kind: Gadget
metadata: {name: g1, namespace: team-x}
spec: {size: 1}
`))
	copies := func() error {
		for _, c := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{widgets, "team-x.w1"}, {widgets, "team-x.w2"}, {gadgetsGVR, "team-x.g1"}} {
			if _, err := resource(w.provider, c.gvr, "kbind-team").Get(ctx, c.name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	enginetest.EventuallyWithin(t, 2*bindingResync, "the Widgets and the Gadget on the provider", copies)
	enginetest.EventuallyWithin(t, 2*bindingResync, "the ClusterBinding's counts", func() error {
		got, _ := w.kubectl(w.consumer, "get", "clusterbinding", "widgets", "-o", "jsonpath={.status.boundAPIs[0].instances.total} {.status.boundAPIs[0].instances.synced}")
		if got != "2 2" {
			return fmt.Errorf("total and synced %q", got)
		}
		return nil
	})

	// ops may delete every kbind object and the kubeconfig Secrets: RBAC
	// lets it, the chart's policy does not.
	ops := w.userWith("ops", "kbind", `- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, update, patch, delete, deletecollection]
`)
	if err := w.apply(w.consumer, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ops-kbind}
rules:
- {apiGroups: [core.kbind.io], resources: [connections, clusterbindings, bindings], verbs: [get, list, watch, create, update, patch, delete, deletecollection]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ops-kbind}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ops-kbind}
subjects: [{kind: User, name: ops, apiGroup: rbac.authorization.k8s.io}]
`); err != nil {
		t.Fatal(err)
	}
	refusal := func(what string, args []string, fragments ...string) string {
		t.Helper()
		out, err := w.kubectl(ops, args...)
		if err == nil {
			t.Errorf("ATTACK SUCCEEDED: %s: kubectl %s: %s", what, strings.Join(args, " "), out)
			return "allowed"
		}
		for _, f := range fragments {
			if !strings.Contains(out, f) {
				t.Errorf("%s: kubectl's error lacks %q:\n%s", what, f, out)
			}
		}
		t.Logf("%s: %s", what, out)
		return out
	}
	const (
		cbMessage   = "ClusterBinding widgets has deletionProtection: true. Deleting it deletes the provider copies (deletionPolicy Delete) of widgets.example.org: 2 objects, 2 synced"
		bMessage    = "Binding team-x/gadgets has deletionProtection: true. Deleting it deletes the provider copies (deletionPolicy Delete) of gadgets.example.org: 1 objects, 1 synced"
		connMessage = "Connection team has deletionProtection: true. Delete its bindings first"
		secMessage  = "Secret kbind/team-kubeconfig is protected (label core.kbind.io/deletion-protection=true)"
	)
	unprotect := `--type=merge -p '{"spec":{"deletionProtection":false}}'`

	refusal("delete the ClusterBinding", []string{"delete", "clusterbindings.core.kbind.io", "widgets"}, cbMessage,
		"kubectl kbind unbind widgets", "kubectl patch clusterbindings.core.kbind.io widgets "+unprotect, "spec.deletionPolicy: Orphan")
	refusal("delete the Binding", []string{"delete", "bindings.core.kbind.io", "gadgets", "-n", "team-x"}, bMessage,
		"kubectl kbind unbind gadgets -n team-x", "kubectl patch bindings.core.kbind.io gadgets -n team-x "+unprotect)
	refusal("delete the Connection", []string{"delete", "connections.core.kbind.io", "team"}, connMessage,
		"kubectl patch connections.core.kbind.io team "+unprotect)
	refusal("delete the kubeconfig Secret", []string{"delete", "secret", "team-kubeconfig", "-n", "kbind"}, secMessage,
		"kubectl label secret team-kubeconfig -n kbind core.kbind.io/deletion-protection-")
	row("`kubectl delete` of a protected ClusterBinding, Binding and Connection, and of the kubeconfig Secret labelled `core.kbind.io/deletion-protection=true`, by a user RBAC lets delete them",
		"refused (admission policy): … ClusterBinding widgets has deletionProtection: true. Deleting it deletes the provider copies (deletionPolicy Delete) of widgets.example.org: 2 objects, 2 synced … To delete it: kubectl kbind unbind widgets …, or turn protection off … To keep the provider copies, set spec.deletionPolicy: Orphan first …; the Binding's, the Connection's (delete its bindings first) and the Secret's (delete the Connection first, then remove the label) likewise")

	for _, cascade := range []string{"orphan", "foreground", "background"} {
		refusal("delete --cascade="+cascade, []string{"delete", "clusterbindings.core.kbind.io", "widgets", "--cascade=" + cascade}, cbMessage)
		refusal("delete --cascade="+cascade, []string{"delete", "bindings.core.kbind.io", "gadgets", "-n", "team-x", "--cascade=" + cascade}, bMessage)
	}
	refusal("delete --dry-run=none", []string{"delete", "clusterbindings.core.kbind.io", "widgets", "--dry-run=none"}, cbMessage)
	refusal("delete --dry-run=server", []string{"delete", "connections.core.kbind.io", "team", "--dry-run=server"}, connMessage)
	refusal("delete --grace-period=0 --force", []string{"delete", "secret", "team-kubeconfig", "-n", "kbind", "--grace-period=0", "--force"}, secMessage)
	row("the same with another propagation policy (`--cascade=orphan`, `foreground`, `background`), `--dry-run=none`, `--grace-period=0 --force`",
		"refused (admission policy), with the same message: the policy checks every DELETE of the object, whatever its options")

	replaced := writeManifest(t, "apiVersion: core.kbind.io/v1alpha1\nkind: ClusterBinding\nmetadata: {name: widgets}\nspec:\n  connectionRef: {name: team}\n  apis: [{name: widgets.example.org}]\n")
	refusal("replace --force", []string{"replace", "--force", "-f", replaced}, cbMessage)
	row("`kubectl replace --force` of the protected ClusterBinding with an unprotected one (a delete, then a create)", "refused (admission policy) at the delete; nothing replaced")

	// A DeleteCollection: the API server runs admission for each object
	// it deletes, in name order (one worker, its default), and stops at
	// the first refusal: sprockets (before widgets) goes, team-notes
	// (after team-kubeconfig) stays.
	refusal("DeleteCollection of ClusterBindings", []string{"delete", "--raw", "/apis/core.kbind.io/v1alpha1/clusterbindings"}, cbMessage)
	refusal("DeleteCollection of Bindings", []string{"delete", "--raw", "/apis/core.kbind.io/v1alpha1/namespaces/team-x/bindings"}, bMessage)
	refusal("DeleteCollection of Connections", []string{"delete", "--raw", "/apis/core.kbind.io/v1alpha1/connections"}, connMessage)
	refusal("DeleteCollection of Secrets", []string{"delete", "--raw", "/api/v1/namespaces/kbind/secrets?labelSelector=bundle%3Dteam"}, secMessage)
	enginetest.EventuallyWithin(t, 2*bindingResync, "the unprotected ClusterBinding listed before the protected one deleted", func() error {
		if out, err := w.kubectl(w.consumer, "get", "clusterbindings.core.kbind.io", "sprockets"); err == nil {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if _, err := w.kubectl(w.consumer, "get", "secret", "team-notes", "-n", "kbind"); err != nil {
		t.Errorf("the unprotected Secret listed after the protected one: %v", err)
	}
	row("a DeleteCollection (`kubectl delete --raw` on the collection) of ClusterBindings, of a namespace's Bindings, of Connections, and of the kbind namespace's Secrets by a label the protected one carries",
		"refused (admission policy) for each protected object, checked one by one like a DELETE: the API server deletes in name order and stops at the first refusal (the unprotected ClusterBinding `sprockets`, listed before `widgets`, deleted; the unprotected Secret `team-notes`, after `team-kubeconfig`, kept)")

	// Nothing was drained, nothing is Terminating.
	if err := copies(); err != nil {
		t.Errorf("a provider copy went: %v", err)
	}
	for _, args := range [][]string{
		{"clusterbindings.core.kbind.io", "widgets"}, {"bindings.core.kbind.io", "gadgets", "-n", "team-x"},
		{"connections.core.kbind.io", "team"}, {"secret", "team-kubeconfig", "-n", "kbind"}, {"crd", "widgets.example.org"}, {"crd", "gadgets.example.org"},
	} {
		got, err := w.kubectl(w.consumer, append(append([]string{"get"}, args...), "-o", "jsonpath={.metadata.deletionTimestamp}")...)
		if err != nil || got != "" {
			t.Errorf("%s after the attempts: %v, deletionTimestamp %q", strings.Join(args, " "), err, got)
		}
	}
	w.waitCondition("clusterbindings.core.kbind.io", "", "widgets", "Ready", "True")
	w.waitCondition("bindings.core.kbind.io", "team-x", "gadgets", "Ready", "True")
	w.waitCondition("connections.core.kbind.io", "", "team", "Ready", "True")
	row("what the attempts above left", "every protected object in place and none Terminating; the Widgets' and the Gadget's provider copies and the consumer CRDs kept; the bindings and the Connection `Ready=True`")

	// Turning protection off is an ordinary update (the API server audits
	// it like any other): protection guards against accidents, not against
	// a user who may update the object.
	w.mustKubectl(ops, "patch", "bindings.core.kbind.io", "gadgets", "-n", "team-x", "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`)
	w.mustKubectl(ops, "delete", "bindings.core.kbind.io", "gadgets", "-n", "team-x", "--timeout=60s")
	w.absentOnProvider("the unprotected Binding's deletion", gadgetsGVR, "kbind-team", "team-x.g1")
	w.mustKubectl(ops, "label", "secret", "team-kubeconfig", "-n", "kbind", "core.kbind.io/deletion-protection-")
	if out, err := w.kubectl(ops, "delete", "secret", "team-kubeconfig", "-n", "kbind", "--dry-run=server"); err != nil {
		t.Errorf("the Secret's delete after its label went: %v\n%s", err, out)
	}
	row("`kubectl patch … deletionProtection:false` on the Binding, then delete it; remove the Secret's label, then delete it",
		"allowed: an ordinary update, recorded by the API server's audit log like any other, after which the delete proceeds (the Binding drains its copies); protection guards against deleting by accident, not against a user who may update the object")

	table := "| attempt | result |\n|---|---|\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("deletion-protection table:\n%s", table)
	checkDocs(t, "deletion-protection-attacks", table)
}
