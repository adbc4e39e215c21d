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
	"errors"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/internal/doctor"
)

func TestParseBindingRef(t *testing.T) {
	for _, tc := range []struct {
		arg, ns    string
		kind, name string
		usage      string
	}{
		{"clusterbinding/provider", "", "ClusterBinding", "provider", ""},
		{"clusterbindings/provider", "", "ClusterBinding", "provider", ""},
		{"clusterbindings.core.kbind.io/provider", "", "ClusterBinding", "provider", ""},
		{"ClusterBinding/provider", "", "ClusterBinding", "provider", ""},
		{"binding/widgets", "team-a", "Binding", "widgets", ""},
		{"bindings.core.kbind.io/widgets", "team-a", "Binding", "widgets", ""},
		{"binding/widgets", "", "", "", "name the Binding's namespace with -n"},
		{"clusterbinding/provider", "team-a", "", "", "a ClusterBinding has no namespace; drop -n team-a"},
		{"provider", "", "", "", "name the binding as clusterbinding/NAME or binding/NAME -n NAMESPACE"},
		{"clusterbinding/", "", "", "", "name the binding as"},
		{"clusterbinding/a/b", "", "", "", "name the binding as"},
		{"connection/provider", "", "", "", "name the binding as"},
	} {
		kind, name, err := parseBindingRef(tc.arg, tc.ns)
		var u usageError
		switch {
		case tc.usage == "" && (err != nil || kind != tc.kind || name != tc.name):
			t.Errorf("%q -n %q: %s %s, %v; want %s %s", tc.arg, tc.ns, kind, name, err, tc.kind, tc.name)
		case tc.usage != "" && (!errors.As(err, &u) || !strings.Contains(err.Error(), tc.usage)):
			t.Errorf("%q -n %q: %v; want a usage error saying %q", tc.arg, tc.ns, err, tc.usage)
		}
	}
}

// TestKeptScope: only a copy with this consumer cluster's markers (label
// and annotation), an object UID, the kept label DeletionProtection and
// this binding's kept-by is one kept --delete may delete; forged marks on
// anything else never make it one.
func TestKeptScope(t *testing.T) {
	const us, them, by = "uid-us", "uid-them", "ClusterBinding/provider"
	scope := keptScope{ClusterUID: us, KeptBy: by}
	ours := func(edit func(l, a map[string]string)) *metav1.ObjectMeta {
		l := map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection, kbindv1alpha1.ConsumerClusterUIDLabel: us, kbindv1alpha1.ManagedLabel: "true"}
		a := map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: us, kbindv1alpha1.ConsumerObjectUIDAnnotation: "obj-1", kbindv1alpha1.KeptByAnnotation: by}
		if edit != nil {
			edit(l, a)
		}
		return &metav1.ObjectMeta{Labels: l, Annotations: a}
	}
	for _, tc := range []struct {
		name  string
		o     *metav1.ObjectMeta
		scope keptScope
		want  bool
	}{
		{"this binding's kept copy", ours(nil), scope, true},
		{"another consumer cluster's copy, forged kept label and kept-by", ours(func(l, a map[string]string) {
			l[kbindv1alpha1.ConsumerClusterUIDLabel], a[kbindv1alpha1.ConsumerClusterUIDAnnotation] = them, them
		}), scope, false},
		{"our label, another cluster's annotation", ours(func(_, a map[string]string) { a[kbindv1alpha1.ConsumerClusterUIDAnnotation] = them }), scope, false},
		{"our annotation, another cluster's label", ours(func(l, _ map[string]string) { l[kbindv1alpha1.ConsumerClusterUIDLabel] = them }), scope, false},
		{"a provider object without markers, forged kept label and kept-by", &metav1.ObjectMeta{
			Labels:      map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection},
			Annotations: map[string]string{kbindv1alpha1.KeptByAnnotation: by}}, scope, false},
		{"no object UID marker", ours(func(_, a map[string]string) { delete(a, kbindv1alpha1.ConsumerObjectUIDAnnotation) }), scope, false},
		{"not kept (synced)", ours(func(l, _ map[string]string) { delete(l, kbindv1alpha1.KeptLabel) }), scope, false},
		{"kept by an Orphan release", ours(func(l, _ map[string]string) { l[kbindv1alpha1.KeptLabel] = kbindv1alpha1.KeptOrphan }), scope, false},
		{"kept by another binding", ours(func(_, a map[string]string) { a[kbindv1alpha1.KeptByAnnotation] = "Binding/team-a/provider" }), scope, false},
		{"without kept-by", ours(func(_, a map[string]string) { delete(a, kbindv1alpha1.KeptByAnnotation) }), scope, false},
		{"a scope without the cluster UID keeps nothing", ours(func(l, a map[string]string) {
			l[kbindv1alpha1.ConsumerClusterUIDLabel], a[kbindv1alpha1.ConsumerClusterUIDAnnotation] = "", ""
		}), keptScope{KeptBy: by}, false},
	} {
		if got := tc.scope.keeps(tc.o); got != tc.want {
			t.Errorf("%s: keeps %v, want %v", tc.name, got, tc.want)
		}
	}
	if sel := scope.selector(); sel[kbindv1alpha1.KeptLabel] != kbindv1alpha1.KeptDeletionProtection || sel[kbindv1alpha1.ConsumerClusterUIDLabel] != us || len(sel) != 2 {
		t.Errorf("selector %v", sel)
	}
}

func TestKeptAPIs(t *testing.T) {
	got := keptAPIs(&kbindv1alpha1.BindingStatus{
		BoundAPIs: []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org"}, {Name: "acmes.acme.io", ProviderAPI: "sprockets.example.org"}},
		KeptCopies: []kbindv1alpha1.KeptCopies{
			{Name: "widgets.example.org", Count: 2},
			{Name: "gadgets.example.org", Count: 1},
			{Name: "acmes.acme.io", ProviderAPI: "sprockets.example.org", Count: 3},
		},
	})
	want := []keptAPI{{"acmes.acme.io", "sprockets.example.org"}, {"gadgets.example.org", "gadgets.example.org"}, {"widgets.example.org", "widgets.example.org"}}
	if len(got) != len(want) {
		t.Fatalf("keptAPIs %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("keptAPIs %v, want %v", got, want)
		}
	}
}

func TestWriteKept(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var out strings.Builder
	writeKept(&out, "ClusterBinding provider", "provider", []keptCopy{
		{API: "acmes.acme.io", Provider: "sprockets.example.org", Namespace: "kbind-team-a", Name: "default.s1", Created: now.Add(-90 * time.Minute)},
		{API: "widgets.example.org", Provider: "widgets.example.org", Namespace: "kbind-team-a", Name: "default.w1", Created: now.Add(-3 * 24 * time.Hour)},
	}, []string{"gadgets.example.org: the provider does not serve gadgets.example.org"},
		[]kbindv1alpha1.KeptCopies{{Name: "widgets.example.org", Count: 1}, {Name: "acmes.acme.io", Count: 1}, {Name: "gadgets.example.org", Count: 1}}, now)
	for _, want := range []string{
		"ClusterBinding provider (Connection provider): 2 copies kept on the provider by its deletion protection (its status counts 3).\n",
		"API                                  PROVIDER COPY            AGE\n",
		"acmes.acme.io←sprockets.example.org  kbind-team-a/default.s1  90m\n",
		"widgets.example.org                  kbind-team-a/default.w1  3d\n",
		"not read: gadgets.example.org: the provider does not serve gadgets.example.org\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStatusKeptTable: status lists, below the APIs, each binding's kept
// copies per API with the command that lists and deletes them; nothing
// when no binding kept any.
func TestStatusKeptTable(t *testing.T) {
	conns := []doctor.ConnectionSummary{{Name: "provider", Bindings: []doctor.BindingSummary{
		{Kind: "ClusterBinding", Name: "provider", Kept: []kbindv1alpha1.KeptCopies{
			{Name: "acmes.acme.io", ProviderAPI: "sprockets.example.org", Count: 1, Namespaces: []string{"kbind-team-a"}},
			{Name: "widgets.example.org", Count: 12, Namespaces: []string{"team-a", "team-b"}},
		}},
		{Kind: "Binding", Namespace: "team-a", Name: "gadgets", Kept: []kbindv1alpha1.KeptCopies{{Name: "clustergadgets.example.org", Count: 2}}},
		{Kind: "Binding", Namespace: "team-b", Name: "none"},
	}}}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 3, ' ', 0)
	keptTable(w, conns)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `
CONNECTION   BINDING                   KEPT COPIES OF                        COUNT   PROVIDER NAMESPACES   LIST (--delete: DELETE) THEM
provider     ClusterBinding/provider   acmes.acme.io←sprockets.example.org   1       kbind-team-a          kubectl kbind kept clusterbinding/provider
provider     ClusterBinding/provider   widgets.example.org                   12      team-a,team-b         kubectl kbind kept clusterbinding/provider
provider     Binding/team-a/gadgets    clustergadgets.example.org            2       -                     kubectl kbind kept binding/gadgets -n team-a
`
	if b.String() != want {
		t.Errorf("kept table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	keptTable(w, []doctor.ConnectionSummary{{Name: "provider", Bindings: []doctor.BindingSummary{{Kind: "ClusterBinding", Name: "provider"}}}})
	if err := w.Flush(); err != nil || b.String() != "" {
		t.Errorf("no kept copies: %q, %v", b.String(), err)
	}
}
