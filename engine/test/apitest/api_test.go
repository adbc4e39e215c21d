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

package apitest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/testenv"
)

// uniqueName returns a DNS-1123 name that no other test uses.
func uniqueName(prefix string) string { return testenv.UniqueName(prefix) }

// fromYAML decodes a manifest exactly as a user would write it, so that the
// API server, not a Go type, decides what is missing or defaulted.
func fromYAML(t *testing.T, manifest string, args ...any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(manifest, args...)), &u.Object); err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	return u
}

// expectRejected creates obj and asserts the API server refuses it with a
// message containing every fragment.
func expectRejected(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected the API server to reject the object with %q, it was accepted", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("rejection message %q does not contain %q", err.Error(), f)
		}
	}
}

func TestConnectionDefaults(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	name := uniqueName("defaults")
	obj := fromYAML(t, `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: %s}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: provider-kubeconfig}
`, name)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating a minimal Connection: %v", err)
	}
	spec := obj.Object["spec"].(map[string]any)
	want := map[string]any{
		"kubeconfigSecretRef": map[string]any{"namespace": "kbind", "name": "provider-kubeconfig", "key": "kubeconfig"},
		"schema":              map[string]any{"source": "Auto", "pullPolicy": "Bound", "updatePolicy": "Always"},
		"autoBind":            false,
		"isolation":           map[string]any{"mode": "None"},
		"namespacedBindings":  map[string]any{"from": "None"},
	}
	assertEqualJSON(t, want, spec)
}

func TestBindingDefaults(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	for _, kind := range []string{"ClusterBinding", "Binding"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			obj := fromYAML(t, `
apiVersion: core.kbind.io/v1alpha1
kind: %s
metadata: {name: %s, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: secrets, direction: FromProvider, selector: {names: [db]}}
`, kind, uniqueName("defaults"))
			if kind == "ClusterBinding" {
				obj.SetNamespace("")
			}
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("creating a minimal %s: %v", kind, err)
			}
			spec := obj.Object["spec"].(map[string]any)
			want := map[string]any{
				"connectionRef":    map[string]any{"name": "provider"},
				"apis":             []any{map[string]any{"name": "widgets.example.org"}},
				"conflictPolicy":   "Fail",
				"providerEvents":   "Forward",
				"relatedResources": []any{map[string]any{"group": "", "resource": "secrets", "direction": "FromProvider", "selector": map[string]any{"names": []any{"db"}}}},
			}
			assertEqualJSON(t, want, spec)
		})
	}
}

func TestValidationRejects(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	cases := []struct {
		name      string
		manifest  string
		fragments []string
	}{{
		name: "invalid providerEvents",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  providerEvents: Drop`,
		fragments: []string{`spec.providerEvents`, `Unsupported value: "Drop"`, `"Forward", "Ignore"`},
	}, {
		name: "projection onto a Kubernetes group",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org, projection: {group: apps.k8s.io, kind: Deployment}}]`,
		fragments: []string{`spec.apis[0].projection.group`, `group is reserved`},
	}, {
		name: "namespaceSelector on a Binding",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: NAME, namespace: default}
spec:
  connectionRef: {name: provider}
  namespaceSelector: {matchLabels: {a: b}}
  apis: [{name: widgets.example.org}]`,
		fragments: []string{`spec.namespaceSelector is for ClusterBindings`},
	}, {
		name: "a mutation of .metadata, and a rule with both expression and delete",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis:
  - name: widgets.example.org
    mutations:
      up:
      - {path: .metadata.labels.owner, expression: "'x'"}
      - {path: .spec.a, expression: "'x'", delete: true}`,
		fragments: []string{`spec.apis[0].mutations.up[0].path`, `should match`, `give exactly one of expression and delete: true`},
	}, {
		name: "projection onto kbind's group",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org, projection: {group: core.kbind.io}}]`,
		fragments: []string{`spec.apis[0].projection.group`, `group is reserved`},
	}, {
		// A namespace's user squatting a cluster-wide consumer API name.
		name: "projection in a Binding",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: NAME, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org, projection: {group: acme.io, kind: Squatter}}]`,
		fragments: []string{`a projection names a cluster-wide consumer API`},
	}, {
		name: "projection onto a group without a dot, a lower-case kind, a bad plural",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org, projection: {group: apps, kind: widget, plural: Widgets}}]`,
		fragments: []string{`group must be a DNS subdomain with at least one dot`, `kind must be CamelCase`, `plural must be a lower-case DNS label`},
	}, {
		name: "invalid schema.source enum",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  schema: {source: Magic}`,
		fragments: []string{`spec.schema.source`, `Unsupported value: "Magic"`, `"Auto", "CRD", "OpenAPI"`},
	}, {
		name: "invalid pullPolicy enum",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  schema: {pullPolicy: Sometimes}`,
		fragments: []string{`spec.schema.pullPolicy`, `Unsupported value: "Sometimes"`, `"Bound", "All", "None"`},
	}, {
		name: "invalid isolation mode",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  isolation: {mode: Shared}`,
		fragments: []string{`spec.isolation.mode`, `Unsupported value: "Shared"`, `"None", "Namespace", "Prefixed"`},
	}, {
		name: "isolation Namespace without a namespace",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  isolation: {mode: Namespace}`,
		fragments: []string{`spec.isolation`, `namespace is required with mode Namespace`},
	}, {
		name: "isolation Prefixed with a namespace",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  isolation: {mode: Prefixed, prefix: a, namespace: b}`,
		fragments: []string{`spec.isolation`, `only allowed with it`},
	}, {
		name: "isolation namespace not a DNS label",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  isolation: {mode: Namespace, namespace: Tenant.A}`,
		fragments: []string{`spec.isolation.namespace`, `should match`},
	}, {
		name: "isolation prefix too long",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  isolation: {mode: Prefixed, prefix: abcdefghijabcdefghijabcdefghijk}`,
		fragments: []string{`spec.isolation.prefix`, `may not be more than 30`},
	}, {
		name: "invalid namespacedBindings.from",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  namespacedBindings: {from: Same}`,
		fragments: []string{`spec.namespacedBindings.from`, `Unsupported value: "Same"`, `"None", "All", "Selector"`},
	}, {
		name: "namespacedBindings Selector without a selector",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  namespacedBindings: {from: Selector}`,
		fragments: []string{`spec.namespacedBindings`, `selector is required with from: Selector`},
	}, {
		name: "namespacedBindings All with a selector",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  namespacedBindings: {from: All, selector: {matchLabels: {a: b}}}`,
		fragments: []string{`spec.namespacedBindings`, `only allowed with it`},
	}, {
		name: "namespacedBindings selector without from (None)",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  namespacedBindings: {selector: {}}`,
		fragments: []string{`spec.namespacedBindings`, `only allowed with it`},
	}, {
		name: "invalid updatePolicy enum",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: s}
  schema: {updatePolicy: Never}`,
		fragments: []string{`spec.schema.updatePolicy`, `Unsupported value: "Never"`, `"Always", "Once"`},
	}, {
		name: "missing kubeconfigSecretRef.namespace",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {name: s}`,
		fragments: []string{`spec.kubeconfigSecretRef.namespace: Required value`},
	}, {
		name: "empty kubeconfigSecretRef.namespace",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec:
  kubeconfigSecretRef: {namespace: "", name: s}`,
		fragments: []string{`spec.kubeconfigSecretRef.namespace`, `at least 1 chars long`},
	}, {
		name: "missing kubeconfigSecretRef",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: NAME}
spec: {}`,
		fragments: []string{`spec.kubeconfigSecretRef: Required value`},
	}, {
		name: "empty apis",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: []`,
		fragments: []string{`spec.apis`, `should have at least 1 items`},
	}, {
		name: "missing apis",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}`,
		fragments: []string{`spec.apis: Required value`},
	}, {
		name: "duplicate api names",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}, {name: widgets.example.org}]`,
		fragments: []string{`spec.apis[1]`, `Duplicate value`},
	}, {
		name: "missing connectionRef",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  apis: [{name: widgets.example.org}]`,
		fragments: []string{`spec.connectionRef: Required value`},
	}, {
		name: "invalid conflictPolicy enum",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  conflictPolicy: Overwrite`,
		fragments: []string{`spec.conflictPolicy`, `Unsupported value: "Overwrite"`, `"Fail", "Adopt"`},
	}, {
		name: "non-empty relatedResources group",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {group: apps, resource: secrets, direction: FromProvider, selector: {names: [db]}}`,
		fragments: []string{`spec.relatedResources[0].group`, `group must be empty`},
	}, {
		name: "invalid relatedResources resource and direction",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: pods, direction: Sideways, selector: {names: [db]}}`,
		fragments: []string{`spec.relatedResources[0].resource`, `Unsupported value: "pods"`, `spec.relatedResources[0].direction`, `Unsupported value: "Sideways"`},
	}, {
		name: "missing relatedResources direction",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: NAME, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: configmaps, selector: {names: [db]}}`,
		fragments: []string{`spec.relatedResources[0].direction: Required value`},
	}, {
		name: "relatedResources entry with both selector and reference",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: NAME, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - resource: secrets
    direction: FromProvider
    selector: {names: [db]}
    reference: {api: widgets.example.org, fieldPath: .spec.secretRef.name}`,
		fragments: []string{`spec.relatedResources[0]`, `set either selector or reference, not both`},
	}, {
		name: "relatedResources reference to an API the binding does not list",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: NAME}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: secrets, direction: FromProvider, reference: {api: gadgets.example.org, fieldPath: .spec.secretRef.name}}`,
		fragments: []string{`spec: Invalid value`, `reference.api must name an API listed in spec.apis`},
	}, {
		name: "relatedResources reference without api",
		manifest: `
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: NAME, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: secrets, direction: FromProvider, reference: {fieldPath: .spec.secretRef.name}}`,
		fragments: []string{`spec.relatedResources[0].reference.api: Required value`},
	}}
	// A reference's fieldPath is a plain dotted path under .spec.
	for _, path := range []string{"spec.secretRef.name", ".spec", ".status.secretName", ".spec.refs[0].name", ".spec.refs.*.name",
		".spec..name", ".spec.secretRef.name.", "{.spec.secretRef.name}", ".spec['secretRef'].name", ".metadata.name", ".spec.secret Ref"} {
		cases = append(cases, struct {
			name      string
			manifest  string
			fragments []string
		}{
			name: fmt.Sprintf("relatedResources reference fieldPath %q", path),
			manifest: fmt.Sprintf(`
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: NAME, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: secrets, direction: FromProvider, reference: {api: widgets.example.org, fieldPath: %q}}`, path),
			fragments: []string{`spec.relatedResources[0].reference.fieldPath`, `fieldPath must be a dotted path of field names under .spec`},
		})
	}
	// A relatedResources entry must select: without a selector it would copy
	// every Secret in scope, other Connections' kubeconfigs included.
	for _, selector := range []string{"", ", selector: {}", ", selector: {names: []}", ", selector: {labelSelector: {}}",
		", selector: {labelSelector: {matchLabels: {}}, names: []}"} {
		for kind, metadata := range map[string]string{"ClusterBinding": "{name: NAME}", "Binding": "{name: NAME, namespace: default}"} {
			cases = append(cases, struct {
				name      string
				manifest  string
				fragments []string
			}{
				name: fmt.Sprintf("%s relatedResources entry without a selector (%q)", kind, selector),
				manifest: fmt.Sprintf(`
apiVersion: core.kbind.io/v1alpha1
kind: %s
metadata: %s
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}]
  relatedResources:
  - {resource: secrets, direction: FromConsumer, selector: {names: [db]}}
  - {resource: secrets, direction: FromConsumer%s}`, kind, metadata, selector),
				fragments: []string{`spec.relatedResources[1]`, `a selector is required`},
			})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj := fromYAML(t, "%s", strings.ReplaceAll(tc.manifest, "NAME", uniqueName("invalid")))
			expectRejected(t, c.Create(ctx, obj), tc.fragments...)
		})
	}
}

func newConnection(name string) *kbindv1alpha1.Connection {
	return &kbindv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kbindv1alpha1.ConnectionSpec{
			KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: "kbind", Name: "provider-kubeconfig"},
		},
	}
}

func TestKubeconfigSecretRefImmutable(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	conn := newConnection(uniqueName("immutable"))
	if err := c.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for _, mutate := range []func(*kbindv1alpha1.SecretKeyReference){
		func(r *kbindv1alpha1.SecretKeyReference) { r.Name = "other" },
		func(r *kbindv1alpha1.SecretKeyReference) { r.Namespace = "elsewhere" },
		func(r *kbindv1alpha1.SecretKeyReference) { r.Key = "config" },
	} {
		changed := conn.DeepCopy()
		mutate(&changed.Spec.KubeconfigSecretRef)
		expectRejected(t, c.Update(ctx, changed), "spec.kubeconfigSecretRef", "kubeconfigSecretRef is immutable")
	}
	// The rest of the spec stays mutable.
	changed := conn.DeepCopy()
	changed.Spec.AutoBind = true
	changed.Spec.Schema.Source = kbindv1alpha1.SchemaSourceOpenAPI
	if err := c.Update(ctx, changed); err != nil {
		t.Fatalf("updating autoBind and schema.source: %v", err)
	}
}

// TestIsolationImmutable: the mode and its parameters cannot change once
// the Connection exists (the provider copies could not follow), neither
// from the default None nor between modes.
func TestIsolationImmutable(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	plain := newConnection(uniqueName("isolation-none"))
	if err := c.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	isolated := newConnection(uniqueName("isolation-ns"))
	isolated.Spec.Isolation = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"}
	if err := c.Create(ctx, isolated); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from *kbindv1alpha1.Connection
		to   kbindv1alpha1.Isolation
	}{
		{plain, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"}},
		{plain, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}},
		{isolated, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-b"}},
		{isolated, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}},
	} {
		changed := tc.from.DeepCopy()
		changed.Spec.Isolation = tc.to
		expectRejected(t, c.Update(ctx, changed), "spec.isolation", "isolation is immutable; create a new Connection to change it")
	}
	// Updating something else keeps the isolation as it is.
	changed := isolated.DeepCopy()
	changed.Spec.AutoBind = true
	if err := c.Update(ctx, changed); err != nil {
		t.Fatalf("updating autoBind of an isolated Connection: %v", err)
	}
}

func TestClusterUIDsPinnedOnce(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	for _, field := range []string{"remoteClusterUID", "localClusterUID"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			conn := newConnection(uniqueName("pin"))
			if err := c.Create(ctx, conn); err != nil {
				t.Fatal(err)
			}
			set := func(conn *kbindv1alpha1.Connection, uid string) {
				if field == "remoteClusterUID" {
					conn.Status.RemoteClusterUID = uid
				} else {
					conn.Status.LocalClusterUID = uid
				}
			}
			// Unset → set is allowed once.
			set(conn, "uid-1")
			if err := c.Status().Update(ctx, conn); err != nil {
				t.Fatalf("pinning %s: %v", field, err)
			}
			// Other status fields still change freely.
			conn.Status.ActiveSchemaSource = kbindv1alpha1.ActiveSchemaSourceCRD
			if err := c.Status().Update(ctx, conn); err != nil {
				t.Fatalf("updating status with %s pinned: %v", field, err)
			}
			changed := conn.DeepCopy()
			set(changed, "uid-2")
			expectRejected(t, c.Status().Update(ctx, changed), "status."+field, field+" is immutable once set")
			cleared := conn.DeepCopy()
			set(cleared, "")
			expectRejected(t, c.Status().Update(ctx, cleared), field+" cannot be removed once set")

			got := &kbindv1alpha1.Connection{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(conn), got); err != nil {
				t.Fatal(err)
			}
			if uid := map[string]string{"remoteClusterUID": got.Status.RemoteClusterUID, "localClusterUID": got.Status.LocalClusterUID}[field]; uid != "uid-1" {
				t.Errorf("%s = %q after rejected updates, want uid-1", field, uid)
			}
		})
	}
}

func assertEqualJSON(t *testing.T, want, got any) {
	t.Helper()
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	if string(w) != string(g) {
		t.Errorf("spec after defaulting:\n%s\nwant:\n%s", g, w)
	}
}

// ensureNamespace creates a namespace for a test that needs its own.
func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

func TestConnectionRefImmutable(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("moving")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "one"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}}}
	if err := c.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	changed := cb.DeepCopy()
	changed.Spec.ConnectionRef.Name = "two"
	expectRejected(t, c.Update(ctx, changed), "spec.connectionRef", "connectionRef is immutable")
	// The API list stays editable (removing an API unbinds it).
	changed = cb.DeepCopy()
	changed.Spec.APIs = append(changed.Spec.APIs, kbindv1alpha1.APIReference{Name: "gadgets.example.org"})
	if err := c.Update(ctx, changed); err != nil {
		t.Fatalf("updating apis: %v", err)
	}
}

// A projection is immutable: changing, adding or removing it on an entry
// is refused (a different projection is a new entry); the entry can be
// removed and another added.
func TestProjectionImmutable(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("projected")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "one"}, APIs: []kbindv1alpha1.APIReference{
			{Name: "widgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget"}},
			{Name: "gadgets.example.org"},
		}}}
	if err := c.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*kbindv1alpha1.ClusterBinding){
		"changed": func(b *kbindv1alpha1.ClusterBinding) { b.Spec.APIs[0].Projection.Kind = "Other" },
		"removed": func(b *kbindv1alpha1.ClusterBinding) { b.Spec.APIs[0].Projection = nil },
		"added": func(b *kbindv1alpha1.ClusterBinding) {
			b.Spec.APIs[1].Projection = &kbindv1alpha1.Projection{Group: "acme.io"}
		},
	} {
		changed := cb.DeepCopy()
		mutate(changed)
		if err := c.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "projection is immutable") {
			t.Errorf("projection %s: %v, want refused as immutable", name, err)
		}
	}
	changed := cb.DeepCopy()
	changed.Spec.APIs = []kbindv1alpha1.APIReference{{Name: "gadgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io"}}}
	if err := c.Update(ctx, changed); err == nil {
		t.Error("replacing an entry by the same provider API with a projection was allowed: the list is keyed by name, so it is the same entry")
	}
	changed = cb.DeepCopy()
	changed.Spec.APIs = changed.Spec.APIs[:1]
	if err := c.Update(ctx, changed); err != nil {
		t.Fatalf("removing an entry: %v", err)
	}
}

func TestAllowInsecureValues(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	conn := newConnection(uniqueName("insecure"))
	conn.Spec.AllowInsecure = []kbindv1alpha1.InsecureKubeconfigFeature{"Everything"}
	expectRejected(t, c.Create(ctx, conn), "spec.allowInsecure", "Unsupported value")
	conn.Spec.AllowInsecure = []kbindv1alpha1.InsecureKubeconfigFeature{kbindv1alpha1.InsecureSkipTLSVerify, kbindv1alpha1.InsecureProxyURL, kbindv1alpha1.InsecurePlainHTTP}
	if err := c.Create(ctx, conn); err != nil {
		t.Fatalf("every known feature must be accepted: %v", err)
	}
}

// Every namespacedBindings.from is accepted in its valid shape, and can be
// changed later (it is not immutable: admitting or excluding namespaces
// is re-evaluated).
func TestNamespacedBindingsValues(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	conn := newConnection(uniqueName("namespaced"))
	conn.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesSelector,
		Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a"}}}}}
	if err := c.Create(ctx, conn); err != nil {
		t.Fatalf("from: Selector with a selector: %v", err)
	}
	conn.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}
	if err := c.Update(ctx, conn); err != nil {
		t.Fatalf("changing to from: All: %v", err)
	}
	conn.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesSelector, Selector: &metav1.LabelSelector{}}
	if err := c.Update(ctx, conn); err != nil {
		t.Fatalf("from: Selector with the empty selector: %v", err)
	}
	conn.Spec.NamespacedBindings = nil
	if err := c.Update(ctx, conn); err != nil {
		t.Fatalf("removing namespacedBindings: %v", err)
	}
	if got := conn.Spec.NamespacedBindingsOf(); got.From != kbindv1alpha1.FromNamespacesNone || got.Selector != nil {
		t.Errorf("removed namespacedBindings defaults to %+v, want from None", got)
	}
}

// A reference entry is accepted with no selector, and with the empty
// selector a Go client sends (selector is a struct, not a pointer).
func TestRelatedReferenceAccepted(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	for _, selector := range []string{"", ", selector: {}", ", selector: {names: []}"} {
		obj := fromYAML(t, `
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: %s, namespace: default}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}, {name: gadgets.example.org}]
  relatedResources:
  - {resource: secrets, direction: FromProvider, reference: {api: widgets.example.org, fieldPath: .spec.writeConnectionSecretToRef.name}%s}
  - {resource: configmaps, direction: FromConsumer, reference: {api: gadgets.example.org, fieldPath: .spec.config_ref.name-v2}}
`, uniqueName("reference"), selector)
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("a valid reference entry (selector %q) was rejected: %v", selector, err)
		}
	}
}
