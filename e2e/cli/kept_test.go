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

package cli

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// keptCopy is a provider object with the given labels and annotations
// (YAML flow maps' contents).
func keptCopy(kind, ns, name, labels, annotations string) string {
	return fmt.Sprintf("apiVersion: example.org/v1alpha1\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {%s}\n  annotations: {%s}\nspec: {size: 1}\n",
		kind, name, ns, labels, annotations)
}

// TestKept: kubectl kbind kept lists, on the provider with the
// Connection's own credentials, exactly the copies a binding's deletion
// protection kept — labelled core.kbind.io/kept=DeletionProtection,
// annotated kept-by with the binding, with this consumer cluster's
// markers, in the Connection's isolation namespace — of the APIs of its
// status (an API removed from spec.apis is in keptCopies only); --delete
// deletes exactly those, asking on a terminal (n deletes nothing),
// refusing on a pipe without --yes (exit 2). The attack: forged kept
// labels and kept-by on a copy of another consumer cluster, on a provider
// object without markers, on copies of ours that only half carry our
// markers, are never listed nor deleted.
func TestKept(t *testing.T) {
	t.Parallel() // its own pair
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	kubectl(t, consumer, "create", "namespace", "team-a")
	kubectl(t, provider, "create", "namespace", "kbind-iso")
	kubectl(t, provider, "create", "namespace", "elsewhere")

	// A Connection confined to kbind-iso, a protected ClusterBinding of
	// widgets that once bound gadgets too, and a Binding of team-a; their
	// status as the konnector reports it (no konnector runs here).
	kubectl(t, consumer, "apply", "-f", writeFile(t, "kept.yaml", enginetest.ConnectionManifestWith("provider", "provider-kubeconfig", pair.Provider.Kubeconfig,
		"  isolation: {mode: Namespace, namespace: kbind-iso}\n  namespacedBindings: {from: All}\n")+`---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: provider}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  deletionProtection: true
---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: widgets, namespace: team-a}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
`))
	kubectl(t, consumer, "patch", "clusterbinding", "provider", "--subresource=status", "--type=merge", "-p", `{"status":{
		"boundAPIs":[{"name":"widgets.example.org","instances":{"total":1,"synced":1,"pending":0,"failed":0}}],
		"keptCopies":[{"name":"gadgets.example.org","count":1,"namespaces":["kbind-iso"]},{"name":"widgets.example.org","count":2,"namespaces":["kbind-iso"]}]}}`)
	kubectl(t, consumer, "patch", "bindings.core.kbind.io", "widgets", "-n", "team-a", "--subresource=status", "--type=merge", "-p",
		`{"status":{"boundAPIs":[{"name":"widgets.example.org"}],"keptCopies":[{"name":"widgets.example.org","count":1,"namespaces":["kbind-iso"]}]}}`)

	us := jsonpath(t, consumer, "{.metadata.uid}", "namespace", "kube-system")
	const them = "0b7c6c1e-0000-4000-8000-000000000000"
	marks := func(cluster string) string {
		return "core.kbind.io/managed: \"true\", core.kbind.io/consumer-cluster-uid: " + cluster
	}
	kept := func(cluster string) string {
		return marks(cluster) + ", core.kbind.io/kept: DeletionProtection"
	}
	ann := func(cluster, by string) string {
		return "core.kbind.io/consumer-cluster-uid: " + cluster + ", core.kbind.io/consumer-object-uid: obj-" + by[:3] + ", core.kbind.io/kept-by: " + by
	}
	const cbBy, bBy = "ClusterBinding/provider", "Binding/team-a/widgets"
	objects := []string{
		// The ClusterBinding's three kept copies, one of an API it no
		// longer lists.
		keptCopy("Widget", "kbind-iso", "default.w1", kept(us), ann(us, cbBy)),
		keptCopy("Widget", "kbind-iso", "default.w2", kept(us), ann(us, cbBy)),
		keptCopy("Gadget", "kbind-iso", "default.g1", kept(us), ann(us, cbBy)),
		// The Binding's.
		keptCopy("Widget", "kbind-iso", "team-a.w3", kept(us), ann(us, bBy)),
		// Not kept: synced, or kept by an Orphan release.
		keptCopy("Widget", "kbind-iso", "default.synced", marks(us), "core.kbind.io/consumer-cluster-uid: "+us+", core.kbind.io/consumer-object-uid: obj-s"),
		keptCopy("Widget", "kbind-iso", "default.orphan", marks(us)+", core.kbind.io/kept: Orphan", ann(us, cbBy)),
		// Forged: another consumer cluster's copy with our kept label
		// and kept-by; a provider object without markers; our label with
		// another cluster's annotation, and the reverse; our markers
		// without an object UID; a perfect one outside the isolation
		// namespace.
		keptCopy("Widget", "kbind-iso", "forged.other-cluster", kept(them), ann(them, cbBy)),
		keptCopy("Widget", "kbind-iso", "forged.unmarked", "core.kbind.io/kept: DeletionProtection", "core.kbind.io/kept-by: "+cbBy),
		keptCopy("Widget", "kbind-iso", "forged.label-only", kept(us), ann(them, cbBy)),
		keptCopy("Widget", "kbind-iso", "forged.annotation-only", kept(them), ann(us, cbBy)),
		keptCopy("Widget", "kbind-iso", "forged.no-object-uid", kept(us), "core.kbind.io/consumer-cluster-uid: "+us+", core.kbind.io/kept-by: "+cbBy),
		keptCopy("Widget", "elsewhere", "default.w1", kept(us), ann(us, cbBy)),
	}
	kubectl(t, provider, "apply", "-f", writeFile(t, "copies.yaml", strings.Join(objects, "---\n")))
	survivors := func() string {
		return kubectl(t, provider, "get", "widgets,gadgets", "-A", "--sort-by=.metadata.name", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`)
	}
	all := survivors()

	// The list.
	out := mustPlugin(t, "--kubeconfig", consumer, "kept", "clusterbinding/provider")
	for _, want := range []string{
		"ClusterBinding provider (Connection provider): 3 copies kept on the provider by its deletion protection (its status counts 3).",
		"gadgets.example.org  kbind-iso/default.g1",
		"widgets.example.org  kbind-iso/default.w1",
		"widgets.example.org  kbind-iso/default.w2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kept clusterbinding/provider lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"forged", "synced", "orphan", "team-a.w3", "elsewhere"} {
		if strings.Contains(out, never) {
			t.Errorf("kept clusterbinding/provider lists %s:\n%s", never, out)
		}
	}
	if out := mustPlugin(t, "--kubeconfig", consumer, "kept", "binding/widgets", "-n", "team-a"); !strings.Contains(out, "Binding team-a/widgets (Connection provider): 1 copy kept") ||
		!strings.Contains(out, "kbind-iso/team-a.w3") || strings.Contains(out, "default.") {
		t.Errorf("kept binding/widgets -n team-a:\n%s", out)
	}

	// Usage mistakes exit 2; a pipe without --yes refuses, n deletes
	// nothing.
	for _, args := range [][]string{{"kept", "binding/widgets"}, {"kept", "clusterbinding/provider", "-n", "team-a"}, {"kept", "provider"}, {"kept"}} {
		if _, errOut, code := plugin(t, append([]string{"--kubeconfig", consumer}, args...)...); code != 2 {
			t.Errorf("kubectl kbind %s: exit %d, want 2\n%s", strings.Join(args, " "), code, errOut)
		}
	}
	if _, errOut, code := pluginIn(t, "y\n", false, "--kubeconfig", consumer, "kept", "clusterbinding/provider", "--delete"); code != 2 || !strings.Contains(errOut, "pass --yes to delete without asking") {
		t.Errorf("kept --delete on a pipe: exit %d, %q", code, errOut)
	}
	if out, _, code := pluginIn(t, "n\n", true, "--kubeconfig", consumer, "kept", "clusterbinding/provider", "--delete"); code != 1 || !strings.Contains(out, "Delete these 3 copies on the provider, for good? [y/N]") {
		t.Errorf("kept --delete answered n: exit %d\n%s", code, out)
	}
	if got := survivors(); got != all {
		t.Fatalf("refused or unconfirmed deletes deleted: %s, was %s", got, all)
	}

	// y: exactly the three go.
	out, _, code := pluginIn(t, "y\n", true, "--kubeconfig", consumer, "kept", "clusterbinding/provider", "--delete")
	if code != 0 || !strings.Contains(out, "widgets.example.org kbind-iso/default.w1 deleted") || !strings.Contains(out, "gadgets.example.org kbind-iso/default.g1 deleted") {
		t.Errorf("kept --delete answered y: exit %d\n%s", code, out)
	}
	want := strings.NewReplacer("kbind-iso/default.g1 ", "", "kbind-iso/default.w1 ", "", "kbind-iso/default.w2 ", "").Replace(all)
	if got := survivors(); got != want {
		t.Errorf("on the provider after kept --delete: %s; want %s", got, want)
	}
	if out := mustPlugin(t, "--kubeconfig", consumer, "kept", "clusterbinding/provider", "--delete", "--yes"); !strings.Contains(out, "0 copies kept") || !strings.Contains(out, "Nothing to delete.") {
		t.Errorf("kept --delete again:\n%s", out)
	}
	// The Binding's, with --yes (a script).
	if out := mustPlugin(t, "--kubeconfig", consumer, "kept", "binding/widgets", "-n", "team-a", "--delete", "--yes"); !strings.Contains(out, "widgets.example.org kbind-iso/team-a.w3 deleted") {
		t.Errorf("kept binding --delete --yes:\n%s", out)
	}
	if got, want := survivors(), strings.Replace(want, "kbind-iso/team-a.w3 ", "", 1); got != want {
		t.Errorf("on the provider after the Binding's: %s; want %s", got, want)
	}
}
