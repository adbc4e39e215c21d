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

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// TestBulkDeletionProtectionAttacks (BIND-5): on a consumer whose
// konnector runs as the chart installs it (the deletion-protection policy
// on, by default), a user who may label namespaces and edit bindings, but
// may not delete the bound objects, tries each side door to delete the
// provider copies of a protected ClusterBinding in bulk: removing an API
// from spec.apis, alone or in the edit that turns protection off (refused
// by the chart's policy), a namespace's label its namespaceSelector
// selects by, and an objectSelector edit (allowed, but every copy is kept:
// labelled core.kbind.io/kept: DeletionProtection, annotated kept-by with
// the binding, kbind's markers intact, listed by kubectl kbind kept).
// Each result is a row of docs/isolation.md's bulk-deletion-protection
// table.
func TestBulkDeletionProtectionAttacks(t *testing.T) {
	t.Parallel() // its own pair and konnector
	ctx := context.Background()
	crd := func(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return enginetest.CRD(plural, strings.ToLower(kind), kind, "example.org", apiextensionsv1.NamespaceScoped, true)
	}
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{crd("widgets", "Widget"), crd("gadgets", "Gadget")}})
	w := &consumerWorld{t: t, pair: pair, consumer: pair.Consumer.KubeconfigPath,
		admin: dynamic.NewForConfigOrDie(pair.Consumer.Config), provider: dynamic.NewForConfigOrDie(pair.Provider.Config)}
	var rows []string
	row := func(attempt, result string) { rows = append(rows, fmt.Sprintf("| %s | %s |", attempt, result)) }

	for _, ns := range []string{"kbind", "team-x", "team-y"} {
		w.mustKubectl(w.consumer, "create", "namespace", ns)
	}
	w.mustKubectl(w.consumer, "label", "namespace", "team-x", "team-y", "tenant=team")
	out, errOut, err := plugin(pair.Provider.KubeconfigPath, "grant", "team", "--apis", "widgets.example.org,gadgets.example.org")
	if err != nil {
		t.Fatalf("grant team: %v\n%s", err, errOut)
	}
	if err := w.apply(w.consumer, enginetest.ConnectionManifestWith("team", "team-kubeconfig", bundleKubeconfig(t, out),
		connectionSpec("{mode: Namespace, namespace: kbind-team}", "")+"  deletionProtection: true\n")+`
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: protected}
spec:
  connectionRef: {name: team}
  namespaceSelector: {matchLabels: {tenant: team}}
  apis: [{name: widgets.example.org}, {name: gadgets.example.org}]
  deletionProtection: true
`); err != nil {
		t.Fatal(err)
	}
	startKonnector(t, installKonnectorChart(t, pair, map[string]any{}), "--binding-resync", bindingResync.String())
	w.mustKubectl(w.consumer, "wait", "--for=condition=Ready", "connection/team", "clusterbinding/protected", "--timeout=90s")
	object := func(kind, ns, name, labels string) string {
		return fmt.Sprintf("apiVersion: example.org/v1alpha1\nkind: %s\nmetadata: {name: %s, namespace: %s, labels: {%s}}\nspec: {size: 1}\n", kind, name, ns, labels)
	}
	w.mustKubectl(w.consumer, "apply", "-f", writeManifest(t, strings.Join([]string{
		object("Widget", "team-x", "w1", ""), object("Gadget", "team-x", "g1", ""),
		object("Widget", "team-y", "w2", "tier: gold"), object("Widget", "team-y", "w3", ""), object("Gadget", "team-y", "g2", ""),
	}, "---\n")))
	type copyRef struct {
		gvr             schema.GroupVersionResource
		ns, name, place string
	}
	all := []copyRef{
		{widgets, "team-x", "w1", "team-x.w1"}, {gadgetsGVR, "team-x", "g1", "team-x.g1"},
		{widgets, "team-y", "w2", "team-y.w2"}, {widgets, "team-y", "w3", "team-y.w3"}, {gadgetsGVR, "team-y", "g2", "team-y.g2"},
	}
	enginetest.EventuallyWithin(t, 2*bindingResync, "every copy on the provider", func() error {
		for _, c := range all {
			if _, err := resource(w.provider, c.gvr, "kbind-team").Get(ctx, c.place, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	enginetest.EventuallyWithin(t, 2*bindingResync, "the ClusterBinding's counts", func() error {
		got, _ := w.kubectl(w.consumer, "get", "clusterbinding", "protected", "-o", "jsonpath={.status.boundAPIs[*].instances.synced}")
		if got != "2 3" {
			return fmt.Errorf("synced %q", got)
		}
		return nil
	})

	// binder may label namespaces and edit bindings; the bound objects it
	// may read, not delete.
	binder := w.userWith("binder", "team-x", `- apiGroups: [example.org]
  resources: [widgets, gadgets]
  verbs: [get, list, watch]
`)
	if err := w.apply(w.consumer, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: binder-bulk}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch, update, patch]}
- {apiGroups: [core.kbind.io], resources: [clusterbindings, bindings], verbs: [get, list, watch, update, patch]}
- {apiGroups: [example.org], resources: [widgets, gadgets], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: binder-bulk}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: binder-bulk}
subjects: [{kind: User, name: binder, apiGroup: rbac.authorization.k8s.io}]
`); err != nil {
		t.Fatal(err)
	}
	if out, err := w.kubectl(binder, "delete", "widget", "w1", "-n", "team-x"); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("binder deleted a bound object: %v\n%s", err, out)
	}
	row("the user deletes a bound object (`kubectl delete widget w1 -n team-x`)", "refused (RBAC): it may label namespaces and edit bindings, not delete the objects")

	// (c), (d): an API removed, alone or with protection off in the same
	// edit: the chart's policy checks the stored object.
	const removal = "ClusterBinding protected has deletionProtection: true, so this edit may not remove gadgets.example.org (2 objects, 2 synced) from spec.apis."
	for _, tc := range []struct{ what, patch string }{
		{"remove gadgets.example.org from spec.apis", `{"spec":{"apis":[{"name":"widgets.example.org"}]}}`},
		{"the same edit turning protection off", `{"spec":{"deletionProtection":false,"apis":[{"name":"widgets.example.org"}]}}`},
	} {
		out, err := w.kubectl(binder, "patch", "clusterbinding", "protected", "--type=merge", "-p", tc.patch)
		if err == nil {
			t.Errorf("ATTACK SUCCEEDED: %s: %s", tc.what, out)
			continue
		}
		for _, f := range []string{removal, "Without this policy the konnector would keep their provider copies", "turn protection off in an edit of its own first"} {
			if !strings.Contains(out, f) {
				t.Errorf("%s: kubectl's error lacks %q:\n%s", tc.what, f, out)
			}
		}
		t.Logf("%s: %s", tc.what, out)
	}
	if got := w.mustKubectl(w.consumer, "get", "clusterbinding", "protected", "-o", "jsonpath={.spec.deletionProtection} {.spec.apis[*].name}"); got != "true widgets.example.org gadgets.example.org" {
		t.Errorf("the ClusterBinding after the refused edits: %q", got)
	}
	row("remove an API from the protected ClusterBinding's `spec.apis` (`kubectl patch … apis: [widgets]`)",
		"refused (admission policy): "+removal+" Without this policy the konnector would keep their provider copies (labelled core.kbind.io/kept: DeletionProtection), not delete them; … turn protection off in an edit of its own first …")
	row("the same removal in the edit that sets `deletionProtection: false`", "refused (admission policy), with the same message: the policy checks the stored object's protection, so protection goes in an edit of its own first")

	// kept checks a copy is kept by the ClusterBinding: the kept label,
	// the kept-by annotation, kbind's markers of this consumer's object.
	clusterUID := w.mustKubectl(w.consumer, "get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}")
	kept := func(c copyRef) error {
		p, err := resource(w.provider, c.gvr, "kbind-team").Get(ctx, c.place, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %v", c.place, err)
		}
		o, err := resource(w.admin, c.gvr, c.ns).Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s/%s on the consumer: %v", c.ns, c.name, err)
		}
		l, a := p.GetLabels(), p.GetAnnotations()
		if l[kbindv1alpha1.KeptLabel] != kbindv1alpha1.KeptDeletionProtection || a[kbindv1alpha1.KeptByAnnotation] != "ClusterBinding/protected" ||
			l[kbindv1alpha1.ConsumerClusterUIDLabel] != clusterUID || a[kbindv1alpha1.ConsumerClusterUIDAnnotation] != clusterUID ||
			a[kbindv1alpha1.ConsumerObjectUIDAnnotation] != string(o.GetUID()) || !p.GetDeletionTimestamp().IsZero() {
			return fmt.Errorf("%s is not kept with its markers: labels %v, annotations %v", c.place, l, a)
		}
		return nil
	}
	synced := func(c copyRef) error {
		p, err := resource(w.provider, c.gvr, "kbind-team").Get(ctx, c.place, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %v", c.place, err)
		}
		if _, k := p.GetLabels()[kbindv1alpha1.KeptLabel]; k || !p.GetDeletionTimestamp().IsZero() {
			return fmt.Errorf("%s: kept or deleting: %v", c.place, p.GetLabels())
		}
		return nil
	}
	// The deselection grace is two binding resyncs; a margin of as many.
	keptWithin := func(what string, cs ...copyRef) {
		t.Helper()
		enginetest.EventuallyWithin(t, 6*bindingResync, what, func() error {
			for _, c := range cs {
				if err := kept(c); err != nil {
					return err
				}
			}
			return nil
		})
	}
	keptList := func() string {
		out, errOut, err := plugin(w.consumer, "kept", "clusterbinding/protected")
		if err != nil {
			t.Errorf("kubectl kbind kept: %v\n%s%s", err, out, errOut)
		}
		return out
	}

	// (a) the namespace's label goes: team-x is no longer selected.
	w.mustKubectl(binder, "label", "namespace", "team-x", "tenant-")
	keptWithin("team-x's copies kept", all[0], all[1])
	for _, c := range all[2:] {
		if err := synced(c); err != nil {
			t.Errorf("after the relabel: %v", err)
		}
	}
	if out := keptList(); !strings.Contains(out, "2 copies kept") || !strings.Contains(out, "kbind-team/team-x.w1") || !strings.Contains(out, "kbind-team/team-x.g1") {
		t.Errorf("kubectl kbind kept after the relabel:\n%s", out)
	}
	row("remove the label by which the protected ClusterBinding's `namespaceSelector` selects namespace team-x (`kubectl label namespace team-x tenant-`)",
		"allowed (an ordinary label edit), and nothing deleted: once the deselection persisted (two binding resyncs), the provider copies of team-x's Widget and Gadget are kept, labelled `core.kbind.io/kept: DeletionProtection` and annotated `core.kbind.io/kept-by: ClusterBinding/protected`, kbind's markers intact; `kubectl kbind kept clusterbinding/protected` lists them")

	// (b) the objectSelector narrows widgets to tier=gold: team-y/w3 is
	// no longer selected.
	w.mustKubectl(binder, "patch", "clusterbinding", "protected", "--type=json", "-p", `[{"op":"add","path":"/spec/apis/0/objectSelector","value":{"matchLabels":{"tier":"gold"}}}]`)
	keptWithin("team-y/w3's copy kept", all[3])
	for _, c := range []copyRef{all[2], all[4]} {
		if err := synced(c); err != nil {
			t.Errorf("after the objectSelector edit: %v", err)
		}
	}
	if out := keptList(); !strings.Contains(out, "3 copies kept") || !strings.Contains(out, "kbind-team/team-y.w3") {
		t.Errorf("kubectl kbind kept after the objectSelector edit:\n%s", out)
	}
	row("narrow an API's `objectSelector` (`tier: gold`) so that team-y's Widget w3 is no longer selected",
		"allowed (an ordinary spec edit, not an API removed), and nothing deleted: w3's provider copy is kept the same way; the still-selected copies sync on")

	// Nothing went: every copy is still there, kept or synced.
	for _, c := range all[:2] {
		if err := kept(c); err != nil {
			t.Errorf("at the end: %v", err)
		}
	}
	row("what the attempts above left", "every provider copy in place: team-x's and w3's kept with their markers, team-y's w2 and g2 synced; the ClusterBinding's `spec.apis` and protection unchanged")

	table := "| attempt | result |\n|---|---|\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("bulk deletion-protection table:\n%s", table)
	checkDocs(t, "bulk-deletion-protection-attacks", table)
}
