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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var things = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "things"}

// consumerWorld is a consumer cluster with a konnector, three Connections
// and namespace users, next to the provider.
type consumerWorld struct {
	t        *testing.T
	pair     *testenv.Pair
	consumer string // the admin kubeconfig path
	admin    dynamic.Interface
	provider dynamic.Interface
}

func (w *consumerWorld) kubectl(kubeconfig string, args ...string) (string, error) {
	return testenv.Kubectl(context.Background(), kubeconfig, args...)
}

func (w *consumerWorld) mustKubectl(kubeconfig string, args ...string) string {
	w.t.Helper()
	out, err := w.kubectl(kubeconfig, args...)
	if err != nil {
		w.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (w *consumerWorld) apply(kubeconfig, manifest string) error {
	file := filepath.Join(w.t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		w.t.Fatal(err)
	}
	out, err := w.kubectl(kubeconfig, "apply", "-f", file)
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// user provisions a namespace user: a Role in namespace ns only, on
// Bindings, the bound kinds, Secrets and ConfigMaps.
func (w *consumerWorld) user(name, ns string) string {
	w.t.Helper()
	return w.userWith(name, ns, `- apiGroups: [core.kbind.io]
  resources: [bindings]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [example.org]
  resources: ["*"]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [secrets, configmaps, events]
  verbs: [get, list, watch, create, update, patch, delete]
`)
}

// userWith provisions a user with a Role of its own in namespace ns
// holding rules (YAML list items) and returns its kubeconfig path.
func (w *consumerWorld) userWith(name, ns, rules string) string {
	w.t.Helper()
	u, err := w.pair.Consumer.AddUser(name)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.apply(w.consumer, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: user-%[2]s, namespace: %[1]s}
rules:
%[3]s---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: user-%[2]s, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: user-%[2]s}
subjects: [{kind: User, name: %[2]s, apiGroup: rbac.authorization.k8s.io}]
`, ns, name, rules)); err != nil {
		w.t.Fatal(err)
	}
	path := filepath.Join(w.t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(path, u.Kubeconfig, 0o600); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// condition reads "<status> <reason> <message>" of a binding's condition.
func (w *consumerWorld) condition(kind, ns, name, typ string) string {
	args := []string{"get", kind, name, "-o", fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%[1]s")].status} {.status.conditions[?(@.type=="%[1]s")].reason} {.status.conditions[?(@.type=="%[1]s")].message}`, typ)}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	out, _ := w.kubectl(w.consumer, args...)
	return out
}

func (w *consumerWorld) waitCondition(kind, ns, name, typ, want string) string {
	w.t.Helper()
	var got string
	enginetest.EventuallyWithin(w.t, 60*time.Second, fmt.Sprintf("%s %s/%s %s %q", kind, ns, name, typ, want), func() error {
		if got = w.condition(kind, ns, name, typ); !strings.HasPrefix(got, want) {
			return fmt.Errorf("%s is %q", typ, got)
		}
		return nil
	})
	return got
}

func (w *consumerWorld) absentOnProvider(what string, gvr schema.GroupVersionResource, ns, name string) {
	w.t.Helper()
	if _, err := resource(w.provider, gvr, ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		w.t.Errorf("%s: %s %s/%s exists on the provider", what, gvr.Resource, ns, name)
	}
}

func connectionSpec(isolation, namespaced string) string {
	out := "  isolation: " + isolation + "\n"
	if namespaced != "" {
		out += "  namespacedBindings: " + namespaced + "\n"
	}
	return out
}

// TestConsumerAttacks: on the consumer, users who may write only bound
// objects, Bindings, Secrets and ConfigMaps in one namespace try to reach
// what is not theirs through kbind — a Connection the admin meant for
// nobody, an API an admin's ClusterBinding serves, another namespace's
// provider Secrets, the kubeconfig Secrets, the konnector's watches — and
// a tenant on the provider forges another's markers. Each result is a row
// of docs/isolation.md's consumer table.
func TestConsumerAttacks(t *testing.T) {
	t.Parallel() // its own pair and konnector
	ctx := context.Background()
	crd := func(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return enginetest.CRD(plural, strings.ToLower(kind), kind, "example.org", apiextensionsv1.NamespaceScoped, true)
	}
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		crd("widgets", "Widget"), crd("gadgets", "Gadget"), crd("things", "Thing"), crd("grabs", "Grab"), crd("vaults", "Vault"),
		crd("gizmos", "Gizmo"), crd("sprockets", "Sprocket")}})
	w := &consumerWorld{t: t, pair: pair, consumer: pair.Consumer.KubeconfigPath,
		admin: dynamic.NewForConfigOrDie(pair.Consumer.Config), provider: dynamic.NewForConfigOrDie(pair.Provider.Config)}
	var rows []string
	row := func(attempt, result string) { rows = append(rows, fmt.Sprintf("| %s | %s |", attempt, result)) }

	for _, ns := range []string{"kbind", "team-x", "team-y", "team-z"} {
		w.mustKubectl(w.consumer, "create", "namespace", ns)
	}
	w.mustKubectl(w.consumer, "label", "namespace", "team-x", "team-y", "team-z", "tenant=team")

	// The provider grants the consumer three identities.
	grantKC := func(name string, args ...string) []byte {
		out, errOut, err := plugin(pair.Provider.KubeconfigPath, append([]string{"grant", name}, args...)...)
		if err != nil {
			t.Fatalf("grant %s: %v\n%s", name, err, errOut)
		}
		return bundleKubeconfig(t, out)
	}
	teamKC := grantKC("team", "--apis", "widgets.example.org,gadgets.example.org,grabs.example.org,vaults.example.org,gizmos.example.org,sprockets.example.org",
		"--related", "secrets,configmaps")
	adminKC := grantKC("admin-only", "--apis", "widgets.example.org,gadgets.example.org")
	victimKC := grantKC("victim", "--isolation", "Prefixed", "--apis", "things.example.org", "--provider-events")
	if err := w.apply(w.consumer, enginetest.ConnectionManifestWith("team", "team-kubeconfig", teamKC,
		connectionSpec("{mode: Namespace, namespace: kbind-team}", "{from: Selector, selector: {matchLabels: {tenant: team}}}"))+"\n---\n"+
		enginetest.ConnectionManifestWith("admin-only", "admin-only-kubeconfig", adminKC, connectionSpec("{mode: Namespace, namespace: kbind-admin-only}", ""))+"\n---\n"+
		enginetest.ConnectionManifestWith("victim", "victim-kubeconfig", victimKC, connectionSpec("{mode: Prefixed, prefix: victim}", ""))+`
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: things}
spec:
  connectionRef: {name: victim}
  apis: [{name: things.example.org}]
`); err != nil {
		t.Fatal(err)
	}
	// The konnector as the chart installs it: its RBAC, and the
	// imported-objects admission policy on.
	startKonnector(t, installKonnectorChart(t, pair, map[string]any{"importedObjects": map[string]any{"admissionPolicy": true}}),
		"--related-watches-per-namespace", "8", "--binding-resync", bindingResync.String())
	w.mustKubectl(w.consumer, "wait", "--for=condition=Ready", "connection/team", "connection/admin-only", "connection/victim", "clusterbinding/things", "--timeout=90s")
	alice := w.user("alice", "team-x")
	bob := w.user("bob", "team-y")
	carol := w.user("carol", "team-z")

	// 1. A Binding naming a Connection the admin meant for nobody.
	if err := w.apply(alice, bindingYAML("team-x", "sneak", "admin-only", "gadgets.example.org")); err != nil {
		t.Fatal(err)
	}
	ready := w.waitCondition("bindings.core.kbind.io", "team-x", "sneak", "Ready", "False Forbidden")
	if _, err := w.kubectl(w.consumer, "get", "crd", "gadgets.example.org"); err == nil {
		t.Errorf("a Binding the Connection does not admit installed the consumer CRD")
	}
	expect(t, ready, `Connection "admin-only" does not admit Bindings in namespace "team-x"`)
	row("a Binding naming a Connection that does not admit its namespace", "refused: `Ready=False`/`Forbidden` (Connection \"admin-only\" does not admit Bindings in namespace \"team-x\"); no consumer CRD installed, nothing synced")
	w.mustKubectl(alice, "delete", "bindings.core.kbind.io", "-n", "team-x", "sneak", "--timeout=60s")

	// 2. A Binding binds an API first; then an admin's ClusterBinding of it
	// through another Connection.
	if err := w.apply(alice, bindingYAML("team-x", "first", "team", "gadgets.example.org")); err != nil {
		t.Fatal(err)
	}
	w.waitCondition("bindings.core.kbind.io", "team-x", "first", "Ready", "True")
	if err := w.apply(w.consumer, `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: gadgets}
spec:
  connectionRef: {name: admin-only}
  apis: [{name: gadgets.example.org}]
`); err != nil {
		t.Fatal(err)
	}
	w.waitCondition("clusterbindings.core.kbind.io", "", "gadgets", "Ready", "True")
	if got := w.mustKubectl(w.consumer, "get", "crd", "gadgets.example.org", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/connection}`); got != "admin-only" {
		t.Errorf("the consumer CRD is stamped for %q after the admin's ClusterBinding, want admin-only", got)
	}
	overlap := w.waitCondition("bindings.core.kbind.io", "team-x", "first", "Ready", "False")
	expect(t, overlap, "already covered by a ClusterBinding", "ClusterBinding gadgets")
	row("a Binding binds an API before an admin's ClusterBinding of it through another Connection", "the ClusterBinding takes the consumer CRD over and serves every namespace; the Binding reports `Ready=False` (already covered by a ClusterBinding)")

	// 2a. A Binding of an API whose names the consumer cluster's own CRD
	// of that group holds: installed, kbind's CRD would be refused its
	// names and take them once the cluster's CRD is deleted and created
	// again (an operator upgrade).
	w.mustKubectl(w.consumer, "apply", "-f", writeManifest(t, ownGizmoes))
	w.mustKubectl(w.consumer, "wait", "--for=condition=Established", "crd/gizmoes.example.org", "--timeout=60s")
	if err := w.apply(alice, bindingYAML("team-x", "clash", "team", "gizmos.example.org")); err != nil {
		t.Fatal(err)
	}
	clash := w.waitCondition("bindings.core.kbind.io", "team-x", "clash", "Ready", "False Pending")
	expect(t, clash, "the consumer API gizmos.example.org is not installed", "kind Gizmo", "of the CRD gizmoes.example.org (which kbind did not create)")
	if _, err := w.kubectl(w.consumer, "get", "crd", "gizmos.example.org"); err == nil {
		t.Errorf("a Binding installed a consumer CRD whose names the cluster's own CRD holds")
	}
	w.mustKubectl(w.consumer, "delete", "crd", "gizmoes.example.org", "--timeout=60s")
	w.mustKubectl(w.consumer, "apply", "-f", writeManifest(t, ownGizmoes))
	w.mustKubectl(w.consumer, "wait", "--for=condition=NamesAccepted", "crd/gizmoes.example.org", "--timeout=60s")
	w.mustKubectl(w.consumer, "wait", "--for=condition=Established", "crd/gizmoes.example.org", "--timeout=60s")
	if _, err := w.kubectl(w.consumer, "get", "crd", "gizmos.example.org"); err == nil {
		t.Errorf("kbind installed gizmos.example.org while the cluster's CRD was deleted and created again")
	}
	row("a Binding of an API whose names collide with a CRD the consumer cluster has in that group (`gizmos.example.org` beside the cluster's `gizmoes.example.org`, both kind Gizmo)",
		"refused: `Ready=False`/`Pending` (the consumer API gizmos.example.org is not installed: … kind Gizmo … of the CRD gizmoes.example.org (which kbind did not create) …); nothing installed; the cluster's CRD, deleted and created again, keeps its names")
	w.mustKubectl(alice, "delete", "bindings.core.kbind.io", "-n", "team-x", "clash", "--timeout=60s")

	// 2b. A Binding binds an unprojected API at the name an admin's
	// ClusterBinding later projects another API onto.
	if err := w.apply(alice, bindingYAML("team-x", "sprockets", "team", "sprockets.example.org")); err != nil {
		t.Fatal(err)
	}
	w.waitCondition("bindings.core.kbind.io", "team-x", "sprockets", "Ready", "True")
	if err := w.apply(w.consumer, `apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: sprocket-widgets}
spec:
  connectionRef: {name: admin-only}
  apis: [{name: widgets.example.org, projection: {group: example.org, kind: Sprocket}}]
`); err != nil {
		t.Fatal(err)
	}
	held := w.waitCondition("clusterbindings.core.kbind.io", "", "sprocket-widgets", "Ready", "False ProjectionRefused")
	expect(t, held, "CRD sprockets.example.org serves the provider's sprockets.example.org", "Binding team-x/sprockets lists it")
	w.mustKubectl(w.consumer, "delete", "bindings.core.kbind.io", "-n", "team-x", "sprockets", "--timeout=60s")
	w.waitCondition("clusterbindings.core.kbind.io", "", "sprocket-widgets", "Ready", "True")
	if got := w.mustKubectl(w.consumer, "get", "crd", "sprockets.example.org", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/provider-api} {.metadata.annotations.core\.kbind\.io/connection}`); got != "widgets.example.org admin-only" {
		t.Errorf("the consumer CRD sprockets.example.org after the Binding went serves %q, want widgets.example.org through admin-only", got)
	}
	row("a Binding binds an unprojected API at the name an admin's ClusterBinding later projects onto",
		"the ClusterBinding is refused while the Binding lists it (`Ready=False`/`ProjectionRefused`: … Binding team-x/sprockets lists it …); once the Binding is gone kbind replaces its empty CRD and the admin's projection serves the name")

	// 3. Too many names for the konnector to watch.
	names := make([]string, 33)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%d", i)
	}
	err := w.apply(alice, fmt.Sprintf(bindingYAML("team-x", "many", "team", "widgets.example.org", `{resource: configmaps, direction: FromConsumer, selector: {names: [%s]}}`), strings.Join(names, ", ")))
	if err == nil || !strings.Contains(err.Error(), "must have at most 32 items") {
		t.Errorf("a Binding naming 33 ConfigMaps: %v", err)
	}
	row("a Binding naming 33 related objects", "refused by the API server: "+lineWith(fmt.Sprint(err), "must have at most"))

	// 4. Another namespace's provider Secrets, and the kubeconfig Secrets.
	for name, labels := range map[string]map[string]string{"team-y.db": {"app": "db"}, "team-x.own": {"app": "db"}} {
		adminCreate(t, w.provider, secrets, object(secrets, "kbind-team", name, labels, map[string]any{"stringData": map[string]any{"owner": name}}))
	}
	w.mustKubectl(alice, "create", "secret", "generic", "mine", "-n", "team-x", "--from-literal=k=v")
	if err := w.apply(alice, bindingYAML("team-x", "rel", "team", "widgets.example.org", `{resource: secrets, direction: FromProvider, selector: {names: [team-y.db]}}`, `{resource: secrets, direction: FromProvider, selector: {labelSelector: {matchLabels: {app: db}}}}`, `{resource: secrets, direction: FromConsumer, selector: {names: [mine, team-kubeconfig, admin-only-kubeconfig]}}`)); err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyWithin(t, 60*time.Second, "team-x's own provider Secret copied down, its own Secret up", func() error {
		if _, err := w.kubectl(w.consumer, "get", "secret", "-n", "team-x", "own"); err != nil {
			return err
		}
		_, err := resource(w.provider, secrets, "kbind-team").Get(ctx, "team-x.mine", metav1.GetOptions{})
		return err
	})
	denied := w.waitCondition("bindings.core.kbind.io", "team-x", "rel", "PermissionDenied", "True")
	for _, s := range []string{"team-y.db", "db"} {
		if _, err := w.kubectl(w.consumer, "get", "secret", "-n", "team-x", s); err == nil {
			t.Errorf("team-x received Secret %s, which belongs to team-y", s)
		}
	}
	for _, s := range []string{"team-x.team-kubeconfig", "team-x.admin-only-kubeconfig", "kbind.team-kubeconfig"} {
		w.absentOnProvider("a FromConsumer entry naming a kubeconfig Secret", secrets, "kbind-team", s)
	}
	expect(t, denied, "kbind refuses", "team-y.db")
	row("a FromProvider entry naming another namespace's provider Secret (`team-y.db`), and a selector matching it", "not copied; `PermissionDenied=True` (kbind refuses: …); team-x's own `team-x.own` arrives as `own`")
	row("a FromConsumer entry naming the Connections' kubeconfig Secrets", "nothing copied: a Binding reads its own namespace only (they live in `kbind`)")

	// 5. More related watches than the namespace's budget (8 here).
	var greedy []string
	for e := range 3 {
		var ns []string
		for i := range 4 {
			ns = append(ns, fmt.Sprintf("g-%d-%d", e, i))
		}
		greedy = append(greedy, fmt.Sprintf("{resource: configmaps, direction: FromConsumer, selector: {names: [%s]}}", strings.Join(ns, ", ")))
	}
	if err := w.apply(carol, bindingYAML("team-z", "greedy", "team", "widgets.example.org", greedy...)); err != nil {
		t.Fatal(err)
	}
	budget := w.waitCondition("bindings.core.kbind.io", "team-z", "greedy", "PermissionDenied", "True")
	w.mustKubectl(bob, "create", "configmap", "cfg", "-n", "team-y", "--from-literal=k=v")
	began := time.Now()
	if err := w.apply(bob, bindingYAML("team-y", "modest", "team", "widgets.example.org", `{resource: configmaps, direction: FromConsumer, selector: {names: [cfg]}}`)); err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyWithin(t, 30*time.Second, "team-y's ConfigMap copied while team-z is over its budget", func() error {
		_, err := resource(w.provider, configMaps, "kbind-team").Get(ctx, "team-y.cfg", metav1.GetOptions{})
		return err
	})
	expect(t, budget, "over the budget of 8 per namespace")
	t.Logf("team-y's ConfigMap copied %s after its Binding, while team-z is over its budget", time.Since(began))
	row("a Binding watching more related objects than its namespace's budget", "refused for that Binding (`PermissionDenied=True`: over the budget of related watches per namespace); a Binding in another namespace is not held up by it")

	// 6. The costliest mutations the API server admits, in a namespace
	// user's Binding, on objects the user keeps changing; another
	// namespace's object meanwhile.
	costlyMutations(t, w, bob)
	row("a Binding whose mutations are the costliest the API server admits (32 up rules of nested comprehensions) on objects of 10,000 items its user keeps changing",
		"each object stops at a namespaced Binding's cost limit: `MutationFailed` (… the runtime cost limit of 1000 for one evaluation (a namespaced Binding's; a ClusterBinding's is 1000000) …), nothing written for it; an object of another namespace's Binding syncs meanwhile")

	// 7. A tenant on the provider forges the victim's markers on an object
	// of its own and gets Events recorded on it.
	w.mustKubectl(w.consumer, "apply", "-f", writeManifest(t, "apiVersion: example.org/v1alpha1\nkind: Thing\nmetadata: {name: t1, namespace: team-x}\nspec: {size: 1}\n"))
	var copyObj *unstructured.Unstructured
	enginetest.EventuallyWithin(t, 60*time.Second, "the victim's Thing on the provider", func() error {
		var err error
		copyObj, err = resource(w.provider, things, "victim-team-x").Get(ctx, "t1", metav1.GetOptions{})
		return err
	})
	mal := grant(t, pair.Provider, "mal", "Prefixed", "mal", "mal", "--apis", "things.example.org")
	stolen, err := resource(mal.dyn, things, "victim-team-x").Get(ctx, "t1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("a Prefixed tenant reads the bound API cluster-wide (docs/isolation.md says so): %v", err)
	}
	create(t, mal, namespaces, object(namespaces, "", "mal-x", map[string]string{"core.kbind.io/prefix": "mal"}, nil))
	forged := object(things, "mal-x", "evil", stolen.GetLabels(), map[string]any{"spec": map[string]any{"size": int64(1)}})
	forged.SetAnnotations(stolen.GetAnnotations())
	forged = create(t, mal, things, forged)
	event := func(ns, name, uid, reason string) {
		adminCreate(t, w.provider, events, object(events, ns, strings.ToLower(reason)+"-"+name, nil, map[string]any{
			"involvedObject": map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "Thing", "namespace": ns, "name": name, "uid": uid},
			"reason":         reason, "message": reason + " by the provider", "type": "Warning"}))
	}
	event("mal-x", "evil", string(forged.GetUID()), "Forged")
	event("victim-team-x", "t1", string(copyObj.GetUID()), "Genuine")
	enginetest.EventuallyWithin(t, 60*time.Second, "the genuine provider Event forwarded to team-x/t1", func() error {
		out, err := w.kubectl(w.consumer, "get", "events", "-n", "team-x", "--field-selector", "involvedObject.name=t1", "-o", "jsonpath={.items[*].reason}")
		if err != nil || !strings.Contains(out, "Genuine") {
			return fmt.Errorf("reasons %q %v", out, err)
		}
		if strings.Contains(out, "Forged") {
			t.Errorf("the forged Event reached the victim's object")
		}
		return nil
	})
	row("a provider tenant copies the victim's markers onto an object of its own and gets an Event recorded on it", "ignored: only the Event on the victim's real copy reaches the victim's object")

	// 7. Features in combination (issue #51).
	rows = append(rows, importNamesASecret(w, newTenant(t, "team", "Namespace", "kbind-team", "", teamKC), alice)...)
	rows = append(rows, releaseByUpdater(w, alice)...)
	rows = append(rows, mutationRewritesReference(w)...)

	table := "| attempt | result |\n|---|---|\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("consumer table:\n%s", table)
	checkDocs(t, "consumer-attacks", table)
}

// ownGizmoes is a CRD of the consumer cluster's own, kbind's nowhere: kind
// Gizmo in example.org, the kind of the provider's gizmos.example.org.
const ownGizmoes = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmoes.example.org}
spec:
  group: example.org
  scope: Namespaced
  names: {plural: gizmoes, singular: gizmoe, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// bindingResync is the konnector's --binding-resync here: it re-checks
// every binding that often, so twice that is the longest a healthy
// konnector leaves an object of a Ready binding unsynced — the bound of
// the waits on syncs that the attack rows hold against a noisy neighbour.
const bindingResync = 10 * time.Second

// costlyMutations: nora, a namespace user of team-n, binds widgets with
// 32 up rules of nested comprehensions that each pass the static cost
// check (the most the Binding CRD admits), creates objects of 10,000 items
// and changes them again; bob's object in team-y syncs meanwhile, and each
// of nora's objects stops at a namespaced Binding's cost limit, named in a
// MutationFailed Event, with nothing written to the provider. Under the
// API server's limits the same rules run (about 5 s of CPU per object
// change on the development machine) and write their copies.
func costlyMutations(t *testing.T, w *consumerWorld, bob string) {
	t.Helper()
	ctx := context.Background()
	w.mustKubectl(w.consumer, "create", "namespace", "team-n")
	w.mustKubectl(w.consumer, "label", "namespace", "team-n", "tenant=team")
	nora := w.user("nora", "team-n")
	var rules strings.Builder
	for i := range 32 {
		fmt.Fprintf(&rules, "      - {path: .spec.r%d, expression: '[1, 2].all(y, object.spec.items.exists(x, x == -y))'}\n", i)
	}
	if err := w.apply(nora, "apiVersion: core.kbind.io/v1alpha1\nkind: Binding\nmetadata: {name: costly, namespace: team-n}\nspec:\n  connectionRef: {name: team}\n  apis:\n  - name: widgets.example.org\n    mutations:\n      up:\n"+rules.String()); err != nil {
		t.Fatal(err)
	}
	w.waitCondition("bindings.core.kbind.io", "team-n", "costly", "Ready", "True")
	items := strings.TrimSuffix(strings.Repeat("1, ", 10_000), ", ")
	widget := func(name string, generation int) string {
		return fmt.Sprintf("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: %s, namespace: team-n}\nspec: {generation: %d, items: [%s]}\n", name, generation, items)
	}
	const objects = 8
	for i := range objects {
		if err := w.apply(nora, widget(fmt.Sprint("costly-", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	// The victim's object, while nora changes every one of his again.
	began := time.Now()
	w.mustKubectl(bob, "apply", "-f", writeManifest(t, "apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: victim, namespace: team-y}\nspec: {size: 1}\n"))
	for i := range objects {
		if err := w.apply(nora, widget(fmt.Sprint("costly-", i), 2)); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.EventuallyWithin(t, 2*bindingResync, "team-y's Widget on the provider while team-n's mutations run", func() error {
		_, err := resource(w.provider, widgets, "kbind-team").Get(ctx, "team-y.victim", metav1.GetOptions{})
		return err
	})
	t.Logf("team-y's Widget was on the provider %s after its create (found after nora's %d changes were applied)", time.Since(began), objects)
	limit := "exceeded the runtime cost limit of 1000 for one evaluation (a namespaced Binding's; a ClusterBinding's is 1000000)"
	for i := range objects {
		name := fmt.Sprint("costly-", i)
		enginetest.EventuallyWithin(t, 2*bindingResync, "MutationFailed naming a namespaced Binding's limit on "+name, func() error {
			out, err := w.kubectl(w.consumer, "get", "events", "-n", "team-n", "--field-selector", "involvedObject.name="+name+",reason=MutationFailed", "-o", "jsonpath={.items[*].message}")
			if err != nil || !strings.Contains(out, "mutations.up[0] (.spec.r0): the expression "+limit) {
				return fmt.Errorf("MutationFailed messages %q %v", out, err)
			}
			return nil
		})
		w.absentOnProvider("an object over its Binding's cost limit", widgets, "kbind-team", "team-n."+name)
	}
}

// bindingYAML is a Binding of one API through connection, with related
// entries (flow-style YAML).
func bindingYAML(ns, name, connection, api string, related ...string) string {
	out := fmt.Sprintf("apiVersion: core.kbind.io/v1alpha1\nkind: Binding\nmetadata: {name: %s, namespace: %s}\nspec:\n  connectionRef: {name: %s}\n  apis: [{name: %s}]\n",
		name, ns, connection, api)
	if len(related) > 0 {
		out += "  relatedResources:\n  - " + strings.Join(related, "\n  - ") + "\n"
	}
	return out
}

// expect fails unless a condition read by consumerWorld.condition holds
// every fragment.
func expect(t *testing.T, condition string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(condition, f) {
			t.Errorf("condition %q lacks %q", condition, f)
		}
	}
	t.Logf("condition: %s", condition)
}

func writeManifest(t *testing.T, manifest string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// installKonnectorChart installs the konnector chart on the consumer
// (`helm install konnector charts/konnector -n kbind`, the CRDs already
// there) with values over the bound group example.org and related
// resources, and returns a kubeconfig that impersonates the chart's
// ServiceAccount: the konnector run with it has exactly the chart's RBAC,
// and the chart's admission policies see it as the konnector.
func installKonnectorChart(t *testing.T, pair *testenv.Pair, values map[string]any) string {
	t.Helper()
	cfg, err := harness.HelmConfig(pair.Consumer.KubeconfigPath, "", "kbind")
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "konnector", "kbind"
	values["installCRDs"] = false
	values["rbac"] = map[string]any{"boundResourceGroups": []any{"example.org"}, "relatedResources": true}
	if _, err := install.Run(loadChart(t, "konnector"), values); err != nil {
		t.Fatalf("helm install konnector: %v", err)
	}
	asSA := filepath.Join(t.TempDir(), "konnector-as-serviceaccount.kubeconfig")
	if err := harness.WriteImpersonating(pair.Consumer.KubeconfigPath, asSA, "system:serviceaccount:kbind:konnector"); err != nil {
		t.Fatal(err)
	}
	return asSA
}

// startKonnector runs the built konnector against the consumer (the
// harness's host process: it waits for /readyz) until the test ends, and
// prints its log if the test failed.
func startKonnector(t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	harness.StartProcessT(t, konnectorBin, filepath.Join(t.TempDir(), "konnector.log"), append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", "0",
		"--discovery-interval", "2s", "--heartbeat-interval", "2s"}, args...)...)
}
