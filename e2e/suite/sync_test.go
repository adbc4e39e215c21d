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
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/e2e/harness"
)

// applyOrderFeature applies one file holding the kubeconfig Secret, the
// Connection and a ClusterBinding, in every order of the three, and
// deletes it again with one `kubectl delete -f`.
func applyOrderFeature() features.Feature {
	return features.New("one-file apply in any order").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("orders", "Order", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("orders"))
			return ctx
		}).
		Assess("every permutation converges and deletes cleanly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			conn := harness.ConnectionManifest("order", "order-kubeconfig", s.ProviderKubeconfig(harness.ProviderContext), "")
			secret, connection, _ := strings.Cut(conn, "---\n")
			docs := map[string]string{"Secret": secret, "Connection": connection, "ClusterBinding": clusterBinding("order", "order", "", "orders.example.org")}
			for _, order := range permutations([]string{"Secret", "Connection", "ClusterBinding"}) {
				parts := make([]string, len(order))
				for i, kind := range order {
					parts[i] = docs[kind]
				}
				file := s.WriteFile(t, strings.Join(parts, "---\n"))
				t.Logf("order %v", order)
				s.Run(ctx, t, consumer, "apply", "-f", file)
				waitReady(ctx, t, "clusterbinding/order", "connection/order")
				name := "o-" + strings.ToLower(strings.Join([]string{order[0][:3], order[1][:3], order[2][:3]}, "-"))
				s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Order", "orders", name, "{count: 1}"))
				eventuallyJSONPath(ctx, t, "1", "{.spec.count}", provider, "-n", "orders", "get", "order", name)
				// One delete for everything: the finalizers order it.
				s.Run(ctx, t, consumer, "delete", "-f", file, "--wait=false")
				s.Gone(ctx, t, consumer, "connection", "order")
				s.Gone(ctx, t, consumer, "clusterbinding", "order")
				s.Gone(ctx, t, consumer, "-n", "kbind", "secret", "order-kubeconfig")
				s.Gone(ctx, t, consumer, "crd", "orders.example.org")
				s.Gone(ctx, t, provider, "-n", "orders", "order", name)
			}
			return ctx
		}).Feature()
}

func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{append([]string{}, xs...)}
	}
	var out [][]string
	for i := range xs {
		rest := append(append([]string{}, xs[:i]...), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{xs[i]}, p...))
		}
	}
	return out
}

// syncFeature: spec up, status down, update, provider drift repaired,
// delete.
func syncFeature() features.Feature {
	return features.New("spec up, status down, update, delete").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("gadgets", "Gadget", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("sync")+clusterBinding("gadgets", connection, "", "gadgets.example.org"))
			waitReady(ctx, t, "clusterbinding/gadgets")
			return ctx
		}).
		Assess("spec goes up", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Gadget", "sync", "g1", "{size: 3}"))
			eventuallyJSONPath(ctx, t, "3", "{.spec.size}", provider, "-n", "sync", "get", "gadget", "g1")
			// kbind created the provider namespace, marked.
			if got := jsonpath(ctx, t, `{.metadata.labels.core\.kbind\.io/managed}`, provider, "get", "namespace", "sync"); got != "true" {
				t.Errorf("provider namespace managed label %q", got)
			}
			return ctx
		}).
		Assess("status comes down", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, provider, "-n", "sync", "patch", "gadget", "g1", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"}}`)
			eventuallyJSONPath(ctx, t, "Running", "{.status.phase}", consumer, "-n", "sync", "get", "gadget", "g1")
			return ctx
		}).
		Assess("updates go up and provider edits are repaired", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "-n", "sync", "patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"size":5}}`)
			eventuallyJSONPath(ctx, t, "5", "{.spec.size}", provider, "-n", "sync", "get", "gadget", "g1")
			s.Run(ctx, t, provider, "-n", "sync", "patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"size":99}}`)
			eventuallyJSONPath(ctx, t, "5", "{.spec.size}", provider, "-n", "sync", "get", "gadget", "g1")
			s.Run(ctx, t, provider, "-n", "sync", "delete", "gadget", "g1")
			eventuallyJSONPath(ctx, t, "5", "{.spec.size}", provider, "-n", "sync", "get", "gadget", "g1")
			// Status is not lost by the re-creation: the consumer keeps it
			// until the provider reports a new one.
			eventuallyJSONPath(ctx, t, "Running", "{.status.phase}", consumer, "-n", "sync", "get", "gadget", "g1")
			return ctx
		}).
		Assess("delete removes the provider copy first", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "-n", "sync", "delete", "gadget", "g1", "--timeout=60s")
			s.Gone(ctx, t, provider, "-n", "sync", "gadget", "g1")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "gadgets", "--ignore-not-found", "--timeout=90s")
			s.Gone(ctx, t, consumer, "crd", "gadgets.example.org")
			return ctx
		}).Feature()
}

// conflictsFeature: ForeignObjectExists, OwnedByAnother, then Adopt takes
// the foreign object and still leaves the other consumer's alone.
func conflictsFeature() features.Feature {
	const ns = "conflicts"
	return features.New("conflicts: ForeignObjectExists, OwnedByAnother, Adopt").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("levers", "Lever", "example.org", "Namespaced", true)+"---\n"+namespaces(ns))
			s.Run(ctx, t, provider, "wait", "--for=condition=Established", "crd/levers.example.org", "--timeout=30s")
			s.Apply(ctx, t, harness.ProviderContext, object("example.org", "Lever", ns, "foreign", "{owner: provider-team}")+"---\n"+
				fmt.Sprintf(`apiVersion: example.org/v1alpha1
kind: Lever
metadata:
  name: other
  namespace: %s
  labels: {core.kbind.io/managed: "true", core.kbind.io/consumer-cluster-uid: another-consumer}
  annotations: {core.kbind.io/consumer-cluster-uid: another-consumer, core.kbind.io/consumer-object-uid: "0000"}
spec: {owner: another-consumer}
`, ns))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+clusterBinding("levers", connection, "", "levers.example.org"))
			waitReady(ctx, t, "clusterbinding/levers")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Lever", ns, "foreign", "{owner: me}")+"---\n"+object("example.org", "Lever", ns, "other", "{owner: me}"))
			return ctx
		}).
		Assess("Fail reports both kinds of conflict and writes nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for name, reason := range map[string]string{"foreign": "ForeignObjectExists", "other": "OwnedByAnother"} {
				s.EventuallyOutput(ctx, t, harness.Equals(reason), consumer, "-n", ns, "get", "lever", name, "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/conflict}`)
			}
			eventuallyCondition(ctx, t, "Conflicts", "True", "", []string{"2 object(s)"}, consumer, "get", "clusterbinding", "levers")
			eventuallyJSONPath(ctx, t, "2", "{.status.boundAPIs[0].conflictCount}", consumer, "get", "clusterbinding", "levers")
			s.Run(ctx, t, consumer, "get", "clusterbindings") // the Conflicts column
			if got := jsonpath(ctx, t, "{.spec.owner}", provider, "-n", ns, "get", "lever", "foreign"); got != "provider-team" {
				t.Errorf("foreign object overwritten: %q", got)
			}
			return ctx
		}).
		Assess("Adopt takes the unmarked object, never the other consumer's", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "patch", "clusterbinding", "levers", "--type=merge", "-p", `{"spec":{"conflictPolicy":"Adopt"}}`)
			eventuallyJSONPath(ctx, t, "me", "{.spec.owner}", provider, "-n", ns, "get", "lever", "foreign")
			eventuallyJSONPath(ctx, t, "", `{.metadata.annotations.core\.kbind\.io/conflict}`, consumer, "-n", ns, "get", "lever", "foreign")
			eventuallyCondition(ctx, t, "Conflicts", "True", "OwnedByAnother", []string{"1 object(s)"}, consumer, "get", "clusterbinding", "levers")
			if got := jsonpath(ctx, t, "{.spec.owner}", provider, "-n", ns, "get", "lever", "other"); got != "another-consumer" {
				t.Errorf("another consumer's object was taken: %q", got)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "levers", "--ignore-not-found", "--timeout=90s")
			s.Gone(ctx, t, consumer, "crd", "levers.example.org")
			// The adopted copy went with the binding; the other consumer's stays.
			s.Gone(ctx, t, provider, "-n", ns, "lever", "foreign")
			s.Run(ctx, t, provider, "-n", ns, "get", "lever", "other")
			s.Run(ctx, t, provider, "-n", ns, "delete", "lever", "other")
			return ctx
		}).Feature()
}

// orphanFeature: the deletion-policy annotation keeps the provider copy.
func orphanFeature() features.Feature {
	const ns = "orphan"
	return features.New("Orphan").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("anchors", "Anchor", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+clusterBinding("anchors", connection, "", "anchors.example.org"))
			waitReady(ctx, t, "clusterbinding/anchors")
			return ctx
		}).
		Assess("deleting an Orphan object keeps the provider copy", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, fmt.Sprintf(`apiVersion: example.org/v1alpha1
kind: Anchor
metadata:
  name: kept
  namespace: %s
  annotations: {core.kbind.io/deletion-policy: Orphan}
spec: {depth: 7}
`, ns))
			eventuallyJSONPath(ctx, t, "7", "{.spec.depth}", provider, "-n", ns, "get", "anchor", "kept")
			s.Run(ctx, t, consumer, "-n", ns, "delete", "anchor", "kept", "--timeout=60s")
			s.Gone(ctx, t, consumer, "-n", ns, "anchor", "kept")
			s.Run(ctx, t, provider, "-n", ns, "get", "anchor", "kept")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "anchors", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, provider, "-n", ns, "get", "anchor", "kept") // orphaned: the unbind does not take it
			s.Run(ctx, t, provider, "-n", ns, "delete", "anchor", "kept")
			return ctx
		}).Feature()
}

// scopeFeature: a namespaced Binding covers its namespace only; a
// ClusterBinding for the same API takes precedence and the Binding says
// so; a Binding cannot activate a cluster-scoped API.
func scopeFeature() features.Feature {
	return features.New("namespaced Binding vs ClusterBinding and overlap").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("gizmos", "Gizmo", "example.org", "Namespaced", true)+"---\n"+
				harness.CRDManifest("racks", "Rack", "example.org", "Cluster", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("scope-a", "scope-b")+binding("scope-a", "gizmos", connection, "", "gizmos.example.org"))
			waitReady(ctx, t, "-n", "scope-a", "bindings.core.kbind.io/gizmos")
			return ctx
		}).
		Assess("a Binding syncs its namespace only", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Gizmo", "scope-b", "outside", "{count: 2}"))
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Gizmo", "scope-a", "inside", "{count: 1}"))
			eventuallyJSONPath(ctx, t, "1", "{.spec.count}", provider, "-n", "scope-a", "get", "gizmo", "inside")
			// The instance counts of the Binding show one object; the one in
			// scope-b has no finalizer and no provider copy.
			eventuallyJSONPath(ctx, t, "1/1", "{.status.boundAPIs[0].instances.total}/{.status.boundAPIs[0].instances.synced}", consumer, "-n", "scope-a", "get", "bindings.core.kbind.io", "gizmos")
			if got := jsonpath(ctx, t, "{.metadata.finalizers}", consumer, "-n", "scope-b", "get", "gizmo", "outside"); got != "" {
				t.Errorf("an object outside the Binding's namespace got finalizers %s", got)
			}
			if out, err := s.Kubectl(ctx, provider, "-n", "scope-b", "get", "gizmo", "outside"); err == nil {
				t.Errorf("an object outside the Binding's namespace was synced: %s", out)
			}
			return ctx
		}).
		Assess("a Binding listing a cluster-scoped API is not Ready", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, binding("scope-a", "racks", connection, "", "racks.example.org"))
			eventuallyCondition(ctx, t, "Ready", "False", "APINotExported", []string{"racks.example.org"}, consumer, "-n", "scope-a", "get", "bindings.core.kbind.io", "racks")
			s.Run(ctx, t, consumer, "-n", "scope-a", "delete", "bindings.core.kbind.io", "racks", "--timeout=60s")
			return ctx
		}).
		Assess("a ClusterBinding for the same API covers every namespace and the Binding reports the overlap", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, clusterBinding("gizmos", connection, "", "gizmos.example.org"))
			waitReady(ctx, t, "clusterbinding/gizmos")
			eventuallyJSONPath(ctx, t, "2", "{.spec.count}", provider, "-n", "scope-b", "get", "gizmo", "outside")
			eventuallyCondition(ctx, t, "Ready", "False", "Pending", []string{"gizmos.example.org", "ClusterBinding"}, consumer, "-n", "scope-a", "get", "bindings.core.kbind.io", "gizmos")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "gizmos", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "-n", "scope-a", "delete", "bindings.core.kbind.io", "gizmos", "--ignore-not-found", "--timeout=90s")
			s.Gone(ctx, t, provider, "-n", "scope-a", "gizmo", "inside")
			s.Gone(ctx, t, provider, "-n", "scope-b", "gizmo", "outside")
			// A namespaced Binding never deletes a CRD: the operator removes
			// the CRD (and with it the consumer objects) once it is unbound.
			s.Run(ctx, t, consumer, "delete", "crd", "gizmos.example.org", "--timeout=60s")
			return ctx
		}).Feature()
}
