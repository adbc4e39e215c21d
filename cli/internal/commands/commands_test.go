package commands

import (
	"strings"
	"testing"
	"text/tabwriter"

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
			{Kind: "ClusterBinding", Name: "provider", Ready: "True", APIs: []doctor.APISummary{{Name: "widgets.example.org", Total: 3, Synced: 2, Pending: 1}}},
			{Kind: "Binding", Namespace: "team-a", Name: "gadgets", Ready: "False", Reason: "APINotExported", APIs: []doctor.APISummary{{Name: "Gadget"}}},
		}}})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `CONNECTION   READY   ISOLATION           HEARTBEAT   EXPORTED APIS
provider     True    Namespace kbind-a   4s          2

CONNECTION   BINDING                   READY                    API                   OBJECTS   SYNCED   PENDING   FAILED   CONFLICTS
provider     ClusterBinding/provider   True                     widgets.example.org   3         2        1         0        0
provider     Binding/team-a/gadgets    False (APINotExported)   Gadget                0         0        0         0        0
`
	if b.String() != want {
		t.Errorf("status:\n%s\nwant:\n%s", b.String(), want)
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
