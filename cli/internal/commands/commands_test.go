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
	"strings"
	"testing"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
		// Each kind of usage error cobra reports itself exits 2 too.
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"grant", "a"}, `required flag(s) "apis" not set`},
		{[]string{"grant", "a", "--apis"}, "flag needs an argument"},
		{[]string{"grant", "a", "--apis", "w.example.org", "--duration", "soon"}, `invalid argument "soon" for "--duration"`},
		{[]string{"grant", "a", "--apis", "w.example.org", "--isolation", "tenant"}, "want Namespace, Prefixed or None"},
		{[]string{"grant", "a", "--apis", "w.example.org", "--schema-source", "crds"}, "want Auto, CRD or OpenAPI"},
		{[]string{"grant", "a", "--apis", "w.example.org", "--related", "secrets,pods"}, "want secrets or configmaps"},
		{[]string{"export", "--list", "-o", "wide"}, "want yaml or json"},
		{[]string{"doctor", "-o", "wide"}, "want json"},
		{[]string{"unbind"}, "takes 1 argument"},
		{[]string{"unbind", "a", "b"}, "takes 1 argument"},
		{[]string{"unbind", "a", "--yes=maybe"}, `invalid argument "maybe" for "-y, --yes"`},
		{[]string{"unbind", "a", "--timeout", "x"}, `invalid argument "x" for "--timeout"`},
	} {
		var out, errOut strings.Builder
		if code := Execute(tc.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("kubectl kbind %s: exit %d, %q; want 2 and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.want)
		}
	}
}

// TestEnumFlags: an enum flag's value is taken in any case and stored in
// its canonical spelling, for every command that has the flag.
func TestEnumFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		flag, want string
	}{
		{[]string{"grant", "--isolation", "prefixed"}, "isolation", "Prefixed"},
		{[]string{"grant", "--isolation", "NONE"}, "isolation", "None"},
		{[]string{"grant", "--schema-source", "openapi"}, "schema-source", "OpenAPI"},
		{[]string{"grant", "--related", "Secrets,CONFIGMAPS"}, "related", "[secrets,configmaps]"},
		{[]string{"grant", "--related", "Secrets", "--related", "configMaps"}, "related", "[secrets,configmaps]"},
		{[]string{"export", "-o", "JSON"}, "output", "json"},
		{[]string{"consumers", "-o", "Yaml"}, "output", "yaml"},
		{[]string{"status", "-o", "YAML"}, "output", "yaml"},
		{[]string{"doctor", "-o", "Json"}, "output", "json"},
	} {
		root := newRoot(&strings.Builder{}, &strings.Builder{})
		cmd, rest, err := root.Find(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := cmd.Flags().Lookup(tc.flag).Value.String(); got != tc.want {
			t.Errorf("%v: --%s is %q, want %q", tc.args, tc.flag, got, tc.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for server, want := range map[string]bool{
		"https://127.0.0.1:6443":           true,
		"https://127.1.2.3":                true,
		"https://[::1]:6443":               true,
		"https://localhost:6443":           true,
		"https://LOCALHOST.":               true,
		"https://api.localhost:443":        true,
		"127.0.0.1:6443":                   true,
		"https://10.0.0.1:6443":            false,
		"https://provider.example.org:443": false,
		"https://[2001:db8::1]:6443":       false,
		"https://128.0.0.1":                false,
	} {
		if got := loopback(server); got != want {
			t.Errorf("loopback(%q) = %v, want %v", server, got, want)
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

// TestNotAProvider: a cluster without consumers that serves kbind's
// Connections is a consumer cluster: consumers says so, and where to
// point it; a provider (no Connection API) is not.
func TestNotAProvider(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	consumerMapper := meta.NewDefaultRESTMapper(nil)
	consumerMapper.Add(kbindv1alpha1.GroupVersion.WithKind("Connection"), meta.RESTScopeRoot)
	for _, tc := range []struct {
		name   string
		mapper meta.RESTMapper
		objs   []client.Object
		want   string
	}{
		{"a provider", meta.NewDefaultRESTMapper(nil), nil, ""},
		{"a consumer without Connections", consumerMapper, nil, "kbind's Connection API is installed"},
		{"a consumer with one", consumerMapper, []client.Object{&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}}, "it holds 1 kbind Connection(s)"},
	} {
		c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(tc.mapper).WithObjects(tc.objs...).Build()
		err := notAProvider(context.Background(), c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "looks like a consumer cluster, not a provider") ||
			!strings.Contains(err.Error(), "point it at the provider's kubeconfig")):
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
