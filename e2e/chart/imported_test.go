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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// TestImportedObjectsPolicyOnARealAPIServer: with importedObjects.
// admissionPolicy, the API server refuses anyone but the konnector
// deleting an imported object, editing its spec or taking its owner
// annotation away, and putting that annotation on an object (created or
// updated) — the forgery that would make kbind delete a user's object;
// it still lets a user label an imported object or ask for a hand-over;
// the konnector (and the namespace controller) may do everything; a user's
// own objects are not matched.
func TestImportedObjectsPolicyOnARealAPIServer(t *testing.T) {
	t.Parallel()
	if _, err := render(t, map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org"}}, "importedObjects": map[string]any{"admissionPolicy": "yes"}}); err == nil {
		t.Error("importedObjects.admissionPolicy: a string is accepted")
	}
	objs, err := render(t, map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org"}}})
	if err != nil {
		t.Fatal(err)
	}
	for key := range objs {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") && strings.HasSuffix(key, "-imported-objects") {
			t.Errorf("the policy is rendered by default: %s", key)
		}
	}

	c := cluster.Get(t)
	kc := c.KubeconfigPath
	ctx := context.Background()
	run := func(args ...string) (string, error) { return testenv.Kubectl(ctx, kc, args...) }
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	apply := func(name, manifest string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		must("apply", "-f", file)
	}
	// The widgets live in a namespace of this run's own: the cluster is
	// shared, and a second run (-count) must not meet the first's.
	ns := uniqueNamespace(t, kc, "imported")
	apply("crd.yaml", harness.CRDManifest("widgets", "Widget", "example.org", "Namespaced", false))
	must("wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=30s")
	const konnector = "system:serviceaccount:kbind:konnector"
	apply("rbac.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widgets-all}
rules: [{apiGroups: [example.org], resources: ["*"], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: widgets-all}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widgets-all}
subjects:
- {kind: User, name: alice}
- {kind: ServiceAccount, name: konnector, namespace: kbind}
- {kind: ServiceAccount, name: namespace-controller, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widgets-no-delete}
rules: [{apiGroups: [example.org], resources: ["*"], verbs: [get, list, watch, create, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: widgets-no-delete}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widgets-no-delete}
subjects:
- {kind: User, name: bob}
`)
	rendered, err := render(t, map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org"}}, "importedObjects": map[string]any{"admissionPolicy": true}})
	if err != nil {
		t.Fatal(err)
	}
	var policy []string
	for key, obj := range rendered {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") && strings.HasSuffix(key, "-imported-objects") {
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			policy = append(policy, string(b))
		}
	}
	if len(policy) != 2 {
		t.Fatalf("rendered %d admission objects, want the policy and its binding", len(policy))
	}
	apply("policy.json", `{"apiVersion": "v1", "kind": "List", "items": [`+strings.Join(policy, ",")+`]}`)

	// The konnector makes imported objects; anyone else (the admin too) is
	// refused the owner annotation once the policy is loaded.
	widgets := filepath.Join(t.TempDir(), "widgets.yaml")
	if err := os.WriteFile(widgets, []byte(`apiVersion: example.org/v1alpha1
kind: Widget
metadata: {name: imported, annotations: {core.kbind.io/owner: provider}}
spec: {size: 1}
---
apiVersion: example.org/v1alpha1
kind: Widget
metadata: {name: imported-2, annotations: {core.kbind.io/owner: provider}}
spec: {size: 1}
---
apiVersion: example.org/v1alpha1
kind: Widget
metadata: {name: mine}
spec: {size: 1}
---
apiVersion: example.org/v1alpha1
kind: Widget
metadata: {name: colleagues}
spec: {size: 1}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	must("apply", "-f", widgets, "-n", ns, "--as", konnector)
	alice := []string{"--as", "alice", "-n", ns}
	refused := func(what string, args ...string) {
		t.Helper()
		enginetest.EventuallyWithin(t, 30*time.Second, what+" refused", func() error {
			out, err := run(append(args, alice...)...)
			if err == nil {
				return fmt.Errorf("allowed: %s", out)
			}
			if !strings.Contains(err.Error(), "this object is the provider's (core.kbind.io/owner: provider)") {
				return fmt.Errorf("refused for another reason: %v", err)
			}
			return nil
		})
	}
	// Until the API server has loaded the policy, an edit may pass: each
	// probe changes the size again, so that no probe is a no-op.
	probe := 1
	enginetest.EventuallyWithin(t, 30*time.Second, "a spec edit refused", func() error {
		probe++
		out, err := run(append([]string{"patch", "widget", "imported", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, probe)}, alice...)...)
		if err == nil {
			return fmt.Errorf("allowed: %s", out)
		}
		if !strings.Contains(err.Error(), "this object is the provider's (core.kbind.io/owner: provider)") {
			return fmt.Errorf("refused for another reason: %v", err)
		}
		return nil
	})
	refused("taking the owner annotation away", "annotate", "widget", "imported", "core.kbind.io/owner-")
	refused("a delete", "delete", "widget", "imported")
	// Forging the mark: refused, on create and on update.
	forged := filepath.Join(t.TempDir(), "forged.yaml")
	if err := os.WriteFile(forged, []byte("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: forged, annotations: {core.kbind.io/owner: provider}}\nspec: {size: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"create", "-f", forged},
		{"annotate", "widget", "mine", "core.kbind.io/owner=provider"},
	} {
		if out, err := run(append(args, alice...)...); err == nil || !strings.Contains(err.Error(), "only the konnector marks an object as the provider's") {
			t.Errorf("alice: kubectl %s: want the refusal, got %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, args := range [][]string{
		{"label", "widget", "imported", "team=a"},
		{"annotate", "widget", "imported", "core.kbind.io/hand-over=consumer"},
		{"patch", "widget", "mine", "--type=merge", "-p", `{"spec":{"size":2}}`},
		{"delete", "widget", "mine"},
	} {
		if out, err := run(append(args, alice...)...); err != nil {
			t.Errorf("alice: kubectl %s refused: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, args := range [][]string{
		{"patch", "widget", "imported", "--type=merge", "-p", `{"spec":{"size":3}}`},
		{"annotate", "widget", "imported", "core.kbind.io/owner-"},
		{"delete", "widget", "imported"},
	} {
		if out, err := run(append(args, "--as", konnector, "-n", ns)...); err != nil {
			t.Errorf("the konnector: kubectl %s refused: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// A release (hand-over to the provider) makes the object one kbind
	// deletes when the provider's goes: bob, who may update but not delete
	// widgets, is refused it, on update and on create (issue #51); alice,
	// who may delete, is not; other annotations stay bob's to set.
	bob := []string{"--as", "bob", "-n", ns}
	handOverRefusal := "only a user who may delete it may ask for that"
	bobsRelease := filepath.Join(t.TempDir(), "bobs.yaml")
	if err := os.WriteFile(bobsRelease, []byte("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: bobs, annotations: {core.kbind.io/hand-over: provider}}\nspec: {size: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"annotate", "widget", "colleagues", "core.kbind.io/hand-over=provider"},
		{"create", "-f", bobsRelease},
	} {
		if out, err := run(append(args, bob...)...); err == nil || !strings.Contains(err.Error(), handOverRefusal) {
			t.Errorf("bob: kubectl %s: want the refusal %q, got %v\n%s", strings.Join(args, " "), handOverRefusal, err, out)
		}
	}
	for _, args := range [][]string{
		{"annotate", "widget", "colleagues", "team=b"},
		{"annotate", "widget", "colleagues", "core.kbind.io/hand-over=consumer"},
	} {
		if out, err := run(append(args, bob...)...); err != nil {
			t.Errorf("bob: kubectl %s refused: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := run(append([]string{"annotate", "widget", "colleagues", "--overwrite", "core.kbind.io/hand-over=provider"}, alice...)...); err != nil {
		t.Errorf("alice, who may delete it, is refused the release: %v\n%s", err, out)
	}
	// The namespace controller empties a namespace being deleted.
	if out, err := run("delete", "widget", "imported-2", "-n", ns, "--as", "system:serviceaccount:kube-system:namespace-controller"); err != nil {
		t.Errorf("the namespace controller's delete refused: %v\n%s", err, out)
	}
}
