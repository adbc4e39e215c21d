package commands

import (
	"strings"
	"testing"
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
