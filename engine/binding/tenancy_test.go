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
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Which namespaces' Bindings may use a Connection (BIND-3), on a provider
// of its own (the takeover counts the provider's watches on its API).
func TestNamespacedBindingsAdmission(t *testing.T) {
	setup(t)
	s := newScenario()
	cluster, provider := ownProvider(t,
		enginetest.CRD("squats", "squat", "Squat", s.group, ns, true),
		enginetest.CRD("admits", "admit", "Admit", s.group, ns, true),
		enginetest.CRD("takeovers", "takeover", "Takeover", s.group, ns, true))
	t.Run("a namespace the Connection does not admit gets nothing", func(t *testing.T) { testNotAdmitted(t, s, cluster) })
	t.Run("admitted by a namespace selector, re-evaluated when the namespace is relabelled", func(t *testing.T) { testAdmittedBySelector(t, s, cluster, provider) })
	t.Run("a ClusterBinding takes over a CRD only namespaced Bindings hold", func(t *testing.T) { testClusterBindingTakesOver(t, s, cluster, provider) })
}

// The attack: a user who may write Bindings in their own namespace names a
// Connection meant for ClusterBindings only. The Binding is Forbidden,
// saying who can change what; no consumer CRD is installed, and no request
// about the API reaches the provider — until an admin admits the namespace.
func testNotAdmitted(t *testing.T, s scenario, cluster *testenv.Cluster) {
	ctx := context.Background()
	var mu sync.Mutex
	var seen []string
	proxy := enginetest.NewProxy(t, cluster.Config)
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if strings.Contains(r.URL.Path, "squats") {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
		return enginetest.Fault{}
	})
	conn := connectAs(t, s.ns("admin-only"), proxy.Kubeconfig(t))
	if got := conn.Spec.NamespacedBindingsOf(); got.From != kbindv1alpha1.FromNamespacesNone {
		t.Fatalf("namespacedBindings defaults to %+v, want from None", got)
	}
	teamX := s.ns("team-x")
	b := namespacedBinding(t, teamX, "squat", conn.Name, s.api("squats"))
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden,
		`Connection "`+conn.Name+`" does not admit Bindings in namespace "`+teamX+`"`, "spec.namespacedBindings.from is None", "a cluster admin")
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	// The status is written at the end of the reconcile that decided: a
	// CRD that reconcile installed would be there.
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: s.api("squats")}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Binding the Connection does not admit got a consumer CRD: %v", err)
	}
	mu.Lock()
	if len(seen) > 0 {
		t.Errorf("requests about the API reached the provider on behalf of a Binding the Connection does not admit: %v", seen)
	}
	mu.Unlock()
	if len(b.Status.BoundAPIs) != 0 {
		t.Errorf("boundAPIs %+v", b.Status.BoundAPIs)
	}

	// A cluster admin admits every namespace: the Connection's change
	// re-evaluates the Binding, which now gets its API (and the proxy sees
	// the requests it did not see before).
	enginetest.Eventually(t, "admitting every namespace", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(conn), conn); err != nil {
			return err
		}
		conn.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}
		return env.Consumer.Update(ctx, conn)
	})
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	consumerCRD(t, s.api("squats"))
	mu.Lock()
	if len(seen) == 0 {
		t.Error("the proxy saw no request about the API once the Binding was admitted: the check above proves nothing")
	}
	mu.Unlock()
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, b)
}

// from: Selector admits the namespaces whose labels match. Relabelling a
// namespace re-evaluates its Bindings: one no longer admitted stops
// syncing (its objects keep their finalizer and provider copy), one
// admitted again syncs again, and deleting a Binding no longer admitted
// still drains its objects.
func testAdmittedBySelector(t *testing.T, s scenario, cluster *testenv.Cluster, provider client.Client) {
	ctx := context.Background()
	conn := connectAs(t, s.ns("selective"), cluster.Kubeconfig, func(c *kbindv1alpha1.Connection) {
		c.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesSelector,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kbind-tenant": "yes"}}}
	})
	teamSel, teamOK, teamUnlabelled := s.ns("team-sel"), s.ns("team-ok"), s.ns("team-unlabelled")
	for _, name := range []string{teamSel, teamOK} {
		if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kbind-tenant": "yes"}}}); err != nil {
			t.Fatal(err)
		}
	}
	unlabelled := namespacedBinding(t, teamUnlabelled, "admits", conn.Name, s.api("admits"))
	enginetest.WaitCondition(t, env.Consumer, unlabelled, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden,
		`namespace "`+teamUnlabelled+`"`, "do not match spec.namespacedBindings.selector (kbind-tenant=yes)")
	b := namespacedBinding(t, teamSel, "admits", conn.Name, s.api("admits"))
	ok := namespacedBinding(t, teamOK, "admits", conn.Name, s.api("admits"))
	for _, binding := range []*kbindv1alpha1.Binding{b, ok} {
		enginetest.WaitCondition(t, env.Consumer, binding, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	gvk := s.version()
	one := namespacedObject(gvk, "Admit", teamSel, "one")
	create(t, one)
	waitProviderSpec(t, provider, gvk, one, 1)
	// An object in the namespace the Connection does not admit stays
	// unsynced (checked below, once the barrier object arrived).
	outside := namespacedObject(gvk, "Admit", teamUnlabelled, "outside")
	create(t, outside)

	// team-sel loses its label: its Binding is Forbidden and no longer synced.
	relabel(t, teamSel, nil)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden,
		`namespace "`+teamSel+`"`, "kbind-tenant=yes")
	if len(b.Status.BoundAPIs) != 1 || b.Status.BoundAPIs[0].Name != s.api("admits") {
		t.Errorf("a Binding no longer admitted forgot what it bound (its objects hold finalizers): boundAPIs %+v", b.Status.BoundAPIs)
	}
	two := namespacedObject(gvk, "Admit", teamSel, "two")
	create(t, two)
	setSize(t, gvk, one, 2)
	// The same syncer serves team-ok: once its object arrives, team-sel's
	// changes would have too.
	barrier := namespacedObject(gvk, "Admit", teamOK, "barrier")
	create(t, barrier)
	waitProviderSpec(t, provider, gvk, barrier, 1)
	for _, obj := range []*unstructured.Unstructured{two, outside} {
		if _, err := at(provider, gvk, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s/%s, in a namespace the Connection does not admit, reached the provider: %v", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if got, err := at(provider, gvk, one); err != nil {
		t.Errorf("the provider copy of an object no longer admitted is kept: %v", err)
	} else if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); n != 1 {
		t.Errorf("a change in a namespace no longer admitted reached the provider: size %d", n)
	}
	if got := consumerObject(t, one); !controllerutil.ContainsFinalizer(got, kbindv1alpha1.SyncerFinalizer) {
		t.Error("an object no longer admitted lost its finalizer while its provider copy stays")
	}

	// Labelled again: synced again.
	relabel(t, teamSel, map[string]string{"kbind-tenant": "yes"})
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitProviderSpec(t, provider, gvk, two, 1)
	waitProviderSpec(t, provider, gvk, one, 2)

	// No longer admitted, then deleted: the Binding drains its objects.
	relabel(t, teamSel, nil)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, b)
	for _, obj := range []*unstructured.Unstructured{one, two} {
		if _, err := at(provider, gvk, obj); !apierrors.IsNotFound(err) {
			t.Errorf("deleting the Binding left the provider copy of %s: %v", obj.GetName(), err)
		}
		if got := consumerObject(t, obj); controllerutil.ContainsFinalizer(got, kbindv1alpha1.SyncerFinalizer) {
			t.Errorf("deleting the Binding left the finalizer on %s", obj.GetName())
		}
	}
	for _, binding := range []client.Object{ok, unlabelled} {
		if err := env.Consumer.Delete(ctx, binding); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, binding)
	}
}

// A tenant's Binding through Connection tenant-d (which admits every
// namespace) installed the consumer CRD first; then a cluster admin binds
// the API with a ClusterBinding through cluster-c. The ClusterBinding takes
// the CRD over and syncs every namespace through cluster-c; the Binding
// says the ClusterBinding takes precedence, and an Event on it says where
// the provider copies it made through tenant-d are (they are left alone).
func testClusterBindingTakesOver(t *testing.T, s scenario, cluster *testenv.Cluster, provider client.Client) {
	ctx := context.Background()
	tenant := connectAs(t, s.ns("tenant-d"), cluster.Kubeconfig, func(c *kbindv1alpha1.Connection) {
		c.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}
		c.Spec.Isolation = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "d"}
	})
	admin := connectAs(t, s.ns("cluster-c"), cluster.Kubeconfig)
	teamT, teamU := s.ns("team-t"), s.ns("team-u")
	b := namespacedBinding(t, teamT, "takeovers", tenant.Name, s.api("takeovers"))
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if crd := consumerCRD(t, s.api("takeovers")); crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != tenant.Name {
		t.Fatalf("the consumer CRD is stamped for %q", crd.Annotations[kbindv1alpha1.ConnectionAnnotation])
	}
	gvk := s.version()
	mine := namespacedObject(gvk, "Takeover", teamT, "mine")
	create(t, mine)
	viaTenant := namespacedObject(gvk, "Takeover", "d-"+teamT, "mine")
	waitProviderSpec(t, provider, gvk, viaTenant, 1)
	elsewhere := namespacedObject(gvk, "Takeover", teamU, "elsewhere")
	if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamU}}); err != nil {
		t.Fatal(err)
	}
	create(t, elsewhere)
	if n := enginetest.OpenWatches(t, cluster.Config, "takeovers"); n != 1 {
		t.Errorf("%d provider watch(es) on takeovers before the takeover, want 1", n)
	}

	cb := clusterBinding(t, "takeovers", admin.Name, s.api("takeovers"))
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, s.api("takeovers"))
	if crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != admin.Name || crd.Annotations[kbindv1alpha1.SchemaHashAnnotation] == "" {
		t.Errorf("the consumer CRD after the takeover: annotations %v", crd.Annotations)
	}
	// Every namespace syncs through cluster-c (isolation None: the same
	// namespace and name on the provider).
	waitProviderSpec(t, provider, gvk, mine, 1)
	waitProviderSpec(t, provider, gvk, elsewhere, 1)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"already covered by a ClusterBinding", s.api("takeovers")+" (ClusterBinding "+cb.Name+")")
	// The copy made through tenant-d is never deleted by the takeover...
	if _, err := at(provider, gvk, viaTenant); err != nil {
		t.Errorf("the provider copy made through tenant-d: %v", err)
	}
	// ...and an Event on the Binding says how to find it.
	enginetest.Eventually(t, "a ProviderCopiesLeft Event on the Binding", func() error {
		var events corev1.EventList
		if err := env.Consumer.List(ctx, &events, client.InNamespace(teamT)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == b.Name && e.Reason == "ProviderCopiesLeft" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, `ClusterBinding "`+cb.Name+`"`) && strings.Contains(e.Message, "-n d-"+teamT) &&
				strings.Contains(e.Message, "core.kbind.io/consumer-cluster-uid="+tenant.Status.LocalClusterUID) {
				return nil
			}
		}
		return fmt.Errorf("none among %d Event(s)", len(events.Items))
	})
	// tenant-d's provider watch went with its syncer: one watch, cluster-c's.
	enginetest.Eventually(t, "one provider watch on takeovers", func() error {
		if n := enginetest.OpenWatches(t, cluster.Config, "takeovers"); n != 1 {
			return fmt.Errorf("%d provider watch(es)", n)
		}
		return nil
	})

	// The Binding goes: nothing of cluster-c's is touched.
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, b)
	setSize(t, gvk, mine, 3)
	waitProviderSpec(t, provider, gvk, mine, 3)
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, cb)
}

// namespacedObject is a consumer object with spec.size 1.
func namespacedObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	obj := defaultObject(apiVersion, kind, name)
	obj.SetNamespace(namespace)
	return obj
}

func create(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := env.Consumer.Create(context.Background(), obj.DeepCopy()); err != nil {
		t.Fatal(err)
	}
}

func consumerObject(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := at(env.Consumer, obj.GetAPIVersion(), obj)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// relabel replaces the labels of namespace name (keeping the API server's
// kubernetes.io/metadata.name).
func relabel(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	enginetest.Eventually(t, "relabelling namespace "+name, func() error {
		ns := &corev1.Namespace{}
		if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, ns); err != nil {
			return err
		}
		ns.Labels = map[string]string{corev1.LabelMetadataName: name}
		for k, v := range labels {
			ns.Labels[k] = v
		}
		return env.Consumer.Update(context.Background(), ns)
	})
}
