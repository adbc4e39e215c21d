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
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// importing sets providerObjects: Import on the tenant's ClusterBinding of
// api.
func importing(t *testing.T, tn tenant, api string) {
	t.Helper()
	setProviderObjects(t, tn, api, kbindv1alpha1.ProviderObjectsImport)
}

// setProviderObjects sets providerObjects on the tenant's ClusterBinding
// of api.
func setProviderObjects(t *testing.T, tn tenant, api string, policy kbindv1alpha1.ProviderObjectsPolicy) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := tn.consumer.Get(ctx, key("", api), cb); err != nil {
			return err
		}
		cb.Spec.APIs[0].ProviderObjects = policy
		return tn.consumer.Update(ctx, cb)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// providerWidget creates, as the provider's own team (admin), a Widget
// without any of kbind's markers.
func providerWidget(t *testing.T, ns, name string, size int64) *unstructured.Unstructured {
	t.Helper()
	u := object(widgetGVK, ns, name, map[string]any{"size": size})
	if err := env.Provider.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// waitImported waits until the consumer holds the imported copy at k with
// spec.size size (and, when phase is set, status.phase).
func waitImported(t *testing.T, tn tenant, k client.ObjectKey, size int64, phase string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	enginetest.Eventually(t, fmt.Sprintf("imported copy %s on consumer %s, size %d, phase %q", k, tn.name, size, phase), func() error {
		u := object(widgetGVK, "", "", nil)
		if err := tn.consumer.Get(context.Background(), k, u); err != nil {
			return err
		}
		if u.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] != kbindv1alpha1.OwnerProvider {
			return fmt.Errorf("annotations %v", u.GetAnnotations())
		}
		if s, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); s != size {
			return fmt.Errorf("spec.size %d", s)
		}
		if p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "" && p != phase {
			return fmt.Errorf("status.phase %q", p)
		}
		got = u
		return nil
	})
	return got
}

// widgetsOn lists the consumer's Widgets as "namespace/name".
func widgetsOn(t *testing.T, c client.Client) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		out = append(out, u.GetNamespace()+"/"+u.GetName())
	}
	slices.Sort(out)
	return out
}

// TestImportUnderNamespaceIsolation: the provider's own Widgets in a
// consumer's isolation namespace, at names the mapping produces, appear on
// that consumer owned by the provider, follow the provider's spec and
// status, revert a consumer edit, come back when deleted on the consumer
// and go when deleted on the provider; names the mapping does not produce
// and another tenant's namespace never appear; a consumer object of the
// user's at a mapped name is a conflict of its own, both untouched; and
// Import under None isolation is refused.
func TestImportUnderNamespaceIsolation(t *testing.T) {
	ctx := context.Background()
	ts := tenants(t)
	a, b := ts[0], ts[1]
	const nsA, nsOther = "import-a", "import-other"
	ensureNamespace(t, env.Provider, nsA)
	ensureNamespace(t, env.Provider, nsOther)
	userA, userB := "consumer-a-"+t.Name(), "consumer-b-"+t.Name()
	bindRole(t, "", "kbind-discovery-import-a", userA, discoveryRules)
	bindRole(t, nsA, "kbind-consumer", userA, objectRules("widgets", "widgets/status"))
	bindRole(t, "", "kbind-import-b", userB, append(append([]rbacv1.PolicyRule{}, discoveryRules...), objectRules("widgets", "widgets/status")...))

	// The provider's team prepared objects before the consumer connects.
	providerWidget(t, nsA, "team-a.db", 1)
	providerWidget(t, nsA, "nodot", 1)                       // no consumer name maps here
	providerWidget(t, nsA, strings.Repeat("n", 64)+".db", 1) // its namespace part is no namespace name
	providerWidget(t, nsOther, "team-a.theirs", 1)           // another tenant's namespace
	providerWidget(t, nsA, "team-a.mine", 2)                 // the provider's, where the user's maps
	providerWidget(t, nsA, "late-ns.w", 4)                   // for a consumer namespace made later

	connect(t, a, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: nsA}, nil, "widgets.example.org")
	waitBound(t, []tenant{a}, "widgets.example.org")
	ensureNamespace(t, a.consumer, "team-a")
	mine := object(widgetGVK, "team-a", "mine", map[string]any{"size": int64(7)})
	if err := a.consumer.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	importing(t, a, "widgets.example.org")

	// Imported, with status.
	db := waitImported(t, a, key("team-a", "db"), 1, "")
	if db.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation] != "provider" || slices.Contains(db.GetFinalizers(), kbindv1alpha1.SyncerFinalizer) {
		t.Errorf("imported copy: annotations %v, finalizers %v", db.GetAnnotations(), db.GetFinalizers())
	}
	pdb := object(widgetGVK, "", "", nil)
	if err := env.Provider.Get(ctx, key(nsA, "team-a.db"), pdb); err != nil {
		t.Fatal(err)
	}
	setProviderStatus(t, pdb, "Provisioned")
	waitImported(t, a, key("team-a", "db"), 1, "Provisioned")

	// The provider's spec changes: followed.
	if err := env.Provider.Get(ctx, key(nsA, "team-a.db"), pdb); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(pdb.Object, int64(3), "spec", "size")
	if err := env.Provider.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	db = waitImported(t, a, key("team-a", "db"), 3, "Provisioned")

	// A consumer edit: reverted, with a Warning.
	_ = unstructured.SetNestedField(db.Object, int64(99), "spec", "size")
	if err := a.consumer.Update(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitImported(t, a, key("team-a", "db"), 3, "Provisioned")
	waitEvent(t, a.consumer, "team-a", "db", corev1.EventTypeWarning, "ImportedObjectEdited")

	// Deleted on the consumer: back, with a new UID.
	oldUID := db.GetUID()
	if err := a.consumer.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the imported copy re-created", func() error {
		u := waitImported(t, a, key("team-a", "db"), 3, "")
		if u.GetUID() == oldUID {
			return fmt.Errorf("still the deleted one")
		}
		return nil
	})
	waitEvent(t, a.consumer, "team-a", "db", corev1.EventTypeNormal, "Imported")

	// The user's object where a provider object maps: a conflict of its
	// own; neither side is written.
	enginetest.Eventually(t, "the user's object in conflict", func() error {
		u := object(widgetGVK, "", "", nil)
		if err := a.consumer.Get(ctx, key("team-a", "mine"), u); err != nil {
			return err
		}
		if got := u.GetAnnotations()[kbindv1alpha1.ConflictAnnotation]; got != string(kbindv1alpha1.ReasonConsumerObjectExists) {
			return fmt.Errorf("conflict annotation %q", got)
		}
		if s, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); s != 7 || u.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] != "" {
			return fmt.Errorf("the user's object was written: size %d, annotations %v", s, u.GetAnnotations())
		}
		return nil
	})
	pmine := object(widgetGVK, "", "", nil)
	if err := env.Provider.Get(ctx, key(nsA, "team-a.mine"), pmine); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedInt64(pmine.Object, "spec", "size"); s != 2 || len(pmine.GetAnnotations()) > 0 {
		t.Errorf("the provider's object where the user's maps was written: size %d, annotations %v", s, pmine.GetAnnotations())
	}

	// Only what maps, from the consumer's own namespace.
	if got, want := widgetsOn(t, a.consumer), []string{"team-a/db", "team-a/mine"}; !slices.Equal(got, want) {
		t.Errorf("consumer A's Widgets %v, want %v", got, want)
	}

	// A consumer namespace made later is filled then.
	ensureNamespace(t, a.consumer, "late-ns")
	waitImported(t, a, key("late-ns", "w"), 4, "")

	// Counted separately.
	waitInstances(t, a, "widgets.example.org", func(in kbindv1alpha1.InstanceCounts) bool { return in.Imported == 2 })

	// Deleted on the provider: the copy goes.
	if err := env.Provider.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, a.consumer, widgetGVK, key("team-a", "db"))
	waitInstances(t, a, "widgets.example.org", func(in kbindv1alpha1.InstanceCounts) bool { return in.Imported == 1 })

	// Import turned off: the copy is removed, the provider's object stays;
	// on again: imported again.
	providerWidget(t, nsA, "team-a.cache", 5)
	waitImported(t, a, key("team-a", "cache"), 5, "")
	setProviderObjects(t, a, "widgets.example.org", kbindv1alpha1.ProviderObjectsIgnore)
	waitGone(t, a.consumer, widgetGVK, key("team-a", "cache"))
	assertExists(t, env.Provider, key(nsA, "team-a.cache"))
	importing(t, a, "widgets.example.org")
	waitImported(t, a, key("team-a", "cache"), 5, "")

	// The binding deleted: its imported copies go with it (an Event on the
	// binding says so); the provider's objects stay.
	if err := a.consumer.Delete(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := a.consumer.Delete(ctx, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"}}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, a.consumer, widgetGVK, key("team-a", "cache"))
	waitGone(t, a.consumer, widgetGVK, key("late-ns", "w"))
	assertExists(t, env.Provider, key(nsA, "team-a.cache"))
	waitEvent(t, a.consumer, "", "widgets.example.org", corev1.EventTypeNormal, "ImportedObjectsDeleted")

	// Import under None isolation: refused, the entry not bound.
	connect(t, b, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}, nil, "widgets.example.org")
	waitBound(t, []tenant{b}, "widgets.example.org")
	importing(t, b, "widgets.example.org")
	enginetest.WaitCondition(t, b.consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"}},
		kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonImportRefused, "needs a Connection with Namespace or Prefixed isolation")
	if got := widgetsOn(t, b.consumer); len(got) > 0 {
		t.Errorf("consumer B (None, refused) holds Widgets %v", got)
	}

	teardown(t, a)
}

// assertExists fails unless the provider Widget at k exists.
func assertExists(t *testing.T, c client.Client, k client.ObjectKey) {
	t.Helper()
	if err := c.Get(context.Background(), k, object(widgetGVK, "", "", nil)); err != nil {
		t.Errorf("provider Widget %s: %v", k, err)
	}
}

// waitInstances waits until the instance counts of the tenant's
// ClusterBinding of api satisfy ok.
func waitInstances(t *testing.T, tn tenant, api string, ok func(kbindv1alpha1.InstanceCounts) bool) {
	t.Helper()
	enginetest.Eventually(t, "instance counts of "+api, func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := tn.consumer.Get(context.Background(), key("", api), cb); err != nil {
			return err
		}
		if len(cb.Status.BoundAPIs) == 0 {
			return fmt.Errorf("no bound API")
		}
		if in := cb.Status.BoundAPIs[0].Instances; in == nil || !ok(*in) {
			return fmt.Errorf("instances %+v", in)
		}
		return nil
	})
}

// labelledNamespace creates provider namespace name labelled with prefix
// ("" for none), as a provider admin preparing a tenant's namespace.
func labelledNamespace(t *testing.T, name, prefix string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if prefix != "" {
		ns.Labels = map[string]string{kbindv1alpha1.PrefixLabel: prefix}
	}
	if err := env.Provider.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// setPrefixLabel sets (or, with "", removes) the prefix label of provider
// namespace name.
func setPrefixLabel(t *testing.T, name, prefix string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns := &corev1.Namespace{}
		if err := env.Provider.Get(context.Background(), key("", name), ns); err != nil {
			return err
		}
		if prefix == "" {
			delete(ns.Labels, kbindv1alpha1.PrefixLabel)
		} else {
			ns.Labels = map[string]string{kbindv1alpha1.PrefixLabel: prefix}
		}
		return env.Provider.Update(context.Background(), ns)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestImportUnderPrefixedIsolation: under Prefixed, a consumer imports
// from the provider namespaces of its prefix that carry its prefix label —
// the provider admin's statement, since prefixes may extend each other:
// ip-b-team is team's under prefix ip-b and b-team's under ip, and only
// the label says whose it is. An unlabelled namespace of the prefix is
// never imported from; removing the label removes the copies, putting it
// back imports again.
func TestImportUnderPrefixedIsolation(t *testing.T) {
	ts := tenants(t)
	a, b := ts[0], ts[1]
	prefixes := map[string]string{"a": "ip", "b": "ip-b"}
	for _, tn := range ts {
		user := "consumer-" + tn.name + "-" + t.Name()
		bindRole(t, "", "kbind-import-prefixed-"+tn.name, user, prefixedRules("widgets", "widgets/status"))
		prefixPolicy(t, user, prefixes[tn.name])
	}
	labelledNamespace(t, "ip-team", "ip")
	labelledNamespace(t, "ip-b-team", "ip-b")
	labelledNamespace(t, "ip-plain", "")
	providerWidget(t, "ip-team", "db", 1)
	providerWidget(t, "ip-b-team", "x", 2)
	providerWidget(t, "ip-plain", "u", 3)
	// Every consumer namespace the provider's could map to exists, so that
	// only the label decides.
	for _, ns := range []string{"team", "b-team", "plain"} {
		ensureNamespace(t, a.consumer, ns)
	}
	ensureNamespace(t, b.consumer, "team")
	for _, tn := range ts {
		connect(t, tn, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: prefixes[tn.name]}, nil, "widgets.example.org")
	}
	waitBound(t, ts, "widgets.example.org")
	for _, tn := range ts {
		importing(t, tn, "widgets.example.org")
	}

	waitImported(t, a, key("team", "db"), 1, "")
	waitImported(t, b, key("team", "x"), 2, "")
	waitInstances(t, a, "widgets.example.org", func(in kbindv1alpha1.InstanceCounts) bool { return in.Imported == 1 })
	waitInstances(t, b, "widgets.example.org", func(in kbindv1alpha1.InstanceCounts) bool { return in.Imported == 1 })
	if got, want := widgetsOn(t, a.consumer), []string{"team/db"}; !slices.Equal(got, want) {
		t.Errorf("consumer A's Widgets %v, want %v (never B's namespace, never an unlabelled one)", got, want)
	}
	if got, want := widgetsOn(t, b.consumer), []string{"team/x"}; !slices.Equal(got, want) {
		t.Errorf("consumer B's Widgets %v, want %v", got, want)
	}

	// The label removed: not A's any more, the copy goes; back: imported.
	setPrefixLabel(t, "ip-team", "")
	waitGone(t, a.consumer, widgetGVK, key("team", "db"))
	assertExists(t, env.Provider, key("ip-team", "db"))
	setPrefixLabel(t, "ip-team", "ip")
	waitImported(t, a, key("team", "db"), 1, "")

	// Labelled for A by the provider admin: imported.
	setPrefixLabel(t, "ip-plain", "ip")
	waitImported(t, a, key("plain", "u"), 3, "")

	for _, tn := range ts {
		teardown(t, tn)
	}
	// The bindings went: their imported copies with them.
	waitGone(t, a.consumer, widgetGVK, key("team", "db"))
	waitGone(t, a.consumer, widgetGVK, key("plain", "u"))
}

// waitEvent waits for an Event of type and reason on the consumer object
// ns/name.
func waitEvent(t *testing.T, c client.Client, ns, name, typ, reason string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s Event %s on %s/%s", typ, reason, ns, name), func() error {
		var events corev1.EventList
		if err := c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Type == typ && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("none among %d", len(events.Items))
	})
}
