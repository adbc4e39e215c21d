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

package commands

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

func TestConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name           string
		yes, terminal  bool
		ask, usageFail bool
	}{
		{"--yes on a terminal: no question", true, true, false, false},
		{"--yes without a terminal (a script)", true, false, false, false},
		{"a terminal: ask", false, true, true, false},
		{"no terminal, no --yes: refused as a usage error", false, false, false, true},
	} {
		ask, err := confirmation(tc.yes, tc.terminal, "x asks before it deletes: pass --yes")
		var u usageError
		if ask != tc.ask || errors.As(err, &u) != tc.usageFail || (err != nil) != tc.usageFail {
			t.Errorf("%s: ask %v, err %v", tc.name, ask, err)
		}
		if err != nil && !strings.Contains(err.Error(), "pass --yes") {
			t.Errorf("%s: %v does not say to pass --yes", tc.name, err)
		}
	}
}

func TestConfirmed(t *testing.T) {
	for answer, want := range map[string]bool{
		"y\n": true, "Y\n": true, "yes\n": true, " YES \n": true, "y": true,
		"n\n": false, "\n": false, "": false, "no\n": false, "yep\n": false, "sure\n": false,
	} {
		if got := confirmed(strings.NewReader(answer)); got != want {
			t.Errorf("answer %q: confirmed %v, want %v", answer, got, want)
		}
	}
}

func TestCoverage(t *testing.T) {
	obj := func(ns, name string, annotations map[string]string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
	}
	imported := map[string]string{kbindv1alpha1.OwnerAnnotation: kbindv1alpha1.OwnerProvider}
	orphan := map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan}
	objs := []metav1.PartialObjectMetadata{obj("a", "1", nil), obj("a", "2", imported), obj("a", "3", orphan), obj("b", "4", orphan), obj("c", "5", nil)}
	notC := func(o metav1.PartialObjectMetadata) bool { return o.Namespace != "c" }
	for _, tc := range []struct {
		name            string
		covered         func(metav1.PartialObjectMetadata) bool
		policy          string
		total, imported int
		overrides       map[string]int
	}{
		{"every object, Delete: two override it with Orphan", func(metav1.PartialObjectMetadata) bool { return true }, "Delete", 5, 1, map[string]int{"Orphan": 2}},
		{"namespace c not covered", notC, "Delete", 4, 1, map[string]int{"Orphan": 2}},
		{"Orphan: an Orphan annotation is no override", notC, "Orphan", 4, 1, map[string]int{}},
	} {
		total, imp, over := coverage(objs, tc.covered, tc.policy)
		if total != tc.total || imp != tc.imported || !maps.Equal(over, tc.overrides) {
			t.Errorf("%s: %d, %d imported, overrides %v; want %d, %d, %v", tc.name, total, imp, over, tc.total, tc.imported, tc.overrides)
		}
	}
}

// TestWritePlan: what unbind shows for each deletion policy, with and
// without the consumer CRD going, counted here or from the status.
func TestWritePlan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		plan      unbindPlan
		want, not []string
	}{
		{"protected, Delete, the last ClusterBinding of the API", unbindPlan{Kind: "ClusterBinding", Name: "provider", Connection: "provider", Protected: true,
			APIs: []apiPlan{{Name: "widgets.example.org", Objects: 3, Imported: 1, Copies: 2, Policy: "Delete", DeletesCRD: true, AllObjects: 4}}},
			[]string{"ClusterBinding provider (Connection provider) is protected from deletion (spec.deletionProtection: true): unbind turns that off, then deletes it.",
				"consumer objects: 2 objects it covers: released, then deleted with the consumer CRD (below)",
				"imported copies: 1 copy of the provider's objects deleted on this cluster",
				"provider copies: 2 copies, deletionPolicy Delete: deleted before the binding goes",
				"the consumer CRD widgets.example.org is deleted (the last ClusterBinding of the API), and with it every object of it on this cluster: 4 objects"},
			[]string{"they stay", "OwnedByAnother"}},
		{"unprotected Binding, Orphan, annotated exceptions", unbindPlan{Kind: "Binding", Namespace: "team-a", Name: "widgets", Connection: "p",
			APIs: []apiPlan{{Name: "widgets.example.org", Objects: 1, Copies: 1, Pending: 2, Policy: "Orphan", Overrides: map[string]int{"Delete": 1}}}},
			[]string{"Binding team-a/widgets (Connection p) is not protected from deletion: unbind deletes it.",
				"consumer objects: 1 object it covers: they stay on this cluster, no longer synced",
				"provider copies: 1 copy, and 2 objects not synced yet that may have one, deletionPolicy Orphan: kept on the provider (labelled core.kbind.io/kept: Orphan); a consumer object of the same name created again later meets OwnedByAnother",
				"but 1 object annotated core.kbind.io/deletion-policy: Delete: deleted before the binding goes"},
			[]string{"consumer CRD", "imported"}},
		{"Foreground, counted from the status", unbindPlan{Kind: "ClusterBinding", Name: "x", Connection: "p",
			APIs: []apiPlan{{Name: "things.example.org", Provider: "widgets.example.org", Counted: "from the binding's status: the API is not served on this cluster", Objects: 5, Copies: 5, Policy: "Foreground"}}},
			[]string{"things.example.org (the provider's widgets.example.org):",
				"consumer objects: 5 objects it covers (from the binding's status: the API is not served on this cluster)",
				"deletionPolicy Foreground: deleted with foreground propagation"}, nil},
		{"held while deleting, nothing bound yet", unbindPlan{Kind: "ClusterBinding", Name: "x", Connection: "p", Protected: true, Deleting: true, NotInStatus: []string{"widgets.example.org"}, RelatedCopies: 2},
			[]string{"is being deleted and held by its deletion protection: unbind turns spec.deletionProtection off, which lets the deletion proceed.",
				"widgets.example.org: not in the binding's status yet, nothing counted",
				"related Secrets and ConfigMaps: 2 copies the binding made deleted"}, nil},
	} {
		var b strings.Builder
		writePlan(&b, tc.plan)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, w, b.String())
			}
		}
		for _, n := range tc.not {
			if strings.Contains(b.String(), n) {
				t.Errorf("%s: says %q:\n%s", tc.name, n, b.String())
			}
		}
	}
}

// sharedConsumer is a consumer cluster with kbind's CRDs and Widgets (no
// konnector: nothing holds a deleted binding), for the unbind tests.
var sharedConsumer = testenv.SharedCluster("consumer", testenv.ClusterOptions{InstallKbindCRDs: true,
	CRDs: []*apiextensionsv1.CustomResourceDefinition{enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false)}})

// withStdin runs the test with answer on a terminal (terminal true) or a
// pipe.
func withStdin(t *testing.T, answer string, terminal bool) {
	oldIn, oldTerm := stdin, stdinIsTerminal
	stdin, stdinIsTerminal = strings.NewReader(answer), func() bool { return terminal }
	t.Cleanup(func() { stdin, stdinIsTerminal = oldIn, oldTerm })
}

// TestUnbindOnAPIServer: unbind of a protected ClusterBinding shows the
// counts of the API server's objects and of the binding's status, refuses
// without a terminal and without --yes, changes nothing on "n", and on
// "y" turns protection off and deletes; an unprotected Binding with
// --yes is deleted without a question. Not parallel: it sets stdin.
func TestUnbindOnAPIServer(t *testing.T) {
	consumer := sharedConsumer.Get(t)
	ctx, c := consumerClient(t)
	ns := testenv.UniqueName("unbind")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for name, annotations := range map[string]map[string]string{"w1": nil,
		"w2": {kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan},
		"w3": {kbindv1alpha1.OwnerAnnotation: kbindv1alpha1.OwnerProvider}} {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.org/v1alpha1")
		w.SetKind("Widget")
		w.SetNamespace(ns)
		w.SetName(name)
		w.SetAnnotations(annotations)
		if err := c.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	name := testenv.UniqueName("provider")
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}},
		DeletionProtection: true}}
	if err := c.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	cb.Status.BoundAPIs = []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org", UnbindDeletesCRD: true,
		Instances: &kbindv1alpha1.InstanceCounts{Total: 3, Synced: 3, Imported: 1}}}
	if err := c.Status().Update(ctx, cb); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig", consumer.KubeconfigPath, "unbind", name}

	run := func(args ...string) (string, string, int) {
		var out, errOut strings.Builder
		code := Execute(args, &out, &errOut)
		return out.String(), errOut.String(), code
	}
	stillProtected := func(when string) {
		t.Helper()
		got := &kbindv1alpha1.ClusterBinding{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil || !got.Spec.DeletionProtection || !got.DeletionTimestamp.IsZero() {
			t.Errorf("%s: the ClusterBinding is not left as it was: %v %+v", when, err, got.ObjectMeta)
		}
	}

	withStdin(t, "y\n", false)
	out, errOut, code := run(args...)
	t.Logf("$ kubectl kbind unbind %s\n%s%s", name, out, errOut)
	if code != exitUsage || !strings.Contains(errOut, "pass --yes") {
		t.Errorf("without a terminal: exit %d, %q", code, errOut)
	}
	for _, want := range []string{"is protected from deletion", "consumer objects: 2 objects it covers", "imported copies: 1 copy",
		"provider copies: 2 copies, deletionPolicy Delete", "but 1 object annotated core.kbind.io/deletion-policy: Orphan: kept",
		"the consumer CRD widgets.example.org is deleted (the last ClusterBinding of the API), and with it every object of it on this cluster: 3 objects"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	stillProtected("without a terminal")

	withStdin(t, "n\n", true)
	if out, errOut, code := run(args...); code != exitFailed || !strings.Contains(out, "Unbind ClusterBinding "+name+"? [y/N]") || !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("answered n: exit %d\n%s%s", code, out, errOut)
	}
	stillProtected("answered n")

	withStdin(t, "y\n", true)
	if out, errOut, code := run(args...); code != 0 || !strings.Contains(out, "deletion protection turned off") || !strings.Contains(out, "ClusterBinding "+name+" deleted") {
		t.Errorf("answered y: exit %d\n%s%s", code, out, errOut)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("answered y: the ClusterBinding is still there (%v)", err)
	}
	// It deleted nothing else itself: the Widgets and their CRD stay.
	widgets := &unstructured.UnstructuredList{}
	widgets.SetAPIVersion("example.org/v1alpha1")
	widgets.SetKind("WidgetList")
	if err := c.List(ctx, widgets, client.InNamespace(ns)); err != nil || len(widgets.Items) != 3 {
		t.Errorf("the Widgets after unbind: %d, %v; want the 3, untouched", len(widgets.Items), err)
	}

	// An unprotected Binding with --yes: no question, even on a terminal.
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}},
		DeletionPolicy: kbindv1alpha1.DeletionPolicy(kbindv1alpha1.DeletionPolicyOrphan)}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	withStdin(t, "", true)
	out, errOut, code = run("--kubeconfig", consumer.KubeconfigPath, "unbind", "widgets", "-n", ns, "--yes", "--wait")
	if code != 0 || strings.Contains(out, "[y/N]") || strings.Contains(out, "protection turned off") || !strings.Contains(out, "is not protected from deletion") ||
		!strings.Contains(out, "widgets.example.org: not in the binding's status yet") || !strings.Contains(out, "Binding "+ns+"/widgets is gone") {
		t.Errorf("unbind -n %s widgets --yes --wait: exit %d\n%s%s", ns, code, out, errOut)
	}
	if _, errOut, code := run("--kubeconfig", consumer.KubeconfigPath, "unbind", "widgets", "-n", ns, "--yes"); code != exitFailed || !strings.Contains(errOut, "there is no Binding widgets in namespace "+ns) {
		t.Errorf("unbind of a Binding that is gone: exit %d, %q", code, errOut)
	}
}

// TestCRDGoes: unbind reads on the consumer whether the ClusterBinding's
// deletion deletes the consumer CRD (a konnector older than
// unbindDeletesCRD never says): only kbind's CRD for its Connection,
// under a pullPolicy other than All and None, that no other binding lists.
func TestCRDGoes(t *testing.T) {
	ctx, c := consumerClient(t)
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("gizmos")}, Spec: kbindv1alpha1.ConnectionSpec{
		KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: "kbind", Name: "gizmos-kubeconfig"}}}
	if err := c.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	crd := enginetest.CRD("gizmos", "gizmo", "Gizmo", "example.org", apiextensionsv1.NamespaceScoped, false)
	crd.Labels = map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}
	crd.Annotations = map[string]string{kbindv1alpha1.ConnectionAnnotation: conn.Name, kbindv1alpha1.SchemaHashAnnotation: "sha256:0123456789abcdef"}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	binding := func(name string) kbindv1alpha1.BindingSpec {
		return kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: name}, APIs: []kbindv1alpha1.APIReference{{Name: "gizmos.example.org"}}}
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("gizmos")}, Spec: binding(conn.Name)}
	if err := c.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if !crdGoes(ctx, c, cb, "gizmos.example.org") {
		t.Error("the only ClusterBinding of kbind's CRD: crdGoes false")
	}
	if crdGoes(ctx, c, cb, "widgets.example.org") {
		t.Error("a CRD kbind did not create: crdGoes true")
	}
	other := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("gizmos")}, Spec: binding(conn.Name)}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if crdGoes(ctx, c, cb, "gizmos.example.org") {
		t.Error("another ClusterBinding lists the API: crdGoes true")
	}
	if err := c.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	conn.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyAll
	if err := c.Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if crdGoes(ctx, c, cb, "gizmos.example.org") {
		t.Error("pullPolicy All: crdGoes true")
	}
	foreign := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("gizmos")}, Spec: binding("another")}
	if crdGoes(ctx, c, foreign, "gizmos.example.org") {
		t.Error("the CRD of another Connection: crdGoes true")
	}
}

// TestUnprotect: the protection goes off although the konnector wrote the
// binding's status since it was shown, and stays on when its spec
// changed (what was confirmed is no longer what would go).
func TestUnprotect(t *testing.T) {
	ctx, c := consumerClient(t)
	newProtected := func() (shown, live *kbindv1alpha1.ClusterBinding) {
		cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("unprotect")}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}, DeletionProtection: true}}
		if err := c.Create(ctx, cb); err != nil {
			t.Fatal(err)
		}
		return cb.DeepCopy(), cb
	}
	isProtected := func(name string) bool {
		got := &kbindv1alpha1.ClusterBinding{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		return got.Spec.DeletionProtection
	}

	shown, live := newProtected()
	live.Status.BoundAPIs = []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org", Instances: &kbindv1alpha1.InstanceCounts{Total: 1, Synced: 1}}}
	if err := c.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := unprotect(ctx, c, shown, "ClusterBinding "+shown.Name); err != nil || isProtected(shown.Name) {
		t.Errorf("status written since it was shown: %v, protected %v", err, isProtected(shown.Name))
	}

	shown, live = newProtected()
	live.Spec.DeletionPolicy = kbindv1alpha1.DeletionPolicy(kbindv1alpha1.DeletionPolicyOrphan)
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := unprotect(ctx, c, shown, "ClusterBinding "+shown.Name); err == nil || !strings.Contains(err.Error(), "changed since it was read") || !isProtected(shown.Name) {
		t.Errorf("spec changed since it was shown: %v, protected %v", err, isProtected(shown.Name))
	}
}

// consumerClient is a client of the package's shared consumer API server
// with kbind's scheme.
func consumerClient(t *testing.T) (context.Context, client.Client) {
	t.Helper()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(sharedConsumer.Get(t).Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return context.Background(), c
}
