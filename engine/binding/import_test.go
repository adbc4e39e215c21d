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
