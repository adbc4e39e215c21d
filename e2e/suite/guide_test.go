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

package suite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/e2e/harness"
)

// guideFeature runs the troubleshooting guide's commands
// (../shared/seed/troubleshooting.txt), with its names: Connection
// provider, Binding widgets in team-a, Widget my-widget, contexts consumer
// and provider. Each assessment is one section of the guide; where kbind
// does better than the guide, the assessment checks kbind's behaviour.
func guideFeature() features.Feature {
	const widget = "my-widget"
	return features.New("troubleshooting guide").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("team-a")+binding("team-a", "widgets", connection, "", "widgets.example.org"))
			waitReady(ctx, t, "-n", "team-a", "bindings.core.kbind.io/widgets")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Widget", "team-a", widget, "{color: blue}"))
			eventuallyJSONPath(ctx, t, "blue", "{.spec.color}", provider, "-n", "team-a", "get", "widget", widget)
			return ctx
		}).
		Assess("collect the current state", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := s.Run(ctx, t, consumer, "get", "connections,clusterbindings")
			mustContain(t, out, "NAME", "READY", "SOURCE", "SECRET", "connection.core.kbind.io/provider", "True", "CRD", secretName)
			out = s.Run(ctx, t, consumer, "get", "bindings.core.kbind.io", "-A")
			mustContain(t, out, "team-a", "widgets", "provider", "True")

			out = s.Run(ctx, t, consumer, "get", "connection", "provider", "-o", "yaml")
			mustContain(t, out, "remoteClusterUID:", "localClusterUID:", "activeSchemaSource: CRD", "name: widgets.example.org", "type: Ready")
			// The yaml of a Connection never carries credentials.
			mustNotContain(t, out, "client-key-data", "BEGIN", "token:")

			s.EventuallyOutput(ctx, t, harness.Contains("name: widgets.example.org", "crdHash: sha256:", "total: 1", "synced: 1"),
				consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "widgets", "-o", "yaml")
			out = s.Run(ctx, t, consumer, "get", "crd", "widgets.example.org", "-o", "yaml")
			mustContain(t, out, "core.kbind.io/managed: \"true\"", "core.kbind.io/connection: provider", "core.kbind.io/schema-hash: sha256:")
			out = s.Run(ctx, t, consumer, "-n", "team-a", "describe", "widget", widget)
			mustContain(t, out, "Name:         my-widget", "core.kbind.io/syncer", "Color:  blue")
			// Events are asserted in the conflicts section below, once there is one.

			// `kubectl -n kbind logs -l app.kubernetes.io/instance=konnector -c konnector`
			// needs a running Pod: on kind it runs; local control planes have
			// no kubelet, and the konnector's log is the suite's konnector.log
			// (the guide: "logs are in the host konnector terminal").
			if s.Mode == harness.Kind {
				out = s.Run(ctx, t, consumer, "-n", "kbind", "logs", "-l", "app.kubernetes.io/instance=konnector", "-c", "konnector", "--tail=200")
				mustContain(t, out, "Starting")
			} else {
				t.Log("kubectl logs: no Pods on local control planes; the konnector's log is konnector.log in the suite directory")
			}
			return ctx
		}).
		Assess("Connection does not become Ready", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The Secret exists, shown without its data.
			out := s.Run(ctx, t, consumer, "-n", "kbind", "get", "secret", secretName, "-o", "custom-columns=NAME:.metadata.name,TYPE:.type")
			mustContain(t, out, "NAME", "TYPE", secretName, "Opaque")
			mustNotContain(t, out, "apiVersion", "kubeconfig:")
			// An omitted key defaults to kubeconfig; the namespace is required.
			if got := jsonpath(ctx, t, "{.spec.kubeconfigSecretRef.key}", consumer, "get", "connection", connection); got != "kubeconfig" {
				t.Errorf("kubeconfigSecretRef.key defaults to %q, want kubeconfig", got)
			}
			out, err := s.Kubectl(ctx, consumer, "apply", "-f", s.WriteFile(t, "apiVersion: core.kbind.io/v1alpha1\nkind: Connection\nmetadata: {name: guide-no-namespace}\nspec:\n  kubeconfigSecretRef: {name: provider-kubeconfig}\n"))
			if err == nil || !strings.Contains(out, "namespace") {
				t.Errorf("a kubeconfigSecretRef without namespace must be rejected naming it: %v %s", err, out)
			}

			// SecretValid=False/SecretNotFound: missing Secret, unparsable
			// data, and (beyond) a kubeconfig that would run a program.
			unreachable, err := s.KubeconfigVariant(harness.ProviderContext, "", "https://127.0.0.1:1")
			if err != nil {
				t.Fatal(err)
			}
			denied, err := s.KubeconfigVariant(harness.ProviderContext, s.ServiceAccountToken(ctx, t, harness.ProviderContext, "guide", "nobody"), "")
			if err != nil {
				t.Fatal(err)
			}
			s.Apply(ctx, t, harness.ConsumerContext, `apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: guide-missing}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: no-such-secret}
---
`+harness.ConnectionManifest("guide-garbage", "guide-garbage", []byte("this is: [not a kubeconfig"), "")+"---\n"+
				harness.ConnectionManifest("guide-exec", "guide-exec", []byte(execKubeconfig), "")+"---\n"+
				harness.ConnectionManifest("guide-unreachable", "guide-unreachable", unreachable, "")+"---\n"+
				harness.ConnectionManifest("guide-denied", "guide-denied", denied, ""))
			eventuallyCondition(ctx, t, "SecretValid", "False", "SecretNotFound", []string{"no-such-secret"}, consumer, "get", "connection", "guide-missing")
			eventuallyCondition(ctx, t, "SecretValid", "False", "SecretNotFound", nil, consumer, "get", "connection", "guide-garbage")
			eventuallyCondition(ctx, t, "SecretValid", "False", "SecretNotFound", []string{"exec"}, consumer, "get", "connection", "guide-exec")
			eventuallyCondition(ctx, t, "Connected", "False", "Pending", []string{"127.0.0.1:1"}, consumer, "get", "connection", "guide-unreachable")
			eventuallyCondition(ctx, t, "PermissionDenied", "True", "Forbidden", []string{"namespaces"}, consumer, "get", "connection", "guide-denied")
			eventuallyCondition(ctx, t, "Ready", "False", "Forbidden", nil, consumer, "get", "connection", "guide-denied")
			// No message, Event or condition carries the kubeconfig.
			out = s.Run(ctx, t, consumer, "get", "connections", "-o", "yaml")
			mustNotContain(t, out, "client-key-data", "BEGIN", "this is: [not")
			out = s.Run(ctx, t, consumer, "-n", "kbind", "get", "events")
			mustNotContain(t, out, "client-key-data", "BEGIN")

			// (beyond) SchemaInSync is emitted; the guide says not to wait on it.
			eventuallyCondition(ctx, t, "SchemaInSync", "True", "AsExpected", nil, consumer, "get", "connection", connection)
			s.Run(ctx, t, consumer, "delete", "connection", "guide-missing", "guide-garbage", "guide-exec", "guide-unreachable", "guide-denied", "--wait=true", "--timeout=60s")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "guide-garbage", "guide-exec", "guide-unreachable", "guide-denied", "--timeout=60s")
			return ctx
		}).
		Assess("an API is missing or the binding says APINotExported", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out := s.Run(ctx, t, provider, "get", "crd", "widgets.example.org", "--show-labels")
			mustContain(t, out, "widgets.example.org", "core.kbind.io/exported=true")
			out = s.Run(ctx, t, provider, "get", "crds", "-l", "core.kbind.io/exported=true")
			mustContain(t, out, "widgets.example.org")
			out = jsonpath(ctx, t, "{.status.activeSchemaSource}{\"\\n\"}{.status.exportedAPIs}{\"\\n\"}", consumer, "get", "connection", connection)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 || lines[0] != "CRD" {
				t.Fatalf("activeSchemaSource and exportedAPIs: %q", out)
			}
			var exported []struct{ Name, Group, Resource, Scope string }
			if err := json.Unmarshal([]byte(lines[1]), &exported); err != nil {
				t.Fatalf("exportedAPIs is not JSON: %v: %s", err, lines[1])
			}
			found := false
			for _, e := range exported {
				found = found || (e.Name == "widgets.example.org" && e.Resource == "widgets" && e.Scope == "Namespaced")
			}
			if !found {
				t.Errorf("exportedAPIs lacks widgets.example.org: %s", lines[1])
			}
			// Auto does not fall back to OpenAPI when the CRD list is refused:
			// the identity may read the cluster identity, not CRDs.
			token := s.ServiceAccountToken(ctx, t, harness.ProviderContext, "guide", "no-crds")
			s.Apply(ctx, t, harness.ProviderContext, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: guide-identity-only}
rules: [{apiGroups: [""], resources: [namespaces], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: guide-identity-only}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guide-identity-only}
subjects: [{kind: ServiceAccount, name: no-crds, namespace: guide}]
`)
			noCRDs, err := s.KubeconfigVariant(harness.ProviderContext, token, "")
			if err != nil {
				t.Fatal(err)
			}
			s.Apply(ctx, t, harness.ConsumerContext, harness.ConnectionManifest("guide-no-crds", "guide-no-crds", noCRDs, ""))
			eventuallyCondition(ctx, t, "PermissionDenied", "True", "Forbidden", []string{"customresourcedefinitions"}, consumer, "get", "connection", "guide-no-crds")
			if got := jsonpath(ctx, t, "{.status.activeSchemaSource}", consumer, "get", "connection", "guide-no-crds"); got == "OpenAPI" {
				t.Error("Auto fell back to OpenAPI on a refused CRD list")
			}
			s.Run(ctx, t, consumer, "delete", "connection", "guide-no-crds", "--timeout=60s")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "guide-no-crds", "--timeout=60s")

			// A Kind or a group instead of plural.group: APINotExported naming it.
			s.Apply(ctx, t, harness.ConsumerContext, binding("team-a", "guide-wrong-name", connection, "", "Widget", "example.org"))
			eventuallyCondition(ctx, t, "Ready", "False", "APINotExported", []string{"Widget", "example.org"},
				consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "guide-wrong-name")
			s.Run(ctx, t, consumer, "-n", "team-a", "delete", "bindings.core.kbind.io", "guide-wrong-name", "--timeout=60s")
			return ctx
		}).
		Assess("an API the konnector may not access on the consumer: PermissionDenied names the chart value", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The chart grants the konnector only rbac.boundResourceGroups
			// (harness.BoundGroups): a binding of an API of another group
			// installs its CRD, but the konnector may not list its objects.
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("gizmos", "Gizmo", "unbound.example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, binding("team-a", "guide-unbound", connection, "", "gizmos.unbound.example.org"))
			eventuallyCondition(ctx, t, "PermissionDenied", "True", "Forbidden", []string{"consumer cluster refuses", "Gizmo", `add "unbound.example.org" to rbac.boundResourceGroups`},
				consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "guide-unbound")
			eventuallyCondition(ctx, t, "Synced", "False", "Pending", []string{"rbac.boundResourceGroups"},
				consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "guide-unbound")
			// Granted (what the chart value would do), the API syncs.
			s.Apply(ctx, t, harness.ConsumerContext, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: guide-unbound}
rules: [{apiGroups: [unbound.example.org], resources: ["*"], verbs: [get, list, watch, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: guide-unbound}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guide-unbound}
subjects: [{kind: ServiceAccount, name: `+harness.Release+`, namespace: `+harness.Namespace+`}]
`)
			eventuallyCondition(ctx, t, "Synced", "True", "AsExpected", nil, consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "guide-unbound")
			eventuallyCondition(ctx, t, "PermissionDenied", "False", "AsExpected", nil, consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "guide-unbound")
			// A Binding leaves the consumer CRD kbind installed (only a
			// ClusterBinding's removal takes it along): delete it too.
			s.Run(ctx, t, consumer, "-n", "team-a", "delete", "bindings.core.kbind.io", "guide-unbound", "--timeout=60s")
			s.Run(ctx, t, consumer, "delete", "crd", "gizmos.unbound.example.org", "--timeout=60s")
			s.Run(ctx, t, consumer, "delete", "clusterrolebinding,clusterrole", "guide-unbound")
			s.Run(ctx, t, provider, "delete", "crd", "gizmos.unbound.example.org")
			return ctx
		}).
		Assess("binding is Ready but instances do not sync: the checklist", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=10s")
			if got := jsonpath(ctx, t, `{.metadata.labels.core\.kbind\.io/managed}/{.metadata.annotations.core\.kbind\.io/connection}`, consumer, "get", "crd", "widgets.example.org"); got != "true/provider" {
				t.Errorf("consumer CRD markers: %q", got)
			}
			uids := jsonpath(ctx, t, "{.status.remoteClusterUID}/{.status.localClusterUID}", consumer, "get", "connection", connection)
			if r, l, _ := strings.Cut(uids, "/"); r == "" || l == "" {
				t.Errorf("identity UIDs: %q", uids)
			}
			// The Connection admits the Binding's namespace (BIND-3): its
			// spec.namespacedBindings, and the namespace's labels a selector
			// reads. A Binding in a namespace it does not admit gets nothing
			// and says so.
			out := jsonpath(ctx, t, "{.spec.namespacedBindings}", consumer, "get", "connection", connection)
			mustContain(t, out, `"from":"Selector"`, "kubernetes.io/metadata.name", "team-a")
			out = s.Run(ctx, t, consumer, "get", "namespace", "team-a", "--show-labels")
			mustContain(t, out, "kubernetes.io/metadata.name=team-a")
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("guide-outside")+binding("guide-outside", "widgets", connection, "", "widgets.example.org"))
			eventuallyCondition(ctx, t, "Ready", "False", "Forbidden",
				[]string{`Connection "provider" does not admit Bindings in namespace "guide-outside"`, "spec.namespacedBindings.selector", "a cluster admin"},
				consumer, "-n", "guide-outside", "get", "bindings.core.kbind.io", "widgets")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Widget", "guide-outside", widget, "{color: blue}"))
			s.Run(ctx, t, consumer, "-n", "guide-outside", "delete", "bindings.core.kbind.io", "widgets", "--timeout=60s")
			if got := jsonpath(ctx, t, "{.metadata.finalizers}", consumer, "-n", "guide-outside", "get", "widget", widget); got != "" {
				t.Errorf("an object in a namespace the Connection does not admit got finalizers %s", got)
			}
			if out, err := s.Kubectl(ctx, provider, "-n", "guide-outside", "get", "widget", widget); err == nil {
				t.Errorf("an object in a namespace the Connection does not admit was synced: %s", out)
			}
			s.Run(ctx, t, consumer, "-n", "guide-outside", "delete", "widget", widget, "--timeout=60s")
			// Ownership markers: none on a clean object; the provider copy
			// carries both markers and the managed label.
			if got := s.Run(ctx, t, consumer, "-n", "team-a", "get", "widget", widget, "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/conflict}{"\n"}`); strings.TrimSpace(got) != "" {
				t.Errorf("conflict annotation on a clean object: %q", got)
			}
			out = s.Run(ctx, t, provider, "-n", "team-a", "get", "widget", widget, "-o", "yaml")
			local := uids[strings.Index(uids, "/")+1:]
			objUID := jsonpath(ctx, t, "{.metadata.uid}", consumer, "-n", "team-a", "get", "widget", widget)
			mustContain(t, out, "core.kbind.io/consumer-cluster-uid: "+local, "core.kbind.io/consumer-object-uid: "+objUID, "core.kbind.io/managed: \"true\"", "color: blue")

			// A foreign provider object with the same name: conflict
			// annotation, Warning Event, binding condition.
			s.Apply(ctx, t, harness.ProviderContext, object("example.org", "Widget", "team-a", "their-widget", "{color: red}"))
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Widget", "team-a", "their-widget", "{color: green}"))
			s.EventuallyOutput(ctx, t, harness.Equals("ForeignObjectExists"),
				consumer, "-n", "team-a", "get", "widget", "their-widget", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/conflict}{"\n"}`)
			s.EventuallyOutput(ctx, t, harness.Contains("Warning", "ForeignObjectExists", "widget/their-widget"),
				consumer, "-n", "team-a", "get", "events", "--sort-by=.lastTimestamp")
			eventuallyCondition(ctx, t, "Conflicts", "True", "ForeignObjectExists", []string{"1 object"}, consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "widgets")
			if got := jsonpath(ctx, t, "{.spec.color}", provider, "-n", "team-a", "get", "widget", "their-widget"); got != "red" {
				t.Errorf("the foreign provider object was overwritten: color %q", got)
			}
			s.Run(ctx, t, consumer, "-n", "team-a", "delete", "widget", "their-widget", "--timeout=60s")
			s.Run(ctx, t, provider, "-n", "team-a", "get", "widget", "their-widget") // foreign: left alone
			s.Run(ctx, t, provider, "-n", "team-a", "delete", "widget", "their-widget")
			eventuallyCondition(ctx, t, "Conflicts", "False", "AsExpected", nil, consumer, "-n", "team-a", "get", "bindings.core.kbind.io", "widgets")

			// The chart's Deployment, and the restart the guide suggests
			// after a rotation (kbind does not need it: see the rotation feature).
			out = s.Run(ctx, t, consumer, "-n", "kbind", "get", "deployment", "-l", "app.kubernetes.io/instance=konnector")
			mustContain(t, out, "konnector")
			s.Run(ctx, t, consumer, "-n", "kbind", "rollout", "restart", "deployment/konnector")
			if s.Mode == harness.Kind {
				s.Run(ctx, t, consumer, "-n", "kbind", "rollout", "status", "deployment/konnector", "--timeout=3m")
			} else if got := jsonpath(ctx, t, `{.spec.template.metadata.annotations.kubectl\.kubernetes\.io/restartedAt}`, consumer, "-n", "kbind", "get", "deployment", "konnector"); got == "" {
				t.Error("rollout restart did not stamp the Pod template")
			}
			return ctx
		}).
		Assess("no heartbeat Lease: kbind's Lease is there and renews", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			local := jsonpath(ctx, t, "{.status.localClusterUID}", consumer, "get", "connection", connection)
			lease := "provider-" + local[:10]
			out := s.EventuallyOutput(ctx, t, harness.Contains("kbind", lease), provider, "get", "leases", "-A", "-l", "core.kbind.io/managed=true")
			mustContain(t, out, "NAMESPACE", "HOLDER")
			first := jsonpath(ctx, t, "{.spec.renewTime}", provider, "-n", "kbind", "get", "lease", lease)
			s.EventuallyOutput(ctx, t, func(out string) error {
				if strings.TrimSpace(out) == first {
					return errString("renewTime still " + first)
				}
				return nil
			}, provider, "-n", "kbind", "get", "lease", lease, "-o", "jsonpath={.spec.renewTime}")
			if got := jsonpath(ctx, t, `{.spec.holderIdentity}/{.spec.leaseDurationSeconds}/{.metadata.annotations.core\.kbind\.io/connection}`, provider, "-n", "kbind", "get", "lease", lease); got != local+"/60/provider" {
				t.Errorf("Lease holder/duration/connection: %q", got)
			}
			// (beyond) the Connection reports the heartbeat.
			eventuallyCondition(ctx, t, "Heartbeat", "True", "AsExpected", nil, consumer, "get", "connection", connection)
			return ctx
		}).
		Assess("deletion is stuck: finalizers and a provider finalizer holding a delete", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, c := range []struct{ want, ns, kind, name string }{
				{"core.kbind.io/syncer", "team-a", "widget", widget},
				{"core.kbind.io/cleanup", "team-a", "bindings.core.kbind.io", "widgets"},
				{"core.kbind.io/cleanup", "", "connection", connection},
				{"core.kbind.io/cleanup", "kbind", "secret", secretName},
			} {
				args := []string{consumer, "get", c.kind, c.name}
				if c.ns != "" {
					args = append(args, "-n", c.ns)
				}
				if got := jsonpath(ctx, t, "{.metadata.finalizers}", args...); !strings.Contains(got, c.want) {
					t.Errorf("%s %s finalizers %s, want %s", c.kind, c.name, got, c.want)
				}
			}
			// A provider-controller finalizer holds the consumer delete.
			s.Run(ctx, t, provider, "-n", "team-a", "patch", "widget", widget, "--type=merge", "-p", `{"metadata":{"finalizers":["example.org/provider-cleanup"]}}`)
			s.Run(ctx, t, consumer, "-n", "team-a", "delete", "widget", widget, "--wait=false")
			s.EventuallyOutput(ctx, t, func(out string) error {
				if !strings.Contains(out, "core.kbind.io/syncer") || strings.HasPrefix(out, "/") {
					return errString("want a deletionTimestamp and the syncer finalizer, got " + out)
				}
				return nil
			}, consumer, "-n", "team-a", "get", "widget", widget, "-o", "jsonpath={.metadata.deletionTimestamp}/{.metadata.finalizers}")
			s.EventuallyOutput(ctx, t, harness.Contains("example.org/provider-cleanup"), provider, "-n", "team-a", "get", "widget", widget, "-o", "jsonpath={.metadata.deletionTimestamp}/{.metadata.finalizers}")
			// The consumer object is still held while the provider copy is.
			s.Run(ctx, t, consumer, "-n", "team-a", "get", "widget", widget)
			s.Run(ctx, t, provider, "-n", "team-a", "patch", "widget", widget, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
			s.Gone(ctx, t, consumer, "-n", "team-a", "widget", widget)
			s.Gone(ctx, t, provider, "-n", "team-a", "widget", widget)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "-n", "team-a", "delete", "bindings.core.kbind.io", "widgets", "--ignore-not-found", "--timeout=90s")
			// A namespaced Binding never deletes the CRD it installed; the
			// operator does, once nothing binds the API any more.
			s.Run(ctx, t, consumer, "delete", "crd", "widgets.example.org", "--ignore-not-found", "--timeout=60s")
			return ctx
		}).Feature()
}

// execKubeconfig would run a program: kbind refuses it (CONN-2).
const execKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: "https://provider.example:6443"}}]
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, "echo hi"]}
contexts: [{name: p, context: {cluster: p, user: u}}]
current-context: p
`

type errString string

func (e errString) Error() string { return string(e) }

func mustContain(t *testing.T, out string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(out, f) {
			t.Errorf("output lacks %q:\n%s", f, out)
		}
	}
}

func mustNotContain(t *testing.T, out string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if strings.Contains(out, f) {
			t.Errorf("output must not contain %q:\n%s", f, out)
		}
	}
}
