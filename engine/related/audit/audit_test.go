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

package audit_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// engineUserAgent tells the engine's consumer requests from the test's
// own; on the provider the session's User-Agent does.
const (
	engineUserAgent   = "kbind-engine-under-audit"
	providerUserAgent = "kbind-konnector"
)

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if ns := obj.GetNamespace(); ns != "" {
			if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

func present(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName()), func() error {
		return c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	})
}

// reconciles is how often the controller reconciled so far.
func reconciles(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// engineReads are the engine's lists and watches of Secrets and ConfigMaps
// in an audit log.
func engineReads(t *testing.T, path, userAgent string) []enginetest.AuditEvent {
	t.Helper()
	events, err := enginetest.ReadAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []enginetest.AuditEvent
	for _, e := range events {
		if !strings.HasPrefix(e.UserAgent, userAgent) || (e.Verb != "list" && e.Verb != "watch") {
			continue
		}
		if r := e.Resource(); r == "secrets" || r == "configmaps" {
			out = append(out, e)
		}
	}
	return out
}

// TestRelatedReadsAreSelectedAndNotPerReconcile copies related resources
// in both directions, for a Binding and a ClusterBinding, and then reads
// the audit logs: every list or watch of Secrets or ConfigMaps the engine
// made is in an allowed kubeconfig Secret namespace (consumer only) or
// carries a label or field selector, and resyncs add no list or watch.
func TestRelatedReadsAreSelectedAndNotPerReconcile(t *testing.T) {
	// envtest's default start timeout (20 s) is overrun on a loaded
	// machine: three minutes, unless the caller chose.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		t.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "3m")
	}
	pairOpts, audit, err := enginetest.AuditPair(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, stop, err := enginetest.Start(enginetest.Options{
		Pair: pairOpts, UserAgent: engineUserAgent,
		// A short resync: several pass in the measured window.
		Engine: engine.Options{BindingResync: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
		Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
			NamespacedBindings: enginetest.AdmitAllNamespaces()}}
	create(t, env.Consumer,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}}, conn)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	// Sources on both sides, and objects no entry selects.
	create(t, env.Provider,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-a", Name: "db", Labels: map[string]string{"app": "db"}}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-a", Name: "unselected"}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-c", Name: "shared-settings"}, Data: map[string]string{"k": "v"}},
	)
	create(t, env.Consumer,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-a", Name: "settings"}, Data: map[string]string{"k": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-b", Name: "token", Labels: map[string]string{"share": "up"}}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-b", Name: "unselected"}, Data: map[string][]byte{"k": []byte("v")}},
	)
	apis := []kbindv1alpha1.APIReference{{Name: "none.example.org"}}
	create(t, env.Consumer,
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-a", Name: "related"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: apis,
			RelatedResources: []kbindv1alpha1.RelatedResource{
				{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider,
					Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
				{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromConsumer,
					Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"settings"}}},
			}}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "related"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: apis,
			RelatedResources: []kbindv1alpha1.RelatedResource{
				{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer,
					Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"share": "up"}}}},
				{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromProvider,
					Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"shared-settings"}}},
			}}},
	)
	present(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-a", Name: "db"}})
	present(t, env.Provider, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-a", Name: "settings"}})
	present(t, env.Provider, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-b", Name: "token"}})
	present(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-c", Name: "shared-settings"}})

	// Several resyncs of both binding kinds add no list or watch.
	consumerBefore := len(engineReads(t, audit.ConsumerLog, engineUserAgent))
	providerBefore := len(engineReads(t, audit.ProviderLog, providerUserAgent))
	bindings, clusterBindings := reconciles(t, "binding"), reconciles(t, "clusterbinding")
	const resyncs = 5
	enginetest.Eventually(t, fmt.Sprintf("%d resyncs of each binding", resyncs), func() error {
		if b, cb := reconciles(t, "binding")-bindings, reconciles(t, "clusterbinding")-clusterBindings; b < resyncs || cb < resyncs {
			return fmt.Errorf("%v Binding and %v ClusterBinding reconciles so far", b, cb)
		}
		return nil
	})
	consumerReads := engineReads(t, audit.ConsumerLog, engineUserAgent)
	providerReads := engineReads(t, audit.ProviderLog, providerUserAgent)
	for _, grew := range []struct {
		side          string
		before, after int
		reads         []enginetest.AuditEvent
	}{{"consumer", consumerBefore, len(consumerReads), consumerReads}, {"provider", providerBefore, len(providerReads), providerReads}} {
		if grew.after != grew.before {
			t.Errorf("the engine listed or watched Secrets/ConfigMaps on the %s %d time(s) during %d resyncs:\n%s",
				grew.side, grew.after-grew.before, resyncs, describe(grew.reads[grew.before:]))
		}
	}

	// Every list and watch is selected, or in the allowed Secret namespace
	// (consumer only).
	if len(consumerReads) == 0 || len(providerReads) == 0 {
		t.Fatalf("no engine reads in the audit logs (consumer %d, provider %d): the test sees nothing", len(consumerReads), len(providerReads))
	}
	t.Logf("engine reads on the consumer:\n%s", distinct(consumerReads))
	t.Logf("engine reads on the provider:\n%s", distinct(providerReads))
	reported := map[string]bool{}
	for _, e := range consumerReads {
		if !e.Selected() && e.Namespace() != enginetest.SecretNamespace && !reported["consumer "+e.RequestURI] {
			reported["consumer "+e.RequestURI] = true
			t.Errorf("consumer: an unselected %s outside the allowed Secret namespace: %s", e.Verb, e)
		}
	}
	for _, e := range providerReads {
		if !e.Selected() && !reported["provider "+e.RequestURI] {
			reported["provider "+e.RequestURI] = true
			t.Errorf("provider: an unselected %s: %s", e.Verb, e)
		}
	}
}

func describe(events []enginetest.AuditEvent) string {
	var b strings.Builder
	for i, e := range events {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(events)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// distinct lists each kind of read once: verb, path and selectors.
func distinct(events []enginetest.AuditEvent) string {
	seen := map[string]int{}
	for _, e := range events {
		q := e.Query()
		path, _, _ := strings.Cut(e.RequestURI, "?")
		seen[fmt.Sprintf("%s %s labelSelector=%q fieldSelector=%q", strings.ToUpper(e.Verb), path, q.Get("labelSelector"), q.Get("fieldSelector"))]++
	}
	lines := make([]string, 0, len(seen))
	for l, n := range seen {
		lines = append(lines, fmt.Sprintf("  %dx %s", n, l))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
