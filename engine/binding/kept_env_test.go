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

package binding_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// resyncs is how long a few binding resyncs of the package's engine
// (enginetest: 2 s) take: long enough for a count that should not change
// to have been redone, and a LIST made at most once per resync to run.
const resyncs = 6 * time.Second

// keptCopy creates on the shared provider a copy of kind in namespace ns
// as the konnector leaves one that deletion protection kept (BIND-5):
// kbind's markers of consumer cluster uid, the kept label and the kept-by
// annotation — made here directly, so that the count is tested apart from
// the syncers that keep copies.
func keptCopy(t *testing.T, s scenario, kind, ns, name, uid, keptBy string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	obj.SetAPIVersion(s.version())
	obj.SetKind(kind)
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetLabels(map[string]string{
		kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
		kbindv1alpha1.ConsumerClusterUIDLabel: uid,
		kbindv1alpha1.KeptLabel:               kbindv1alpha1.KeptDeletionProtection,
	})
	obj.SetAnnotations(map[string]string{
		kbindv1alpha1.ConsumerClusterUIDAnnotation: uid,
		kbindv1alpha1.ConsumerObjectUIDAnnotation:  string(types.UID("0a0b0c0d-" + name)),
		kbindv1alpha1.KeptByAnnotation:             keptBy,
	})
	if err := env.Provider.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// waitKept waits until the binding's status.keptCopies reads want
// (fmt.Sprint of the entries).
func waitKept(t *testing.T, b client.Object, want string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s keptCopies %s", b.GetName(), want), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		if got := fmt.Sprint(b.(kbindv1alpha1.BindingObject).BindingStatus().KeptCopies); got != want {
			return fmt.Errorf("keptCopies %s", got)
		}
		return nil
	})
}

// keptEvents counts the Normal CopiesKept Events on the object of uid.
func keptEvents(t *testing.T, uid types.UID) int {
	t.Helper()
	events := &eventsv1.EventList{}
	if err := env.Consumer.List(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Regarding.UID == uid && e.Reason == string(kbindv1alpha1.ConditionCopiesKept) && e.Type == corev1.EventTypeNormal {
			n++
		}
	}
	return n
}

// setAPIs sets the binding's spec.apis to apis.
func setAPIs(t *testing.T, b client.Object, apis ...string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s lists %v", b.GetName(), apis), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		spec := b.(kbindv1alpha1.BindingObject).BindingSpec()
		spec.APIs = spec.APIs[:0]
		for _, a := range apis {
			spec.APIs = append(spec.APIs, kbindv1alpha1.APIReference{Name: a})
		}
		return env.Consumer.Update(context.Background(), b)
	})
}

// A protected ClusterBinding reports the provider copies its deletion
// protection kept (BIND-5): status.keptCopies per API, sorted, with the
// first namespaces; CopiesKept True/DeletionProtected saying how many,
// where, why and how to delete them; one Normal Event per growth, not per
// resync; Ready untouched. Copies kept by another binding, or carrying
// another consumer cluster's markers, are not counted. An API removed
// from spec.apis keeps its consumer CRD, and its count while its copies
// exist (dropped once they are deleted); a count that cannot be read
// keeps the last one and says so, never 0.
func TestKeptCopiesAreCounted(t *testing.T) {
	setup(t)
	ctx := context.Background()
	s := newScenario()
	stores, vaults, lockers := s.api("stores"), s.api("vaults"), s.api("lockers")
	installCRDs(t, env.Provider,
		sized(s.group, "stores", "Store", "integer", ""), sized(s.group, "vaults", "Vault", "integer", ""), sized(s.group, "lockers", "Locker", "integer", ""))
	conn := connect(t, "kept", nil)
	uid := conn.Status.LocalClusterUID
	// The copies are there before the binding.
	name := unique("kept")
	by := "ClusterBinding/" + name
	other := s.ns("kept-other")
	if err := env.Provider.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}); err != nil {
		t.Fatal(err)
	}
	keptCopy(t, s, "Store", "default", unique("s1"), uid, by)
	s2 := keptCopy(t, s, "Store", other, unique("s2"), uid, by)
	keptCopy(t, s, "Store", "default", unique("theirs"), uid, "ClusterBinding/"+unique("another"))
	keptCopy(t, s, "Store", "default", unique("foreign"), "another-consumer-cluster", by)
	v1 := keptCopy(t, s, "Vault", "default", unique("v1"), uid, by)
	v2 := keptCopy(t, s, "Vault", other, unique("v2"), uid, by)
	keptCopy(t, s, "Locker", "default", unique("l1"), uid, by)
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec(conn.Name, lockers, stores, vaults)}
	cb.Spec.DeletionProtection = true
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]} {%s  2 [default %s]} {%s  2 [default %s]}]", lockers, stores, other, vaults, other))
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionCopiesKept, metav1.ConditionTrue, kbindv1alpha1.ReasonDeletionProtected,
		"5 provider cop(ies) kept by spec.deletionProtection", "2 of "+stores+" in default, "+other+": objects no longer selected",
		"kubectl kbind kept clusterbinding/"+cb.Name+" --delete")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	// An Event per growth the binding saw: its consumer CRDs may have been
	// established (and their copies counted) one by one. None per resync.
	events := 0
	enginetest.Eventually(t, "a CopiesKept Event", func() error {
		if events = keptEvents(t, cb.UID); events < 1 || events > 3 {
			return fmt.Errorf("%d CopiesKept Events, want 1 to 3 (one per API counted)", events)
		}
		return nil
	})
	holds(t, resyncs, "no CopiesKept Event per resync", func() error {
		if n := keptEvents(t, cb.UID); n != events {
			return fmt.Errorf("%d CopiesKept Events, want %d", n, events)
		}
		return nil
	})

	// Two APIs removed from the protected ClusterBinding: their consumer
	// CRDs stay, and so do their counts.
	setAPIs(t, cb, stores)
	waitBoundAPIs(t, cb, stores)
	holds(t, resyncs, "the consumer CRDs of the APIs removed from a protected ClusterBinding stay", func() error {
		for _, api := range []string{vaults, lockers} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Consumer.Get(ctx, client.ObjectKey{Name: api}, crd); err != nil || !crd.DeletionTimestamp.IsZero() {
				return fmt.Errorf("the consumer CRD %s was deleted (%v)", api, err)
			}
		}
		return nil
	})
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]} {%s  2 [default %s]} {%s  2 [default %s]}]", lockers, stores, other, vaults, other))
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionCopiesKept, metav1.ConditionTrue, kbindv1alpha1.ReasonDeletionProtected,
		"2 of "+vaults+" in default, "+other+": the API was removed from spec.apis")

	// The copies of a removed API are counted on the provider (no Syncer
	// runs for it): one deleted, then the other — the entry goes at 0.
	// A copy kept anew grows the count: a second Event.
	deleteProvider(t, v1)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]} {%s  2 [default %s]} {%s  1 [%s]}]", lockers, stores, other, vaults, other))
	keptCopy(t, s, "Store", other, unique("s3"), uid, by)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]} {%s  3 [default %s]} {%s  1 [%s]}]", lockers, stores, other, vaults, other))
	events++
	enginetest.Eventually(t, "a CopiesKept Event for the growth", func() error {
		if n := keptEvents(t, cb.UID); n != events {
			return fmt.Errorf("%d CopiesKept Events, want %d", n, events)
		}
		return nil
	})
	deleteProvider(t, v2)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]} {%s  3 [default %s]}]", lockers, stores, other))

	// A count that cannot be read (the removed API's consumer CRD deleted
	// by hand, which protection does not cover) keeps the last count and
	// says why: never 0.
	deleteCRD(t, lockers, true)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionCopiesKept, metav1.ConditionTrue, kbindv1alpha1.ReasonDeletionProtected,
		"1 of "+lockers, "the last count is shown where a count failed: "+lockers+": its consumer CRD is gone")
	holds(t, resyncs, "a failed count keeps the last one", func() error {
		got := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), got); err != nil {
			return err
		}
		if len(got.Status.KeptCopies) == 0 || got.Status.KeptCopies[0].Name != lockers || got.Status.KeptCopies[0].Count != 1 {
			return fmt.Errorf("keptCopies %v", got.Status.KeptCopies)
		}
		return nil
	})
	if n := keptEvents(t, cb.UID); n != events {
		t.Errorf("%d CopiesKept Events after the counts went down, want %d", n, events)
	}

	// Protection off: the copies stay counted (nothing is deleted
	// retroactively); once none is left the condition goes.
	setProtection(t, cb, false)
	deleteProvider(t, s2)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]} {%s  2 [default %s]}]", lockers, stores, other))
	if c := meta(cb.Status.Conditions, kbindv1alpha1.ConditionCopiesKept); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("CopiesKept %+v, want True while copies are kept", c)
	}
	deleteKeptOf(t, s, "Store", by)
	deleteKeptOf(t, s, "Locker", by)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [default]}]", lockers))
	// Listing the API again brings its consumer CRD back: it is counted
	// again, and its entry goes at 0.
	setAPIs(t, cb, stores, lockers)
	waitKept(t, cb, "[]")
	enginetest.Eventually(t, "CopiesKept absent", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if c := meta(cb.Status.Conditions, kbindv1alpha1.ConditionCopiesKept); c != nil {
			return fmt.Errorf("CopiesKept %s: %s", c.Status, c.Message)
		}
		return nil
	})
	deleteBindings(t, cb)
	for _, api := range []string{vaults, stores, lockers} {
		deleteCRD(t, api, false)
	}
}

// waitBoundAPIs waits until status.boundAPIs names exactly apis.
func waitBoundAPIs(t *testing.T, b client.Object, apis ...string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s bound APIs %v", b.GetName(), apis), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		var got []string
		for _, a := range b.(kbindv1alpha1.BindingObject).BindingStatus().BoundAPIs {
			got = append(got, a.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(apis) {
			return fmt.Errorf("bound APIs %v", got)
		}
		return nil
	})
}

// deleteProvider deletes obj on the shared provider.
func deleteProvider(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := env.Provider.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// deleteKeptOf deletes, on the shared provider, every copy of kind that
// keptBy kept — what kubectl kbind kept --delete does.
func deleteKeptOf(t *testing.T, s scenario, kind, keptBy string) {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(s.version())
	list.SetKind(kind + "List")
	if err := env.Provider.List(context.Background(), list, client.MatchingLabels{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection}); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].GetAnnotations()[kbindv1alpha1.KeptByAnnotation] == keptBy {
			deleteProvider(t, &list.Items[i])
		}
	}
}

// A namespaced Binding counts the copies kept under its own name
// ("Binding/<namespace>/<name>") only: not those a ClusterBinding of the
// same name kept, nor a Binding of the same name in another namespace.
// Its message gives the command with the namespace.
func TestKeptCopiesOfABinding(t *testing.T) {
	setup(t)
	ctx := context.Background()
	s := newScenario()
	api := s.api("tills")
	installCRDs(t, env.Provider, sized(s.group, "tills", "Till", "integer", ""))
	conn := connect(t, "kept-ns", nil, admitAll)
	uid := conn.Status.LocalClusterUID
	team, other := s.ns("team-till"), s.ns("other-till")
	makeNamespace(t, team, nil)
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "tills"}, Spec: spec(conn.Name, api)}
	b.Spec.DeletionProtection = true
	if err := env.Consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	for _, ns := range []string{team, other} {
		if err := env.Provider.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	keptCopy(t, s, "Till", team, unique("mine"), uid, "Binding/"+team+"/tills")
	keptCopy(t, s, "Till", team, unique("cluster"), uid, "ClusterBinding/tills")
	keptCopy(t, s, "Till", other, unique("namesake"), uid, "Binding/"+other+"/tills")
	waitKept(t, b, fmt.Sprintf("[{%s  1 [%s]}]", api, team))
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionCopiesKept, metav1.ConditionTrue, kbindv1alpha1.ReasonDeletionProtected,
		"1 provider cop(ies)", "kubectl kbind kept binding/tills -n "+team+" --delete")
	deleteKeptOf(t, s, "Till", "Binding/"+team+"/tills")
	deleteKeptOf(t, s, "Till", "ClusterBinding/tills")
	deleteKeptOf(t, s, "Till", "Binding/"+other+"/tills")
	waitKept(t, b, "[]")
	setProtection(t, b, false)
	deleteBindings(t, b)
}
