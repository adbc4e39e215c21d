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

package isolationtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/providerevents"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// prefixedRules are a Prefixed consumer's provider permissions
// (docs/isolation.md#prefixed): read the bound APIs cluster-wide, write
// them (confined to the prefix by prefixPolicy), namespaces, the Lease,
// related copies and the provider Events it forwards.
func prefixedRules(resources ...string) []rbacv1.PolicyRule {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return append(append([]rbacv1.PolicyRule{}, discoveryRules...),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.org"}, Resources: resources, Verbs: all},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
		relatedRule,
	)
}

// queueAdds is how many keys were ever added to the sync queue of
// connection's Syncer of gk (the client-go workqueue metric,
// controller-runtime's registry).
func queueAdds(t *testing.T, connection, gk string) float64 {
	t.Helper()
	for _, m := range enginetest.Series(t, "workqueue_adds_total", map[string]string{"name": connection + "/" + gk}) {
		return m.GetCounter().GetValue()
	}
	return 0
}

// TestPrefixedForgedMarkers: the event spoofing of the attack review.
// Consumer A syncs default/db under Prefixed isolation, prefix "fa" (copy
// fa-default/db).
// Tenant B — a Prefixed consumer too, whose credentials read the bound
// APIs cluster-wide and write under its prefix — copies the markers of A's
// copy onto an object of its own in fb-forge, changes it, and records
// Events on it. A provider Event on A's real copy is forwarded to A's
// consumer object (the positive control); none of B's is, and B's object
// queues no sync work in A's Syncer.
func TestPrefixedForgedMarkers(t *testing.T) {
	ctx := context.Background()
	start(t)
	a := tenant{name: "a", consumer: env.Consumer}
	var forger client.Client
	// Prefixes of their own: the admission policies are cluster-wide
	// objects named after them, and other tests use "a" and "b".
	for _, name := range []string{"a", "b"} {
		user, err := env.Pair.Provider.AddUser("consumer-" + name + "-" + t.Name())
		if err != nil {
			t.Fatal(err)
		}
		bindRole(t, "", "kbind-forgery-"+name, user.Name, prefixedRules("gadgets", "clustergadgets"))
		prefixPolicy(t, user.Name, "f"+name)
		c, err := client.New(user.Config, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		if name == "a" {
			a.provider, a.kubeconfig = c, user.Kubeconfig
		} else {
			forger = c
		}
	}
	connect(t, a, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "fa"}, nil, "gadgets.example.org")
	waitBound(t, []tenant{a}, "gadgets.example.org")
	create(t, []tenant{a}, gadgetGVK, key("default", "db"))
	copied := waitCopy(t, gadgetGVK, key("fa-default", "db"), key("default", "db"), "a")
	victim := object(gadgetGVK, "", "", nil)
	if err := a.consumer.Get(ctx, key("default", "db"), victim); err != nil {
		t.Fatal(err)
	}

	// B reads A's copy with its own credentials and forges its markers in
	// a namespace of its own, where it may also record Events.
	var seen unstructured.Unstructured
	seen.SetGroupVersionKind(gadgetGVK)
	if err := forger.Get(ctx, key("fa-default", "db"), &seen); err != nil {
		t.Fatalf("B reading A's copy: %v", err)
	}
	if err := forger.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fb-forge"}}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, "fb-forge", "record-events", "consumer-b-"+t.Name(), []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}})

	// A's Syncer is idle before B starts.
	const gk = "Gadget.example.org"
	var last float64
	var since time.Time
	enginetest.Eventually(t, "A's sync queue idle for a second", func() error {
		if n := queueAdds(t, "provider", gk); n != last || since.IsZero() {
			last, since = n, time.Now()
		}
		if time.Since(since) < time.Second {
			return fmt.Errorf("%v adds, last change %s ago", last, time.Since(since))
		}
		return nil
	})
	before := queueAdds(t, "provider", gk)

	forged := object(gadgetGVK, "fb-forge", "db", map[string]any{"owner": "b"})
	forged.SetLabels(seen.GetLabels())
	forged.SetAnnotations(seen.GetAnnotations())
	if err := forger.Create(ctx, forged); err != nil {
		t.Fatalf("B creating its forged object: %v", err)
	}
	for i := range 3 {
		if err := unstructured.SetNestedField(forged.Object, int64(i), "spec", "round"); err != nil {
			t.Fatal(err)
		}
		if err := forger.Update(ctx, forged); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	fake := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "fb-forge", Name: "db.forged"},
		InvolvedObject: corev1.ObjectReference{APIVersion: gadgetGVK.GroupVersion().String(), Kind: "Gadget", Namespace: "fb-forge", Name: "db", UID: forged.GetUID()},
		Type:           corev1.EventTypeWarning, Reason: "Compromised", Message: "forged by b: rotate your credentials at evil.example", Count: 1, FirstTimestamp: now, LastTimestamp: now}
	if err := forger.Create(ctx, fake); err != nil {
		t.Fatalf("B recording an Event on its forged object: %v", err)
	}

	// The positive control, recorded after the forgery: the provider's
	// controller records an Event on A's real copy.
	genuine := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "fa-default", Name: "db.genuine"},
		InvolvedObject: corev1.ObjectReference{APIVersion: gadgetGVK.GroupVersion().String(), Kind: "Gadget", Namespace: "fa-default", Name: "db", UID: copied.GetUID()},
		Type:           corev1.EventTypeNormal, Reason: "Provisioned", Message: "provisioned for a", Count: 1, FirstTimestamp: now, LastTimestamp: now}
	if err := env.Provider.Create(ctx, genuine); err != nil {
		t.Fatal(err)
	}
	forwarded := func() []corev1.Event {
		t.Helper()
		var list corev1.EventList
		if err := a.consumer.List(ctx, &list, client.InNamespace("default"), client.MatchingFields{"involvedObject.uid": string(victim.GetUID())}); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	enginetest.Eventually(t, "the genuine provider Event forwarded to A's default/db", func() error {
		for _, e := range forwarded() {
			if e.Name == providerevents.Name("db", genuine.UID) {
				return nil
			}
		}
		return fmt.Errorf("not there")
	})
	for _, e := range forwarded() {
		if e.Reason == fake.Reason || strings.Contains(e.Message, "forged by b") || e.Name == providerevents.Name("db", fake.UID) {
			t.Errorf("B's forged Event reached A's default/db: %s %s: %s", e.Name, e.Reason, e.Message)
		}
	}
	if after := queueAdds(t, "provider", gk); after != before {
		t.Errorf("B's forged object queued sync work in A's Syncer: %v keys added (before %v)", after-before, before)
	}

	if err := forger.Delete(ctx, forged); err != nil {
		t.Fatal(err)
	}
	cleanup(t, []tenant{a}, gadgetGVK, key("default", "db"))
	teardown(t, a)
}
