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
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// protectionPolicy is the rendered deletion-protection policy of values:
// its ValidatingAdmissionPolicies and their bindings, as a kubectl List.
func protectionPolicy(t *testing.T, values map[string]any) (string, int) {
	t.Helper()
	objs, err := render(t, values)
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for key, obj := range objs {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") && strings.Contains(key, "-deletion-protection") {
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, string(b))
		}
	}
	return `{"apiVersion": "v1", "kind": "List", "items": [` + strings.Join(items, ",") + `]}`, len(items)
}

// TestDeletionProtectionPolicyRendering: the policy is on by default, the
// value off renders none, and the schema refuses a value of the wrong
// type.
func TestDeletionProtectionPolicyRendering(t *testing.T) {
	t.Parallel()
	if _, n := protectionPolicy(t, bound("example.org")); n != 6 {
		t.Errorf("defaults render %d deletion-protection admission objects, want the three policies and their bindings", n)
	}
	off := bound("example.org")
	off["deletionProtection"] = map[string]any{"policy": false}
	if _, n := protectionPolicy(t, off); n != 0 {
		t.Errorf("deletionProtection.policy=false renders %d deletion-protection admission objects", n)
	}
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"policy not bool":  {map[string]any{"deletionProtection": map[string]any{"policy": "yes"}}, "at '/deletionProtection/policy': got string, want boolean"},
		"typo in its keys": {map[string]any{"deletionProtection": map[string]any{"enabled": true}}, "additional properties 'enabled' not allowed"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("expected a schema error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestDeletionProtectionPolicyOnARealAPIServer: with the chart's policy
// loaded, a real `kubectl delete` of a protected ClusterBinding, Binding,
// Connection or labelled Secret is refused, with what would go (the counts
// of the binding's status, the consumer CRD it would take with it) and the
// ways forward in kubectl's error; an unprotected one is deleted; after
// `kubectl patch … deletionProtection:false` (or the label removed) the
// delete goes through; the garbage collector and the namespace controller
// are never refused. On a cluster whose kbind CRDs were applied without
// Helm, `helm install` fails unless installCRDs=false.
func TestDeletionProtectionPolicyOnARealAPIServer(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	kc := c.KubeconfigPath
	k := kubectlAt{t: t, kubeconfig: kc}
	run, must, apply := k.run, k.must, k.apply

	// The kbind CRDs as the quickstart or `kubectl apply` installs them:
	// without Helm's labels.
	applyKbindCRDs(t, kc)
	ensureNamespace(t, kc, "kbind")
	cfg, err := harness.HelmConfig(kc, "", "kbind")
	if err != nil {
		t.Fatal(err)
	}
	install := func(values map[string]any) error {
		i := action.NewInstall(cfg)
		i.ReleaseName, i.Namespace, i.DryRun, i.DryRunOption = "konnector", "kbind", true, "server"
		_, err := i.Run(load(t), values)
		return err
	}
	err = install(bound("example.org"))
	if err == nil || !strings.Contains(err.Error(), `CustomResourceDefinition "bindings.core.kbind.io" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata`) {
		t.Errorf("helm install over kbind CRDs applied without Helm: want the ownership error docs/installation.md quotes, got %v", err)
	}
	withoutCRDs := bound("example.org")
	withoutCRDs["installCRDs"] = false
	if err := install(withoutCRDs); err != nil {
		t.Errorf("helm install --set installCRDs=false over kbind CRDs applied without Helm: %v", err)
	}

	// dora may delete and edit kbind's objects and the Secrets of her
	// namespace: the API server's RBAC lets her, the policy does not.
	ns := uniqueNamespace(t, kc, "protected")
	dora := testenv.UniqueName("dora")
	apply(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- {apiGroups: [core.kbind.io], resources: [connections, clusterbindings, bindings], verbs: [get, list, watch, update, patch, delete, deletecollection]}
- {apiGroups: [""], resources: [secrets], verbs: [get, list, watch, update, patch, delete, deletecollection]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]
`, dora))
	asDora := []string{"--as", dora}

	name := testenv.UniqueName("protected")
	objects := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[1]s, namespace: %[2]s, labels: {core.kbind.io/deletion-protection: "true"}}
stringData: {kubeconfig: "not read here"}
---
apiVersion: v1
kind: Secret
metadata: {name: %[1]s-plain, namespace: %[2]s}
stringData: {kubeconfig: "not read here"}
---
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: %[1]s}
spec:
  kubeconfigSecretRef: {namespace: %[2]s, name: %[1]s}
  deletionProtection: true
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: %[1]s}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: widgets.example.org}, {name: gadgets.example.org}]
  deletionProtection: true
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: %[1]s-orphan}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: sprockets.example.org}]
  deletionPolicy: Orphan
  deletionProtection: true
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: %[1]s-open}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: gizmos.example.org}]
---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: things.example.org}]
  deletionPolicy: Foreground
  deletionProtection: true
`, name, ns)
	apply(objects)
	// What the konnector reports (no konnector runs here): the counts per
	// API, and which consumer CRD the ClusterBinding's deletion takes.
	status := func(ref []string, boundAPIs string) {
		t.Helper()
		must(append(append([]string{"patch"}, ref...), "--subresource=status", "--type=merge", "-p", `{"status":{"boundAPIs":`+boundAPIs+`}}`)...)
	}
	status([]string{"clusterbindings.core.kbind.io", name}, `[
		{"name":"gadgets.example.org","instances":{"total":3,"synced":3,"pending":0,"failed":0}},
		{"name":"widgets.example.org","unbindDeletesCRD":true,"instances":{"total":12,"synced":10,"pending":1,"failed":1}}]`)
	status([]string{"clusterbindings.core.kbind.io", name + "-orphan"}, `[{"name":"sprockets.example.org","unbindDeletesCRD":true,"instances":{"total":4,"synced":4,"pending":0,"failed":0}}]`)
	status([]string{"bindings.core.kbind.io", name, "-n", ns}, `[{"name":"things.example.org","instances":{"total":2,"synced":1,"pending":1,"failed":0}}]`)

	// A ClusterBinding of many APIs: the message gives the counts of the
	// first 8 and how many more (the message stays readable, its cost
	// bounded), and every consumer CRD that would go, the 9th API's too.
	var many, manyStatus []string
	for i := range 10 {
		many = append(many, fmt.Sprintf("{name: api%d.example.org}", i))
		manyStatus = append(manyStatus, fmt.Sprintf(`{"name":"api%d.example.org","unbindDeletesCRD":%t,"instances":{"total":%d,"synced":%d,"pending":0,"failed":0}}`, i, i == 0 || i == 8, i, i))
	}
	apply(fmt.Sprintf("apiVersion: core.kbind.io/v1alpha1\nkind: ClusterBinding\nmetadata: {name: %s-many}\nspec:\n  connectionRef: {name: %s}\n  apis: [%s]\n  deletionProtection: true\n",
		name, name, strings.Join(many, ", ")))
	status([]string{"clusterbindings.core.kbind.io", name + "-many"}, "["+strings.Join(manyStatus, ",")+"]")

	policy, _ := protectionPolicy(t, bound("example.org"))
	applyPolicy(t, kc, policy)
	cb := []string{"clusterbindings.core.kbind.io", name}
	// The API server loads a policy a moment after it is created: wait on
	// a server-side dry run, which admission checks like the real thing
	// but which deletes nothing.
	enginetest.EventuallyWithin(t, 30*time.Second, "the deletion-protection policy loaded", func() error {
		out, err := run(append(append([]string{"delete", "--dry-run=server"}, cb...), asDora...)...)
		if err == nil {
			return fmt.Errorf("a dry-run delete of a protected ClusterBinding is allowed: %s", out)
		}
		if !strings.Contains(err.Error(), "has deletionProtection: true") {
			return fmt.Errorf("refused for another reason: %v", err)
		}
		return nil
	})

	refused := func(what string, ref []string, fragments ...string) {
		t.Helper()
		out, err := run(append(append([]string{"delete"}, ref...), asDora...)...)
		if err == nil {
			t.Errorf("%s: deleted: %s", what, out)
			return
		}
		for _, f := range fragments {
			if !strings.Contains(out, f) {
				t.Errorf("%s: kubectl's error lacks %q:\n%s", what, f, out)
			}
		}
		if _, err := run(append([]string{"get"}, ref...)...); err != nil {
			t.Errorf("%s: gone after the refusal: %v", what, err)
		}
		t.Logf("%s: kubectl delete says (%d characters):\n%s", what, len(out), out)
	}
	unprotect := func(kind string) string {
		return fmt.Sprintf(`kubectl patch %s --type=merge -p '{"spec":{"deletionProtection":false}}'`, kind)
	}
	refused("a protected ClusterBinding", cb,
		"ValidatingAdmissionPolicy 'konnector-deletion-protection'",
		"ClusterBinding "+name+" has deletionProtection: true.",
		"Deleting it deletes the provider copies (deletionPolicy Delete) of gadgets.example.org: 3 objects, 3 synced; widgets.example.org: 12 objects, 10 synced, and the consumer CRD widgets.example.org with every object of it.",
		"To delete it: kubectl kbind unbind "+name+" (shows what goes, asks)",
		"or turn protection off and delete it again: "+unprotect("clusterbindings.core.kbind.io "+name)+".",
		"To keep the provider copies, set spec.deletionPolicy: Orphan first (the consumer CRD and its objects still go with the last ClusterBinding; binding again later meets OwnedByAnother for the kept copies).")
	refused("a protected ClusterBinding with deletionPolicy Orphan", []string{"clusterbindings.core.kbind.io", name + "-orphan"},
		"Deleting it keeps the provider copies (deletionPolicy Orphan) of sprockets.example.org: 4 objects, 4 synced; it still deletes the consumer CRD sprockets.example.org with every object of it.",
		unprotect("clusterbindings.core.kbind.io "+name+"-orphan"))
	refused("a protected ClusterBinding of 10 APIs", []string{"clusterbindings.core.kbind.io", name + "-many"},
		"of api0.example.org: 0 objects, 0 synced; api1.example.org: 1 objects, 1 synced;",
		"api7.example.org: 7 objects, 7 synced; and 2 more APIs, and the consumer CRD api0.example.org with every object of it, and the consumer CRD api8.example.org with every object of it.")
	refused("a protected Binding", []string{"bindings.core.kbind.io", name, "-n", ns},
		"Binding "+ns+"/"+name+" has deletionProtection: true.",
		"Deleting it deletes the provider copies (deletionPolicy Foreground) of things.example.org: 2 objects, 1 synced.",
		"kubectl kbind unbind "+name+" -n "+ns,
		unprotect("bindings.core.kbind.io "+name+" -n "+ns),
		"set spec.deletionPolicy: Orphan first (binding again later meets OwnedByAnother for the kept copies).")
	refused("a protected Connection", []string{"connections.core.kbind.io", name},
		"Connection "+name+" has deletionProtection: true. Delete its bindings first",
		unprotect("connections.core.kbind.io "+name))
	refused("a labelled Secret", []string{"secret", name, "-n", ns},
		"ValidatingAdmissionPolicy 'konnector-deletion-protection-secrets'",
		"Secret "+ns+"/"+name+" is protected (label core.kbind.io/deletion-protection=true)",
		"Delete the Connection first, then remove the label: kubectl label secret "+name+" -n "+ns+" core.kbind.io/deletion-protection-")

	// Unprotected objects are not the policy's: deleted at once.
	must(append([]string{"delete", "clusterbindings.core.kbind.io", name + "-open"}, asDora...)...)
	must(append([]string{"delete", "secret", name + "-plain", "-n", ns}, asDora...)...)

	// Protection off (an ordinary update), and the delete goes through —
	// each following the command the refusal printed.
	must(append([]string{"patch", "clusterbindings.core.kbind.io", name, "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`}, asDora...)...)
	must(append([]string{"delete", "clusterbindings.core.kbind.io", name}, asDora...)...)
	must(append([]string{"patch", "bindings.core.kbind.io", name, "-n", ns, "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`}, asDora...)...)
	must(append([]string{"delete", "bindings.core.kbind.io", name, "-n", ns}, asDora...)...)
	must(append([]string{"label", "secret", name, "-n", ns, "core.kbind.io/deletion-protection-"}, asDora...)...)
	must(append([]string{"delete", "secret", name, "-n", ns}, asDora...)...)

	// The cluster's own controllers are not refused: the garbage collector
	// deletes dependents, the namespace controller empties a namespace
	// being deleted (which must not hang).
	apply(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[1]s-2, namespace: %[2]s, labels: {core.kbind.io/deletion-protection: "true"}}
---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: %[1]s-2, namespace: %[2]s}
spec:
  connectionRef: {name: %[1]s}
  apis: [{name: things.example.org}]
  deletionProtection: true
`, name, ns))
	for _, tc := range []struct{ controller, what string }{
		{"namespace-controller", "secret " + name + "-2 -n " + ns},
		{"namespace-controller", "bindings.core.kbind.io " + name + "-2 -n " + ns},
		{"generic-garbage-collector", "connections.core.kbind.io " + name},
		{"generic-garbage-collector", "clusterbindings.core.kbind.io " + name + "-orphan"},
	} {
		if out, err := run(append(append([]string{"delete"}, strings.Fields(tc.what)...), "--as", "system:serviceaccount:kube-system:"+tc.controller)...); err != nil {
			t.Errorf("the %s's delete of %s refused: %v\n%s", tc.controller, tc.what, err, out)
		}
	}
}
