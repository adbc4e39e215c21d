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
	"strings"
	"testing"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/internal/doctor"
)

// TestUsage: mistakes in the command line exit 2 with a message, before
// any cluster is contacted.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grant"}, "takes 1 argument"},
		{[]string{"grant", "a", "b", "--apis", "w.example.org"}, "takes 1 argument"},
		{[]string{"revoke"}, "takes 1 argument"},
		{[]string{"export"}, "name at least one CRD"},
		{[]string{"export", "--list", "widgets.example.org"}, "--list takes no CRD names"},
		{[]string{"export", "-o", "json", "widgets.example.org"}, "-o applies to --list only"},
		{[]string{"grant", "a", "--bogus"}, "unknown flag"},
		{[]string{"grant", "a", "--apis", "w.example.org", "--duration", "5m"}, "a token lives at least 10m0s"},
		{[]string{"doctor", "a", "b"}, "at most one Connection"},
		{[]string{"doctor", "-o", "yaml"}, `want json`},
		{[]string{"status", "x"}, "takes 0 argument"},
		{[]string{"status", "-o", "wide"}, "want yaml or json"},
		{[]string{"consumers", "a", "b"}, "at most one consumer name"},
		{[]string{"consumers", "-o", "wide"}, "want yaml or json"},
	} {
		var out, errOut strings.Builder
		if code := Execute(tc.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("kubectl kbind %s: exit %d, %q; want 2 and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.want)
		}
	}
}

func TestHelpHasExamples(t *testing.T) {
	root := newRoot(&strings.Builder{}, &strings.Builder{})
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" {
			t.Errorf("%s --help has no examples", c.Name())
		}
	}
}

func TestStatusTables(t *testing.T) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 3, ' ', 0)
	statusTables(w, []doctor.ConnectionSummary{{Name: "provider", Ready: "True", Isolation: "Namespace kbind-a", Heartbeat: "4s", Exported: 2,
		Bindings: []doctor.BindingSummary{
			{Kind: "ClusterBinding", Name: "provider", Ready: "True", APIs: []doctor.APISummary{{Name: "widgets.example.org", Routes: "namespaces region=east", Total: 3, Synced: 2, Pending: 1, Deleting: 1, Imported: 1}}},
			{Kind: "Binding", Namespace: "team-a", Name: "gadgets", Ready: "False", Reason: "APINotExported", APIs: []doctor.APISummary{{Name: "Gadget", Routes: "namespace team-a"}}},
		}}})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `CONNECTION   READY   ISOLATION           HEARTBEAT   EXPORTED APIS
provider     True    Namespace kbind-a   4s          2

CONNECTION   BINDING                   READY                    API                   ROUTES                   OBJECTS   SYNCED   PENDING   FAILED   CONFLICTS   DELETING   IMPORTED
provider     ClusterBinding/provider   True                     widgets.example.org   namespaces region=east   3         2        1         0        0           1          1
provider     Binding/team-a/gadgets    False (APINotExported)   Gadget                namespace team-a         0         0        0         0        0           0          0
`
	if b.String() != want {
		t.Errorf("status:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestRoutes(t *testing.T) {
	east := &metav1.LabelSelector{MatchLabels: map[string]string{"region": "east"}}
	gold := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}}}}
	for _, tc := range []struct {
		kind, namespace string
		spec            kbindv1alpha1.BindingSpec
		api             kbindv1alpha1.APIReference
		want            string
	}{
		{"ClusterBinding", "", kbindv1alpha1.BindingSpec{}, kbindv1alpha1.APIReference{}, "every namespace"},
		{"ClusterBinding", "", kbindv1alpha1.BindingSpec{NamespaceSelector: east}, kbindv1alpha1.APIReference{}, "namespaces region=east"},
		{"ClusterBinding", "", kbindv1alpha1.BindingSpec{NamespaceSelector: &metav1.LabelSelector{}}, kbindv1alpha1.APIReference{}, "namespaces <everything>"},
		{"ClusterBinding", "", kbindv1alpha1.BindingSpec{NamespaceSelector: east}, kbindv1alpha1.APIReference{ObjectSelector: gold}, "namespaces region=east, objects tier in (gold)"},
		{"Binding", "team-a", kbindv1alpha1.BindingSpec{}, kbindv1alpha1.APIReference{}, "namespace team-a"},
		{"Binding", "team-a", kbindv1alpha1.BindingSpec{}, kbindv1alpha1.APIReference{ObjectSelector: gold}, "namespace team-a, objects tier in (gold)"},
	} {
		if got := doctor.Routes(tc.kind, tc.namespace, tc.spec, tc.api); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.kind, tc.namespace, got, tc.want)
		}
	}
}

// TestVersion: --version prints the build's version line, as the
// konnector's does (doctor compares the two).
func TestVersion(t *testing.T) {
	var out, errOut strings.Builder
	if code := Execute([]string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "kubectl-kbind dev (revision ") {
		t.Errorf("--version: exit %d, %q %q", code, out.String(), errOut.String())
	}
}
