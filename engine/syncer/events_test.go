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

package syncer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/providerevents"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// recordOn records an Event on the provider about obj, as a provider
// controller would (core/v1, reported by "widget-controller").
func recordOn(t *testing.T, obj *unstructured.Unstructured, name, reason, message string) *corev1.Event {
	t.Helper()
	now := metav1.Now()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: name},
		InvolvedObject: corev1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID()},
		Type: corev1.EventTypeWarning, Reason: reason, Message: message, Source: corev1.EventSource{Component: "widget-controller"},
		Count: 1, FirstTimestamp: now, LastTimestamp: now,
	}
	if err := env.Provider.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

// consumerEvents lists the consumer Events about the consumer object obj,
// the way kubectl describe finds them (by the involved object's UID).
func consumerEvents(t *testing.T, obj *unstructured.Unstructured) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.Consumer.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{"involvedObject.uid": string(obj.GetUID())}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Labels[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue {
			out = append(out, e)
		}
	}
	return out
}

// waitForwarded waits for the consumer Event of the provider Event pe on
// the consumer object obj, with count.
func waitForwarded(t *testing.T, obj *unstructured.Unstructured, pe *corev1.Event, count int32) *corev1.Event {
	t.Helper()
	var got *corev1.Event
	enginetest.Eventually(t, fmt.Sprintf("provider Event %s forwarded to %s/%s with count %d", pe.Name, obj.GetNamespace(), obj.GetName(), count), func() error {
		for _, e := range consumerEvents(t, obj) {
			if e.Name == providerevents.Name(obj.GetName(), pe.UID) {
				if e.Count != count {
					return fmt.Errorf("count %d", e.Count)
				}
				got = e.DeepCopy()
				return nil
			}
		}
		return fmt.Errorf("not there")
	})
	return got
}

// snapshotEvents is every forwarded consumer Event in namespace with its
// resourceVersion. (The test's own namespace: under -count the objects an
// earlier run left, and their Events, are no baseline this test controls.)
func snapshotEvents(t *testing.T, namespace string) map[string]string {
	t.Helper()
	var list corev1.EventList
	if err := env.Consumer.List(context.Background(), &list, client.InNamespace(namespace), client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range list.Items {
		out[e.Namespace+"/"+e.Name] = e.ResourceVersion
	}
	return out
}

// TestProviderEventsDown: an Event the provider records on a copy shows on
// the consumer object (kubectl describe), once, updated when it happens
// again, never for an object that is not this consumer's copy, not
// rewritten after a restart, and bounded in a storm.
func TestProviderEventsDown(t *testing.T) {
	useEnv(t)
	ns := unique("events-a")
	ctx := context.Background()
	w1 := create(t, env.Consumer, object(widgetGVK, ns, "w1", map[string]any{"size": int64(1)}))
	c1 := waitCopy(t, widgetGVK, ns, "w1", nil)

	pe := recordOn(t, c1, "w1.quota", "ProvisioningFailed", "quota exceeded: 3 databases per team")
	got := waitForwarded(t, w1, pe, 1)
	if got.Type != corev1.EventTypeWarning || got.Reason != "ProvisioningFailed" || got.Message != pe.Message ||
		got.Source.Component != "widget-controller (provider provider)" || got.InvolvedObject.Kind != "Widget" {
		t.Errorf("forwarded Event %+v", got)
	}
	out, err := testenv.Kubectl(ctx, env.Pair.Consumer.KubeconfigPath, "describe", "widgets.example.org", "-n", ns, "w1")
	if err != nil || !strings.Contains(out, "ProvisioningFailed") || !strings.Contains(out, "quota exceeded: 3 databases per team") {
		t.Errorf("kubectl describe does not show the provider's Event (%v):\n%s", err, out)
	}

	// It happens again: the same consumer Event, updated.
	pe.Count, pe.LastTimestamp = 4, metav1.NewTime(pe.LastTimestamp.Add(time.Minute))
	if err := env.Provider.Update(ctx, pe); err != nil {
		t.Fatal(err)
	}
	waitForwarded(t, w1, pe, 4)
	if n := len(consumerEvents(t, w1)); n != 1 {
		t.Errorf("%d consumer Events for one provider Event", n)
	}

	// An Event on a provider object that is not our copy (a foreign
	// object in the way of the test namespace's f1) is not forwarded to f1.
	foreign := object(widgetGVK, ns, "f1", map[string]any{"owner": "someone"})
	if err := env.Provider.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	f1 := create(t, env.Consumer, object(widgetGVK, ns, "f1", map[string]any{"size": int64(1)}))
	waitConflict(t, widgetGVK, ns, "f1", kbindv1alpha1.ReasonForeignObjectExists)
	recordOn(t, foreign, "f1.foreign", "Foreign", "about someone else's object")
	// The forwarder works through its queue in order: once a later Event
	// is forwarded, the foreign one has been decided.
	later := recordOn(t, c1, "w1.later", "Resized", "resized")
	waitForwarded(t, w1, later, 1)
	if evs := consumerEvents(t, f1); len(evs) > 0 {
		t.Errorf("an Event on a foreign provider object was forwarded: %+v", evs[0])
	}

	// A restart writes no forwarded Event again.
	before := snapshotEvents(t, ns)
	env.StopEngine()
	if err := env.StartEngine(); err != nil {
		t.Fatal(err)
	}
	afterRestart := recordOn(t, c1, "w1.after-restart", "Resized", "resized again")
	waitForwarded(t, w1, afterRestart, 1)
	after := snapshotEvents(t, ns)
	for k, rv := range before {
		if after[k] != rv {
			t.Errorf("forwarded Event %s rewritten after the restart (resourceVersion %s -> %s)", k, rv, after[k])
		}
	}
	if len(after) != len(before)+1 {
		t.Errorf("%d forwarded Events after the restart, want %d", len(after), len(before)+1)
	}

	// A storm of distinct Events on one object: the first 25 are forwarded
	// (the per-object burst), the rest dropped and counted.
	w2 := create(t, env.Consumer, object(widgetGVK, ns, "w2", map[string]any{"size": int64(1)}))
	c2 := waitCopy(t, widgetGVK, ns, "w2", nil)
	dropped := testutil.ToFloat64(metrics.ProviderEventsDropped.WithLabelValues("provider", "Widget.example.org"))
	const storm = 60
	stormStarted := time.Now()
	for i := 0; i < storm; i++ {
		recordOn(t, c2, fmt.Sprintf("w2.storm-%02d", i), "Flapping", fmt.Sprintf("flap %d", i))
	}
	enginetest.Eventually(t, "the storm decided", func() error {
		n := len(consumerEvents(t, w2))
		d := testutil.ToFloat64(metrics.ProviderEventsDropped.WithLabelValues("provider", "Widget.example.org")) - dropped
		if n+int(d) < storm {
			return fmt.Errorf("%d forwarded, %v dropped", n, d)
		}
		return nil
	})
	// The per-object bucket holds PerObjectBurst and refills one every
	// PerObjectEvery from the storm's first Event on: while the storm was
	// recorded and decided (elapsed, measured), at most
	// PerObjectBurst + elapsed/PerObjectEvery fit in. Slack: one more for a
	// refill under way, and never less than the 2 this bound always had; a
	// busy machine takes longer, and the bound follows it.
	elapsed := time.Since(stormStarted)
	limits := providerevents.DefaultLimits
	most := max(limits.PerObjectBurst+2, limits.PerObjectBurst+int(elapsed/limits.PerObjectEvery)+1)
	t.Logf("storm of %d Events recorded and decided in %s: at most %d forwarded", storm, elapsed, most)
	if n := len(consumerEvents(t, w2)); n < limits.PerObjectBurst || n > most {
		t.Errorf("%d of %d storm Events forwarded, want %d (the per-object burst), at most %d after %s", n, storm, limits.PerObjectBurst, most, elapsed)
	}
}

// TestProviderEventsPolicy: a Binding with providerEvents Ignore forwards
// nothing in its namespace while a Forward Binding in another namespace
// does; credentials that may not watch Events are reported on the binding
// (sync goes on) until it says Ignore.
func TestProviderEventsPolicy(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	quietGVK, quiets := namespacedAPI(t, "Quiet", "quiet.example.org")
	noticedGVK, noticeds := namespacedAPI(t, "Noticed", "noticed.example.org")
	quietNS, loudNS, noticedNS, connection := unique("quiet-a"), unique("loud-a"), unique("noticed-a"), unique("noevents")
	for ns, policy := range map[string]kbindv1alpha1.ProviderEventsPolicy{quietNS: kbindv1alpha1.ProviderEventsIgnore, loudNS: ""} {
		ensureNamespace(t, env.Consumer, ns)
		b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quiets"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, ProviderEvents: policy,
			APIs: []kbindv1alpha1.APIReference{{Name: quiets}}}}
		if err := env.Consumer.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	quiet := create(t, env.Consumer, object(quietGVK, quietNS, "q1", nil))
	loud := create(t, env.Consumer, object(quietGVK, loudNS, "q1", nil))
	recordOn(t, waitCopy(t, quietGVK, quietNS, "q1", nil), "q1.hush", "Hush", "not forwarded")
	pe := recordOn(t, waitCopy(t, quietGVK, loudNS, "q1", nil), "q1.loud", "Loud", "forwarded")
	waitForwarded(t, loud, pe, 1)
	if evs := consumerEvents(t, quiet); len(evs) > 0 {
		t.Errorf("a binding with providerEvents Ignore got a provider Event: %+v", evs[0])
	}

	user := addUser(t, "kbind-noevents", "kbind:noevents")
	enginetest.Grant(t, env.Provider, user.Name, user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{noticedGVK.Group}, Resources: []string{"noticeds"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	kc, err := testenv.KubeconfigFor(connection, user.Config)
	if err != nil {
		t.Fatal(err)
	}
	connectAs(t, connection, kc)
	cb := bindCluster(t, noticeds, connection, noticeds)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list events in every namespace", "spec.providerEvents: Ignore")
	create(t, env.Consumer, object(noticedGVK, noticedNS, "n1", map[string]any{"a": "b"}))
	waitCopy(t, noticedGVK, noticedNS, "n1", nil)

	enginetest.Eventually(t, "providerEvents: Ignore set", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		cb.Spec.ProviderEvents = kbindv1alpha1.ProviderEventsIgnore
		return env.Consumer.Update(ctx, cb)
	})
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
}
