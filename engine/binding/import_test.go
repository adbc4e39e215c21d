package binding

import (
	"strings"
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
)

// TestImportProblem: providerObjects Import is refused, with a message
// that says why, under None isolation and for a cluster-scoped API; it is
// allowed for a namespaced API under Namespace or Prefixed isolation, and
// Ignore (or unset) is never a problem.
func TestImportProblem(t *testing.T) {
	imports := kbindv1alpha1.APIReference{Name: "widgets.example.org", ProviderObjects: kbindv1alpha1.ProviderObjectsImport}
	ignores := kbindv1alpha1.APIReference{Name: "widgets.example.org", ProviderObjects: kbindv1alpha1.ProviderObjectsIgnore}
	namespaced := kbindv1alpha1.ExportedAPI{Scope: kbindv1alpha1.APIScopeNamespaced}
	cluster := kbindv1alpha1.ExportedAPI{Scope: kbindv1alpha1.APIScopeCluster}
	none := isolation.For(kbindv1alpha1.Isolation{})
	ns := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"})
	prefixed := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"})
	for _, tc := range []struct {
		name   string
		api    kbindv1alpha1.APIReference
		export kbindv1alpha1.ExportedAPI
		iso    isolation.Mapping
		want   string // "" when allowed
	}{
		{"Namespace isolation, namespaced API", imports, namespaced, ns, ""},
		{"Prefixed isolation, namespaced API", imports, namespaced, prefixed, ""},
		{"None isolation: any tenant could plant objects", imports, namespaced, none, "needs a Connection with Namespace or Prefixed isolation"},
		{"a cluster-scoped API says nothing of its consumer", imports, cluster, prefixed, "is for namespaced APIs"},
		{"Ignore is never refused", ignores, cluster, none, ""},
		{"unset is never refused", kbindv1alpha1.APIReference{Name: "widgets.example.org"}, namespaced, none, ""},
	} {
		got := importProblem(tc.api, tc.export, tc.iso)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || (got != "" && !strings.HasPrefix(got, "widgets.example.org: ")) {
			t.Errorf("%s: importProblem = %q, want one naming the API and containing %q", tc.name, got, tc.want)
		}
	}
}
