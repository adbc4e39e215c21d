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
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/e2e/harness"
)

// rotationFeature: the kubeconfig Secret is rotated to another identity
// and the old one revoked; sync continues without a konnector restart.
func rotationFeature() features.Feature {
	const ns = "rotation"
	return features.New("credential rotation without restart").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("cranks", "Crank", "example.org", "Namespaced", true))
			return ctx
		}).
		Assess("rotate, revoke the old identity, keep syncing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubeconfigOf := func(sa string) []byte {
				token := s.ServiceAccountToken(ctx, t, harness.ProviderContext, "kbind-rotation", sa)
				s.Run(ctx, t, provider, "create", "clusterrolebinding", "kbind-rotation-"+sa, "--clusterrole=cluster-admin", "--serviceaccount=kbind-rotation:"+sa)
				kc, err := s.KubeconfigVariant(harness.ProviderContext, token, "")
				if err != nil {
					t.Fatal(err)
				}
				return kc
			}
			alice, bob := kubeconfigOf("alice"), kubeconfigOf("bob")
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+harness.ConnectionManifest("rotate", "rotate-kubeconfig", alice, "")+"---\n"+
				clusterBinding("cranks", "rotate", "", "cranks.example.org"))
			waitReady(ctx, t, "connection/rotate", "clusterbinding/cranks")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Crank", ns, "c1", "{turns: 1}"))
			eventuallyJSONPath(ctx, t, "1", "{.spec.turns}", provider, "-n", ns, "get", "crank", "c1")

			secret, _, _ := strings.Cut(harness.ConnectionManifest("rotate", "rotate-kubeconfig", bob, ""), "---\n")
			s.Apply(ctx, t, harness.ConsumerContext, secret)
			s.Run(ctx, t, provider, "delete", "clusterrolebinding", "kbind-rotation-alice")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Crank", ns, "c2", "{turns: 2}"))
			eventuallyJSONPath(ctx, t, "2", "{.spec.turns}", provider, "-n", ns, "get", "crank", "c2")
			s.Run(ctx, t, consumer, "-n", ns, "patch", "crank", "c1", "--type=merge", "-p", `{"spec":{"turns":3}}`)
			eventuallyJSONPath(ctx, t, "3", "{.spec.turns}", provider, "-n", ns, "get", "crank", "c1")
			waitReady(ctx, t, "connection/rotate")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "cranks", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "delete", "connection", "rotate", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "rotate-kubeconfig", "--ignore-not-found", "--timeout=60s")
			s.Gone(ctx, t, provider, "-n", ns, "crank", "c1")
			s.Run(ctx, t, provider, "delete", "clusterrolebinding", "kbind-rotation-bob", "--ignore-not-found")
			return ctx
		}).Feature()
}

// identityFeature: the Secret is pointed at another provider; the pinned
// identity makes the Connection report ClusterIdentityChanged instead of
// syncing to the wrong cluster, and restoring the Secret recovers it.
func identityFeature() features.Feature {
	return features.New("cluster identity change").
		Assess("a swapped provider is refused, the original restored", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			original := harness.ConnectionManifest("ident", "ident-kubeconfig", s.ProviderKubeconfig(harness.ProviderContext), "")
			s.Apply(ctx, t, harness.ConsumerContext, original)
			waitReady(ctx, t, "connection/ident")
			providerUID := jsonpath(ctx, t, "{.metadata.uid}", provider, "get", "namespace", "kube-system")
			eventuallyJSONPath(ctx, t, providerUID, "{.status.remoteClusterUID}", consumer, "get", "connection", "ident")

			swapped, _, _ := strings.Cut(harness.ConnectionManifest("ident", "ident-kubeconfig", s.ProviderKubeconfig(harness.ProviderBContext), ""), "---\n")
			s.Apply(ctx, t, harness.ConsumerContext, swapped)
			eventuallyCondition(ctx, t, "Connected", "False", "ClusterIdentityChanged", nil, consumer, "get", "connection", "ident")
			eventuallyCondition(ctx, t, "Ready", "False", "ClusterIdentityChanged", nil, consumer, "get", "connection", "ident")
			if got := jsonpath(ctx, t, "{.status.remoteClusterUID}", consumer, "get", "connection", "ident"); got != providerUID {
				t.Errorf("the pinned provider UID changed to %q", got)
			}
			// The pin is immutable: an operator cannot clear it by hand either.
			if out, err := s.Kubectl(ctx, consumer, "patch", "connection", "ident", "--subresource=status", "--type=merge", "-p", `{"status":{"remoteClusterUID":"other"}}`); err == nil {
				t.Errorf("the pinned provider UID could be changed: %s", out)
			}
			s.Apply(ctx, t, harness.ConsumerContext, original)
			waitReady(ctx, t, "connection/ident")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "connection", "ident", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "ident-kubeconfig", "--ignore-not-found", "--timeout=60s")
			return ctx
		}).Feature()
}

// restartFeature: the konnector is killed with SIGKILL while a batch is
// syncing and started again; every object arrives exactly once, with no
// conflicts (its own earlier writes are recognised as its own).
func restartFeature() features.Feature {
	const ns, n = "restart", 400
	return features.New("konnector killed with SIGKILL mid-sync and restarted").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("bulbs", "Bulb", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+clusterBinding("bulbs", connection, "", "bulbs.example.org"))
			waitReady(ctx, t, "clusterbinding/bulbs")
			return ctx
		}).
		Assess("kill -9 mid-sync, restart, converge", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			file := s.WriteFile(t, objects("Bulb", ns, "bulb", "watts", n))
			count := func(cluster string) int { return countObjects(ctx, t, cluster, ns, "bulbs") }
			// The objects arrive while the konnector syncs them; it is
			// killed as soon as the first copies are on the provider.
			applied := kubectlInBackground(ctx, consumer, "apply", "-f", file)
			harness.Eventually(t, "the first copies on the provider", func() error {
				if c := count(provider); c == 0 {
					return fmt.Errorf("none yet")
				}
				return nil
			})
			if err := s.Konnector.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			killedAt := count(provider)
			t.Logf("killed with %d of %d on the provider", killedAt, n)
			if killedAt >= n {
				t.Errorf("the kill came after the sync (%d of %d): not mid-sync", killedAt, n)
			}
			if err := <-applied; err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := s.Konnector.Start(ctx); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, "every copy on the provider", func() error {
				if c := count(provider); c != n {
					return fmt.Errorf("%d of %d", c, n)
				}
				return nil
			})
			t.Logf("converged %s after the restart", time.Since(start).Round(time.Millisecond))
			eventuallyJSONPath(ctx, t, strconv.Itoa(n)+"/"+strconv.Itoa(n), "{.status.boundAPIs[0].instances.total}/{.status.boundAPIs[0].instances.synced}", consumer, "get", "clusterbinding", "bulbs")
			eventuallyCondition(ctx, t, "Conflicts", "False", "AsExpected", nil, consumer, "get", "clusterbinding", "bulbs")
			if got := jsonpath(ctx, t, `{range .items[*]}{.metadata.annotations.core\.kbind\.io/conflict}{end}`, consumer, "-n", ns, "get", "bulbs"); got != "" {
				t.Errorf("conflicts after the restart: %q", got)
			}
			if got := jsonpath(ctx, t, "{.spec.watts}", provider, "-n", ns, "get", "bulb", "bulb-399"); got != "399" {
				t.Errorf("bulb-399 spec on the provider: %q", got)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "bulbs", "--ignore-not-found", "--timeout=120s")
			s.Gone(ctx, t, consumer, "crd", "bulbs.example.org")
			s.EventuallyOutput(ctx, t, harness.Equals(""), provider, "-n", ns, "get", "bulbs", "-o", "name")
			return ctx
		}).Feature()
}

// teardownFeature: bindings, then the Connection, then its Secret, then
// `helm uninstall` — and nothing kbind wrote is left behind (heartbeat
// Leases included) except the provider namespaces kbind created and the
// core.kbind.io CRDs the chart keeps on purpose.
func teardownFeature() features.Feature {
	const ns = "teardown"
	return features.New("ordered teardown leaves nothing behind").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("latches", "Latch", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: latch-config, namespace: teardown}\ndata: {a: b}\n---\n"+
				clusterBinding("latches", connection, "  relatedResources:\n  - {resource: configmaps, direction: FromConsumer, selector: {names: [latch-config]}}\n", "latches.example.org"))
			waitReady(ctx, t, "clusterbinding/latches")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Latch", ns, "l1", "{locked: true}"))
			eventuallyJSONPath(ctx, t, "true", "{.spec.locked}", provider, "-n", ns, "get", "latch", "l1")
			eventuallyJSONPath(ctx, t, "b", "{.data.a}", provider, "-n", ns, "get", "configmap", "latch-config")
			return ctx
		}).
		Assess("a Connection deleted first waits for its bindings (DrainingBindings)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "connection", connection, "--wait=false")
			eventuallyCondition(ctx, t, "Ready", "False", "DrainingBindings", []string{"1 binding"}, consumer, "get", "connection", connection)
			// Sync goes on while it waits.
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Latch", ns, "l2", "{locked: false}"))
			eventuallyJSONPath(ctx, t, "false", "{.spec.locked}", provider, "-n", ns, "get", "latch", "l2")
			return ctx
		}).
		Assess("bindings, then the Connection, then the Secret", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			lease := "provider-" + jsonpath(ctx, t, "{.status.localClusterUID}", consumer, "get", "connection", connection)[:10]
			s.Run(ctx, t, provider, "-n", "kbind", "get", "lease", lease)
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "latches", "--timeout=120s")
			s.Gone(ctx, t, provider, "-n", ns, "latch", "l1")
			s.Gone(ctx, t, provider, "-n", ns, "latch", "l2")
			s.Gone(ctx, t, provider, "-n", ns, "configmap", "latch-config")
			s.Gone(ctx, t, consumer, "crd", "latches.example.org")
			s.Gone(ctx, t, consumer, "connection", connection)
			// A Connection deleted on purpose takes its heartbeat Lease along.
			s.Gone(ctx, t, provider, "-n", "kbind", "lease", lease)
			eventuallyJSONPath(ctx, t, "", "{.metadata.finalizers}", consumer, "-n", "kbind", "get", "secret", secretName)
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", secretName, "--timeout=60s")
			return ctx
		}).
		Assess("helm uninstall, and nothing is left behind", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Konnector.Stop(ctx)
			if err := s.Uninstall(); err != nil {
				t.Fatal(err)
			}
			s.EventuallyOutput(ctx, t, harness.Equals(""), consumer, "-n", "kbind", "get", "deployment,serviceaccount,role,rolebinding", "-l", "app.kubernetes.io/instance=konnector", "-o", "name")
			s.EventuallyOutput(ctx, t, harness.Equals(""), consumer, "get", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/instance=konnector", "-o", "name")
			// Consumer: no kbind objects, no CRD kbind installed.
			if out := s.Run(ctx, t, consumer, "get", "connections,clusterbindings,bindings.core.kbind.io", "-A", "-o", "name"); strings.TrimSpace(out) != "" {
				t.Errorf("kbind objects left on the consumer:\n%s", out)
			}
			if out := s.Run(ctx, t, consumer, "get", "crd", "-l", "core.kbind.io/managed=true", "-o", "name"); strings.TrimSpace(out) != "" {
				t.Errorf("kbind-installed CRDs left on the consumer:\n%s", out)
			}
			// The chart keeps the kbind CRDs on uninstall, on purpose.
			s.Run(ctx, t, consumer, "get", "crd", "connections.core.kbind.io")
			// Providers: no copy of anything, in any custom API or the related kinds.
			for _, flag := range []string{provider, providerB} {
				kinds := append(strings.Fields(jsonpath(ctx, t, "{.items[*].metadata.name}", flag, "get", "crds")), "configmaps", "secrets")
				if out := s.Run(ctx, t, flag, "get", strings.Join(kinds, ","), "-A", "-l", "core.kbind.io/managed=true", "-o", "name"); strings.TrimSpace(out) != "" {
					t.Errorf("kbind copies left on %s:\n%s", flag, out)
				}
			}
			// Every Connection is gone, and with it every heartbeat Lease.
			for _, flag := range []string{provider, providerB} {
				if out := s.Run(ctx, t, flag, "get", "leases", "-A", "-l", "core.kbind.io/managed=true", "-o", "name"); strings.TrimSpace(out) != "" {
					t.Errorf("heartbeat Leases left on %s:\n%s", flag, out)
				}
			}
			// By design, the namespaces kbind created on the provider stay
			// (they may hold other things by now).
			t.Logf("provider namespaces kbind created, left in place: %s",
				strings.Join(strings.Fields(s.Run(ctx, t, provider, "get", "namespaces", "-l", "core.kbind.io/managed=true", "-o", "name")), " "))
			return ctx
		}).Feature()
}

// killDuringDeletionFeature: the konnector is killed with SIGKILL while a
// batch of objects is being deleted (some provider copies gone, some not);
// after the restart every consumer object and every provider copy is gone,
// and no finalizer is left behind.
func killDuringDeletionFeature() features.Feature {
	const ns, n = "doomed", 400
	return features.New("konnector killed with SIGKILL mid-deletion and restarted").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("lamps", "Lamp", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+clusterBinding("lamps", connection, "", "lamps.example.org"))
			waitReady(ctx, t, "clusterbinding/lamps")
			s.Run(ctx, t, consumer, "apply", "-f", s.WriteFile(t, objects("Lamp", ns, "lamp", "lumen", n)))
			eventuallyJSONPath(ctx, t, strconv.Itoa(n)+"/"+strconv.Itoa(n), "{.status.boundAPIs[0].instances.total}/{.status.boundAPIs[0].instances.synced}", consumer, "get", "clusterbinding", "lamps")
			return ctx
		}).
		Assess("kill -9 mid-deletion, restart, everything gone", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			count := func(cluster string) int { return countObjects(ctx, t, cluster, ns, "lamps") }
			// The deletions arrive while the konnector releases them; it is
			// killed as soon as the first provider copies are gone.
			deleted := kubectlInBackground(ctx, consumer, "-n", ns, "delete", "lamps", "--all", "--wait=false")
			harness.Eventually(t, "the first provider copies deleted", func() error {
				if c := count(provider); c == n {
					return fmt.Errorf("none deleted yet")
				}
				return nil
			})
			if err := s.Konnector.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			left := count(provider)
			t.Logf("killed with %d of %d provider copies left", left, n)
			if left == 0 {
				t.Errorf("the kill came after the deletion: not mid-deletion")
			}
			if err := <-deleted; err != nil {
				t.Fatal(err)
			}
			if err := s.Konnector.Start(ctx); err != nil {
				t.Fatal(err)
			}
			s.EventuallyOutput(ctx, t, harness.Equals(""), consumer, "-n", ns, "get", "lamps", "-o", "name")
			s.EventuallyOutput(ctx, t, harness.Equals(""), provider, "-n", ns, "get", "lamps", "-o", "name")
			eventuallyJSONPath(ctx, t, "0/0", "{.status.boundAPIs[0].instances.total}/{.status.boundAPIs[0].instances.synced}", consumer, "get", "clusterbinding", "lamps")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "lamps", "--ignore-not-found", "--timeout=120s")
			s.Gone(ctx, t, consumer, "crd", "lamps.example.org")
			return ctx
		}).Feature()
}

// objects is a multi-document manifest of n example.org objects of kind
// in ns, named <prefix>-000…, each with spec {<field>: i}.
func objects(kind, ns, prefix, field string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s---\n", object("example.org", kind, ns, fmt.Sprintf("%s-%03d", prefix, i), fmt.Sprintf("{%s: %d}", field, i)))
	}
	return b.String()
}

// countObjects counts the objects of resource in ns on one cluster (a
// --context argument).
func countObjects(ctx context.Context, t *testing.T, cluster, ns, resource string) int {
	t.Helper()
	return len(strings.Fields(s.Run(ctx, t, cluster, "-n", ns, "get", resource, "-o", "name")))
}

// kubectlInBackground runs kubectl while the test goes on; the channel
// gets its outcome.
func kubectlInBackground(ctx context.Context, args ...string) <-chan error {
	done := make(chan error, 1)
	go func() {
		out, err := s.Kubectl(ctx, args...)
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
		done <- err
	}()
	return done
}
