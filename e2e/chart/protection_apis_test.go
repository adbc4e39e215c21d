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

package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// kbindCRDs serializes applyKbindCRDs and applyPolicy: two tests creating
// the same object at once make one kubectl apply fail with AlreadyExists.
var kbindCRDs sync.Mutex

// applyKbindCRDs applies the kbind CRDs as the quickstart or `kubectl
// apply` installs them (without Helm's labels) on the shared cluster and
// waits until they are served.
func applyKbindCRDs(t *testing.T, kubeconfig string) {
	t.Helper()
	kbindCRDs.Lock()
	defer kbindCRDs.Unlock()
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(chartDir, "files", "crds")},
		{"wait", "--for=condition=Established", "crd/connections.core.kbind.io", "crd/clusterbindings.core.kbind.io", "crd/bindings.core.kbind.io", "--timeout=60s"},
	} {
		if out, err := testenv.Kubectl(context.Background(), kubeconfig, args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// applyPolicy applies the rendered deletion-protection policy on the
// shared cluster, one test at a time (two tests creating the same policy
// at once make one kubectl apply fail with AlreadyExists).
func applyPolicy(t *testing.T, kubeconfig, policy string) {
	t.Helper()
	kbindCRDs.Lock()
	defer kbindCRDs.Unlock()
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(context.Background(), kubeconfig, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", file, err, out)
	}
}

// shorten keeps a kubectl message readable when the edit it echoes is a
// list of 1024 APIs.
func shorten(s string) string {
	if len(s) > 2000 {
		return s[:1000] + " … " + s[len(s)-1000:]
	}
	return s
}

// TestDeletionProtectionAPIsPolicyOnARealAPIServer: with the chart's
// policy loaded, an edit that removes an API from a protected binding's
// spec.apis (BIND-5) is refused with the APIs and their counts, what the
// konnector would do without the policy and how to proceed — the same
// edit turning protection off too is refused (the stored object's
// protection counts), a projected API is named by its consumer API;
// status writes, other spec edits, a removal from an
// unprotected binding, and protection off then the removal in two edits
// all pass.
func TestDeletionProtectionAPIsPolicyOnARealAPIServer(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	kc := c.KubeconfigPath
	k := kubectlAt{t: t, kubeconfig: kc}
	run, must, apply := k.run, k.must, k.apply
	applyKbindCRDs(t, kc)

	// erin may edit bindings and their status, nothing more: RBAC lets
	// her remove APIs, the policy does not.
	ns := uniqueNamespace(t, kc, "protected-apis")
	erin := testenv.UniqueName("erin")
	apply(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- {apiGroups: [core.kbind.io], resources: [clusterbindings, bindings, clusterbindings/status, bindings/status], verbs: [get, list, watch, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]
`, erin))
	asErin := []string{"--as", erin}

	name := testenv.UniqueName("apis")
	apply(fmt.Sprintf(`apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: %[1]s}
spec:
  connectionRef: {name: %[1]s}
  apis:
  - {name: widgets.example.org}
  - {name: gadgets.example.org}
  - {name: sprockets.example.org, projection: {group: acme.io, kind: AcmeSprocket}}
  deletionProtection: true
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: %[1]s-open}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: widgets.example.org}, {name: gadgets.example.org}]
---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: things.example.org}, {name: gizmos.example.org}]
  deletionProtection: true
`, name, ns))
	cb := []string{"clusterbindings.core.kbind.io", name}
	b := []string{"bindings.core.kbind.io", name, "-n", ns}
	status := func(ref []string, boundAPIs string) {
		t.Helper()
		must(append(append(append([]string{"patch"}, ref...), "--subresource=status", "--type=merge", "-p", `{"status":{"boundAPIs":`+boundAPIs+`}}`), asErin...)...)
	}
	// What the konnector reports (no konnector runs here). A status write
	// is never the policy's.
	status(cb, `[
		{"name":"acmesprockets.acme.io","providerAPI":"sprockets.example.org","instances":{"total":2,"synced":2,"pending":0,"failed":0}},
		{"name":"gadgets.example.org","instances":{"total":3,"synced":3,"pending":0,"failed":0}},
		{"name":"widgets.example.org","instances":{"total":12,"synced":10,"pending":1,"failed":1}}]`)
	status(b, `[{"name":"gizmos.example.org","instances":{"total":5,"synced":4,"pending":1,"failed":0}}]`)

	policy, _ := protectionPolicy(t, bound("example.org"))
	applyPolicy(t, kc, policy)
	setAPIs := func(ref []string, extra, apis string) (string, error) {
		return run(append(append(append([]string{"patch"}, ref...), "--type=merge", "-p", `{"spec":{`+extra+`"apis":`+apis+`}}`), asErin...)...)
	}
	withoutGadgets := `[{"name":"widgets.example.org"},{"name":"sprockets.example.org","projection":{"group":"acme.io","kind":"AcmeSprocket"}}]`
	enginetest.EventuallyWithin(t, 30*time.Second, "the API-removal policy loaded", func() error {
		out, err := run(append(append([]string{"patch", "--dry-run=server"}, cb...), append([]string{"--type=merge", "-p", `{"spec":{"apis":` + withoutGadgets + `}}`}, asErin...)...)...)
		if err == nil {
			return fmt.Errorf("a dry-run removal of an API from a protected ClusterBinding is allowed: %s", out)
		}
		if !strings.Contains(out+err.Error(), "may not remove") {
			return fmt.Errorf("refused for another reason: %v\n%s", err, out)
		}
		return nil
	})

	unprotect := func(ref string) string {
		return fmt.Sprintf(`kubectl patch %s --type=merge -p '{"spec":{"deletionProtection":false}}'`, ref)
	}
	specOf := func(ref []string) string {
		return must(append(append([]string{"get"}, ref...), "-o", "jsonpath={.spec.deletionProtection} {.spec.apis[*].name}")...)
	}
	refused := func(what string, ref []string, extra, apis string, fragments ...string) {
		t.Helper()
		before := specOf(ref)
		out, err := setAPIs(ref, extra, apis)
		if err == nil {
			t.Errorf("%s: allowed: %s", what, shorten(out))
			return
		}
		for _, f := range fragments {
			if !strings.Contains(out, f) {
				t.Errorf("%s: kubectl's error lacks %q:\n%s", what, f, shorten(out))
			}
		}
		if after := specOf(ref); after != before {
			t.Errorf("%s: the spec changed after the refusal: %q, was %q", what, after, before)
		}
		t.Logf("%s: kubectl patch says (%d characters):\n%s", what, len(out), shorten(out))
	}
	allowed := func(what string, ref []string, extra, apis string) {
		t.Helper()
		if out, err := setAPIs(ref, extra, apis); err != nil {
			t.Errorf("%s: refused: %s", what, shorten(out))
		}
	}

	refused("an API removed from a protected ClusterBinding", cb, "", withoutGadgets,
		"ValidatingAdmissionPolicy 'konnector-deletion-protection-apis'",
		"ClusterBinding "+name+" has deletionProtection: true, so this edit may not remove gadgets.example.org (3 objects, 3 synced) from spec.apis.",
		"Without this policy the konnector would keep their provider copies (labelled core.kbind.io/kept: DeletionProtection), not delete them; with protection off, removing an API deletes its provider copies.",
		"To remove it anyway, turn protection off in an edit of its own first ("+unprotect("clusterbindings.core.kbind.io "+name)+"), then remove the API in another edit.")
	refused("two APIs removed, the projected one by its consumer name", cb, "", `[{"name":"widgets.example.org"}]`,
		"may not remove gadgets.example.org (3 objects, 3 synced), acmesprockets.acme.io (2 objects, 2 synced) from spec.apis.")
	refused("protection off and an API removed in one edit", cb, `"deletionProtection":false,`, withoutGadgets,
		"may not remove gadgets.example.org (3 objects, 3 synced) from spec.apis.")
	refused("an API removed from a protected Binding", b, "", `[{"name":"things.example.org"}]`,
		"Binding "+ns+"/"+name+" has deletionProtection: true, so this edit may not remove gizmos.example.org (5 objects, 4 synced) from spec.apis.",
		unprotect("bindings.core.kbind.io "+name+" -n "+ns))
	refused("an API the status does not report yet", b, "", `[{"name":"gizmos.example.org"}]`,
		"may not remove things.example.org (not in the status yet) from spec.apis.")

	// Other spec edits pass: an objectSelector, an API added, the order,
	// a label.
	allowed("an objectSelector set", cb, "",
		`[{"name":"widgets.example.org","objectSelector":{"matchLabels":{"tier":"gold"}}},{"name":"gadgets.example.org"},{"name":"sprockets.example.org","projection":{"group":"acme.io","kind":"AcmeSprocket"}}]`)
	allowed("an API added and the order changed", cb, "",
		`[{"name":"gadgets.example.org"},{"name":"widgets.example.org"},{"name":"sprockets.example.org","projection":{"group":"acme.io","kind":"AcmeSprocket"}},{"name":"doohickeys.example.org"}]`)
	must(append(append([]string{"label"}, cb...), append([]string{"team=a"}, asErin...)...)...)
	status(cb, `[{"name":"gadgets.example.org","instances":{"total":1,"synced":1,"pending":0,"failed":0}}]`)

	// The largest binding the CRD admits (1024 APIs): removing one, or
	// all but one, is refused within the API server's CEL cost limits,
	// naming the first 8 and how many more; adding one passes.
	var many []string
	for i := range 1024 {
		many = append(many, fmt.Sprintf(`{"name":"api%04d.example.org"}`, i))
	}
	apply(fmt.Sprintf("apiVersion: core.kbind.io/v1alpha1\nkind: ClusterBinding\nmetadata: {name: %s-many}\nspec:\n  connectionRef: {name: %s}\n  apis: [%s]\n  deletionProtection: true\n",
		name, name, strings.Join(many, ", ")))
	manyRef := []string{"clusterbindings.core.kbind.io", name + "-many"}
	refused("one API removed from a ClusterBinding of 1024", manyRef, "", "["+strings.Join(many[1:], ",")+"]",
		"may not remove api0000.example.org (not in the status yet) from spec.apis.")
	refused("1023 APIs removed from a ClusterBinding of 1024", manyRef, "", "["+many[0]+"]",
		"may not remove api0001.example.org (not in the status yet), api0002.example.org (not in the status yet)",
		"api0008.example.org (not in the status yet), and 1015 more APIs from spec.apis.")
	allowed("an objectSelector on the last of 1024 APIs", manyRef, "",
		"["+strings.Join(many[:1023], ",")+`,{"name":"api1023.example.org","objectSelector":{"matchLabels":{"a":"b"}}}]`)

	// Unprotected: removed at once.
	allowed("an API removed from an unprotected ClusterBinding", []string{"clusterbindings.core.kbind.io", name + "-open"}, "", `[{"name":"widgets.example.org"}]`)
	// Protection off in an edit of its own, then the removal: both pass.
	must(append(append([]string{"patch"}, cb...), append([]string{"--type=merge", "-p", `{"spec":{"deletionProtection":false}}`}, asErin...)...)...)
	allowed("an API removed after protection went off in its own edit", cb, "", `[{"name":"widgets.example.org"}]`)
	must(append(append([]string{"patch"}, b...), append([]string{"--type=merge", "-p", `{"spec":{"deletionProtection":false}}`}, asErin...)...)...)
	allowed("an API removed from a Binding after protection went off", b, "", `[{"name":"things.example.org"}]`)
	// Turning protection on while removing an API is not refused: the
	// stored object was not protected.
	allowed("protection on and an API removed in one edit", []string{"clusterbindings.core.kbind.io", name + "-open"}, `"deletionProtection":true,`, `[{"name":"gadgets.example.org"}]`)
}
