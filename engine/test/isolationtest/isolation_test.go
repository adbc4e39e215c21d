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

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var (
	widgetGVK        = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}
	gadgetGVK        = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Gadget"}
	clusterGadgetGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "ClusterGadget"}
)

// tenant is one consumer cluster of the shared provider.
type tenant struct {
	name     string
	consumer client.Client
	// provider is the provider as this consumer's credentials see it.
	provider   client.Client
	kubeconfig []byte
}

// tenants starts consumer B next to consumer A (env's) and gives each a
// provider user "consumer-<name>" with no permissions yet.
func tenants(t *testing.T) []tenant {
	t.Helper()
	start(t)
	b := startConsumer(t, nil)
	var out []tenant
	for _, tc := range []struct {
		name string
		c    client.Client
	}{{"a", env.Consumer}, {"b", b}} {
		user, err := env.Pair.Provider.AddUser("consumer-" + tc.name + "-" + t.Name())
		if err != nil {
			t.Fatal(err)
		}
		pc, err := client.New(user.Config, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tenant{name: tc.name, consumer: tc.c, provider: pc, kubeconfig: user.Kubeconfig})
	}
	return out
}

// bindRole creates role in namespace ns (cluster-wide when ns is "") on
// the provider and binds it to the user of kubeconfig's client.
func bindRole(t *testing.T, ns, name, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var objs []client.Object
	if ns == "" {
		objs = []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
		}
	} else {
		objs = []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}},
		}
	}
	for _, obj := range objs {
		if err := env.Provider.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, name, err)
		}
	}
}

// discoveryRules are what every consumer needs cluster-wide
// (docs/isolation.md#permissions): the provider identity and the exported
// CRDs.
var discoveryRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}},
	{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
}

// objectRules are the verbs on synced objects, the heartbeat Lease and
// the provider Events forwarded down.
func objectRules(resources ...string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"example.org"}, Resources: resources, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	}
}

// secretUp is the related entry that copies the consumer Secret
// "db-credentials" of every bound namespace up.
var secretUp = kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer,
	Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"db-credentials"}}}

// settingsDown is the related entry that copies the provider ConfigMap
// "settings" down.
var settingsDown = kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromProvider,
	Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"settings"}}}

// connect creates, on the tenant's consumer, the kubeconfig Secret, a
// Connection "provider" with the isolation, and a ClusterBinding per API;
// the first one copies the related entries.
func connect(t *testing.T, tn tenant, iso kbindv1alpha1.Isolation, related []kbindv1alpha1.RelatedResource, apis ...string) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": tn.kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}, Spec: kbindv1alpha1.ConnectionSpec{
			KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Isolation:           iso,
			NamespacedBindings:  enginetest.AdmitAllNamespaces(),
		}},
	}
	for i, api := range apis {
		cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: api}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
			APIs:          []kbindv1alpha1.APIReference{{Name: api}},
		}}
		if i == 0 {
			cb.Spec.RelatedResources = related
		}
		objs = append(objs, cb)
	}
	for _, obj := range objs {
		if err := tn.consumer.Create(ctx, obj); err != nil {
			t.Fatalf("consumer %s: creating %T %s: %v", tn.name, obj, obj.GetName(), err)
		}
	}
}

// waitBound waits for the ClusterBinding of api to be Ready on every
// tenant.
func waitBound(t *testing.T, ts []tenant, api string) {
	t.Helper()
	for _, tn := range ts {
		cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: api}}
		enginetest.WaitCondition(t, tn.consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
}

// relatedRule lets a consumer copy related Secrets and ConfigMaps.
var relatedRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"},
	Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}

func createSecret(t *testing.T, c client.Client, ns, name, owner string) {
	t.Helper()
	ensureNamespace(t, c, ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"owner": []byte(owner)}}
	err := c.Create(context.Background(), secret)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(context.Background(), secret) // left by an earlier test on the shared consumer A
	}
	if err != nil {
		t.Fatal(err)
	}
}

func createConfigMap(t *testing.T, c client.Client, ns, name, owner string) {
	t.Helper()
	ensureNamespace(t, c, ns)
	if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"owner": owner}}); err != nil {
		t.Fatal(err)
	}
}

// waitData waits for the related copy at key to hold owner's data and,
// when origin is set, to carry that consumer object as its origin.
func waitData(t *testing.T, c client.Client, obj client.Object, k client.ObjectKey, owner string, origin client.ObjectKey) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("related copy %s of %s", k, owner), func() error {
		if err := c.Get(context.Background(), k, obj); err != nil {
			return err
		}
		var got string
		switch o := obj.(type) {
		case *corev1.Secret:
			got = string(o.Data["owner"])
		case *corev1.ConfigMap:
			got = o.Data["owner"]
		}
		if got != owner {
			return fmt.Errorf("owner %q", got)
		}
		if back, ok := isolation.Origin(obj.GetAnnotations()); origin.Name != "" && (!ok || back != origin) {
			return fmt.Errorf("origin %v (%v)", back, ok)
		}
		return nil
	})
}

func object(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// create creates the same consumer objects on every tenant, each with the
// tenant's name in its spec.
func create(t *testing.T, ts []tenant, gvk schema.GroupVersionKind, keys ...client.ObjectKey) {
	t.Helper()
	for _, tn := range ts {
		for _, k := range keys {
			if k.Namespace != "" {
				ensureNamespace(t, tn.consumer, k.Namespace)
			}
			if err := tn.consumer.Create(context.Background(), object(gvk, k.Namespace, k.Name, map[string]any{"owner": tn.name})); err != nil {
				t.Fatalf("consumer %s: creating %s: %v", tn.name, k, err)
			}
		}
	}
}

// waitCopy waits for the provider copy at pkey to carry owner's spec and
// the origin markers of the consumer object ckey, and returns it.
func waitCopy(t *testing.T, gvk schema.GroupVersionKind, pkey, ckey client.ObjectKey, owner string) *unstructured.Unstructured {
	t.Helper()
	u := object(gvk, "", "", nil)
	enginetest.Eventually(t, fmt.Sprintf("provider copy %s of %s/%s", pkey, owner, ckey), func() error {
		if err := env.Provider.Get(context.Background(), pkey, u); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(u.Object, "spec", "owner"); got != owner {
			return fmt.Errorf("spec.owner = %q", got)
		}
		ann := u.GetAnnotations()
		if ann[kbindv1alpha1.ConsumerNamespaceAnnotation] != ckey.Namespace || ann[kbindv1alpha1.ConsumerNameAnnotation] != ckey.Name {
			return fmt.Errorf("origin annotations %v", ann)
		}
		if u.GetLabels()[kbindv1alpha1.ConsumerNameLabel] != kbindv1alpha1.ConsumerNameLabelValue(ckey.Name) {
			return fmt.Errorf("labels %v", u.GetLabels())
		}
		return nil
	})
	return u
}

// setProviderStatus plays the provider's controller.
func setProviderStatus(t *testing.T, u *unstructured.Unstructured, phase string) {
	t.Helper()
	u = u.DeepCopy()
	if err := unstructured.SetNestedField(u.Object, phase, "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func waitStatus(t *testing.T, tn tenant, gvk schema.GroupVersionKind, key client.ObjectKey, phase string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("status.phase %q on %s's %s", phase, tn.name, key), func() error {
		u := object(gvk, "", "", nil)
		if err := tn.consumer.Get(context.Background(), key, u); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(u.Object, "status", "phase"); got != phase {
			return fmt.Errorf("status.phase = %q", got)
		}
		return nil
	})
}

func waitGone(t *testing.T, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s %s gone", gvk.Kind, key), func() error {
		err := c.Get(context.Background(), key, object(gvk, "", "", nil))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func deleteObject(t *testing.T, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey) {
	t.Helper()
	if err := c.Delete(context.Background(), object(gvk, key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
}

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// TestNamespaceIsolation: two consumers with the same objects, each
// confined to its own provider namespace by a Role there (and nothing else
// but the identity and CRD reads), both sync, get their own status back,
// and never touch each other; a cluster-scoped API is refused.
func TestNamespaceIsolation(t *testing.T) {
	ctx := context.Background()
	ts := tenants(t)
	for _, tn := range ts {
		ns := "tenant-" + tn.name
		ensureNamespace(t, env.Provider, ns)
		user := "consumer-" + tn.name + "-" + t.Name()
		bindRole(t, "", "kbind-discovery-"+tn.name, user, discoveryRules)
		bindRole(t, ns, "kbind-consumer", user, append(objectRules("widgets", "gadgets"), relatedRule))
		connect(t, tn, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: ns}, []kbindv1alpha1.RelatedResource{secretUp},
			"widgets.example.org", "clusterwidgets.example.org")
	}
	waitBound(t, ts, "widgets.example.org")
	create(t, ts, widgetGVK, key("default", "db"), key("team-a", "w1"), key("a-b", "c"), key("a", "b-c"))

	copies := map[string]*unstructured.Unstructured{}
	for _, tn := range ts {
		ns := "tenant-" + tn.name
		copies[tn.name] = waitCopy(t, widgetGVK, key(ns, "default.db"), key("default", "db"), tn.name)
		assertPrefixLabel(t, object(widgetGVK, "", "", nil), key(ns, "default.db"), "")
		waitCopy(t, widgetGVK, key(ns, "team-a.w1"), key("team-a", "w1"), tn.name)
		waitCopy(t, widgetGVK, key(ns, "a-b.c"), key("a-b", "c"), tn.name)
		waitCopy(t, widgetGVK, key(ns, "a.b-c"), key("a", "b-c"), tn.name)
	}
	// Related objects go through the mapping, both ways: the consumer's
	// Secret up to its derived name, the tenant's ConfigMap at team-a's
	// derived name down to the Binding in team-a that asks for it.
	for _, tn := range ts {
		createSecret(t, tn.consumer, "default", "db-credentials", tn.name)
		createConfigMap(t, env.Provider, "tenant-"+tn.name, "team-a.settings", tn.name)
		b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gadgets"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "gadgets.example.org"}},
			RelatedResources: []kbindv1alpha1.RelatedResource{settingsDown}}}
		if err := tn.consumer.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range ts {
		waitData(t, env.Provider, &corev1.Secret{}, key("tenant-"+tn.name, "default.db-credentials"), tn.name, key("default", "db-credentials"))
		waitData(t, tn.consumer, &corev1.ConfigMap{}, key("team-a", "settings"), tn.name, client.ObjectKey{})
	}

	// The provider operator's one command (docs/isolation.md) finds
	// exactly the copy of a given consumer object.
	for _, tn := range ts {
		conn := &kbindv1alpha1.Connection{}
		if err := tn.consumer.Get(ctx, key("", "provider"), conn); err != nil {
			t.Fatal(err)
		}
		out, err := testenv.Kubectl(ctx, env.Pair.Provider.KubeconfigPath, "get", "widgets", "-A", "-o", "name", "-l",
			kbindv1alpha1.ConsumerClusterUIDLabel+"="+conn.Status.LocalClusterUID+","+kbindv1alpha1.ConsumerNamespaceLabel+"=team-a,"+kbindv1alpha1.ConsumerNameLabel+"=w1")
		if err != nil || strings.TrimSpace(out) != "widget.example.org/team-a.w1" {
			t.Errorf("consumer %s: finding the copy of team-a/w1: %q, %v", tn.name, out, err)
		}
	}
	// Nothing was written outside the tenant namespaces.
	for _, ns := range []string{"default", "team-a"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
		if err := env.Provider.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) > 0 {
			t.Errorf("provider namespace %s holds %d widgets (%v)", ns, len(list.Items), err)
		}
	}

	// Each consumer gets its own status back.
	setProviderStatus(t, copies["a"], "ReadyForA")
	setProviderStatus(t, copies["b"], "ReadyForB")
	waitStatus(t, ts[0], widgetGVK, key("default", "db"), "ReadyForA")
	waitStatus(t, ts[1], widgetGVK, key("default", "db"), "ReadyForB")

	// A's credentials reach nothing of B's.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
	if err := ts[0].provider.List(ctx, list, client.InNamespace("tenant-b")); !apierrors.IsForbidden(err) {
		t.Errorf("consumer A listing widgets in tenant-b: %v, want Forbidden", err)
	}
	if err := ts[0].provider.Delete(ctx, object(widgetGVK, "tenant-b", "default.db", nil)); !apierrors.IsForbidden(err) {
		t.Errorf("consumer A deleting tenant-b/default.db: %v, want Forbidden", err)
	}

	// Deleting on one side never touches the other.
	deleteObject(t, ts[0].consumer, widgetGVK, key("default", "db"))
	waitGone(t, env.Provider, widgetGVK, key("tenant-a", "default.db"))
	waitGone(t, ts[0].consumer, widgetGVK, key("default", "db"))
	waitCopy(t, widgetGVK, key("tenant-b", "default.db"), key("default", "db"), "b")
	waitStatus(t, ts[1], widgetGVK, key("default", "db"), "ReadyForB")

	roundTrip(t, ts[0], widgetGVK, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"})
	throughTheMapping(t, ts[0], "tenant-a")
	unbind(t, ts[0], key("tenant-a", "team-a.g1"))

	// A cluster-scoped API cannot be confined: refused on the binding.
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "clusterwidgets.example.org"}}
	enginetest.WaitCondition(t, ts[0].consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported,
		"cannot confine to a namespace under isolation Namespace (provider namespace tenant-a)", "clusterwidgets.example.org")

	// The heartbeat Lease lives in the tenant namespace, where the Role
	// lets it be renewed.
	for _, tn := range ts {
		conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}
		enginetest.WaitCondition(t, tn.consumer, conn, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "tenant-"+tn.name+"/")
		assertPrefixLabel(t, &corev1.Namespace{}, key("", "tenant-"+tn.name), "")
		enginetest.WaitCondition(t, tn.consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	cleanup(t, ts, widgetGVK, key("team-a", "w1"), key("a-b", "c"), key("a", "b-c"))
	teardown(t, ts[0])
}

// assertPrefixLabel checks the core.kbind.io/prefix label of the provider
// object at k: want, or absent when want is "".
func assertPrefixLabel(t *testing.T, obj client.Object, k client.ObjectKey, want string) {
	t.Helper()
	if err := env.Provider.Get(context.Background(), k, obj); err != nil {
		t.Fatal(err)
	}
	if got, ok := obj.GetLabels()[kbindv1alpha1.PrefixLabel]; got != want || ok != (want != "") {
		t.Errorf("%T %s: %s = %q (present %v), want %q", obj, k, kbindv1alpha1.PrefixLabel, got, ok, want)
	}
}

// roundTrip syncs a consumer object whose namespace and name are as long
// as the API server allows: its provider copy gets a valid (hashed) derived
// key, status comes back, and deleting it deletes the copy.
func roundTrip(t *testing.T, tn tenant, gvk schema.GroupVersionKind, iso kbindv1alpha1.Isolation) {
	t.Helper()
	ckey := key(strings.Repeat("n", 63), strings.Repeat("x", 200)+"."+strings.Repeat("y", 52))
	pkey, err := isolation.For(iso).Object(ckey)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s maps to %s", ckey.Namespace[:8]+"…", ckey.Name[:8]+"…", pkey)
	create(t, []tenant{tn}, gvk, ckey)
	copied := waitCopy(t, gvk, pkey, ckey, tn.name)
	setProviderStatus(t, copied, "AtTheLimits")
	waitStatus(t, tn, gvk, ckey, "AtTheLimits")
	deleteObject(t, tn.consumer, gvk, ckey)
	waitGone(t, env.Provider, gvk, pkey)
}

// unbind deletes tenant A's Binding "gadgets" in team-a while a Gadget
// syncs under it: the binding drains through the mapping, deleting the
// copy at its derived key (pkey), not at the consumer's key, before the
// finalizer goes.
func unbind(t *testing.T, tn tenant, pkey client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	create(t, []tenant{tn}, gadgetGVK, key("team-a", "g1"))
	waitCopy(t, gadgetGVK, pkey, key("team-a", "g1"), tn.name)
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gadgets"}}
	if err := tn.consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGone(t, tn.consumer, kbindv1alpha1.GroupVersion.WithKind("Binding"), key("team-a", "gadgets"))
	waitGone(t, env.Provider, gadgetGVK, pkey)
	g := object(gadgetGVK, "", "", nil)
	if err := tn.consumer.Get(ctx, key("team-a", "g1"), g); err != nil {
		t.Fatal(err)
	}
	if len(g.GetFinalizers()) > 0 {
		t.Errorf("the unbound Gadget keeps finalizers %v", g.GetFinalizers())
	}
}

// throughTheMapping checks drift repair, a foreign object at a derived
// name, Orphan and the binding's instance counts on an isolated tenant.
func throughTheMapping(t *testing.T, tn tenant, ns string) {
	t.Helper()
	ctx := context.Background()
	// Drift: a provider-side edit of the copy's spec is repaired.
	drifted := waitCopy(t, widgetGVK, key(ns, "team-a.w1"), key("team-a", "w1"), tn.name)
	if err := unstructured.SetNestedField(drifted.Object, "someone-else", "spec", "owner"); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Update(ctx, drifted); err != nil {
		t.Fatal(err)
	}
	repaired := waitCopy(t, widgetGVK, key(ns, "team-a.w1"), key("team-a", "w1"), tn.name)

	// An Event the provider records on the copy at its derived name shows
	// on the consumer object.
	now := metav1.Now()
	pe := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-a.w1.event"},
		InvolvedObject: corev1.ObjectReference{APIVersion: widgetGVK.GroupVersion().String(), Kind: "Widget", Namespace: ns, Name: "team-a.w1", UID: repaired.GetUID()},
		Type:           corev1.EventTypeNormal, Reason: "Provisioned", Message: "provisioned for " + tn.name, Count: 1, FirstTimestamp: now, LastTimestamp: now}
	if err := env.Provider.Create(ctx, pe); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the provider's Event on team-a/w1", func() error {
		var list corev1.EventList
		if err := tn.consumer.List(ctx, &list, client.InNamespace("team-a"), client.MatchingFields{"involvedObject.name": "w1"}); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "Provisioned" && e.Message == pe.Message {
				return nil
			}
		}
		return fmt.Errorf("%d Events, none forwarded", len(list.Items))
	})

	// A pre-existing unmarked object at the derived name is still
	// ForeignObjectExists, and left alone.
	foreign := object(widgetGVK, ns, "team-f.x", map[string]any{"owner": "provider"})
	if err := env.Provider.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	create(t, []tenant{tn}, widgetGVK, key("team-f", "x"))
	enginetest.Eventually(t, "ForeignObjectExists on team-f/x", func() error {
		u := object(widgetGVK, "", "", nil)
		if err := tn.consumer.Get(ctx, key("team-f", "x"), u); err != nil {
			return err
		}
		if got := u.GetAnnotations()[kbindv1alpha1.ConflictAnnotation]; got != string(kbindv1alpha1.ReasonForeignObjectExists) {
			return fmt.Errorf("conflict annotation %q", got)
		}
		return nil
	})
	if err := env.Provider.Get(ctx, key(ns, "team-f.x"), foreign); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := unstructured.NestedString(foreign.Object, "spec", "owner"); owner != "provider" || len(foreign.GetAnnotations()) > 0 {
		t.Errorf("the foreign object was changed: %v %v", foreign.Object["spec"], foreign.GetAnnotations())
	}

	// The binding counts the tenant's objects by their consumer keys.
	enginetest.Eventually(t, "instance counts", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := tn.consumer.Get(ctx, key("", "widgets.example.org"), cb); err != nil {
			return err
		}
		for _, api := range cb.Status.BoundAPIs {
			if in := api.Instances; in != nil && in.Total == 4 && in.Synced == 3 && in.Failed == 1 && api.ConflictCount == 1 {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})
	deleteObject(t, tn.consumer, widgetGVK, key("team-f", "x"))
	waitGone(t, tn.consumer, widgetGVK, key("team-f", "x"))
	if err := env.Provider.Get(ctx, key(ns, "team-f.x"), foreign); err != nil {
		t.Errorf("deleting the conflicting consumer object deleted the foreign provider object: %v", err)
	}

	// Orphan keeps the provider copy at its derived name.
	orphan := object(widgetGVK, "", "", nil)
	if err := tn.consumer.Get(ctx, key("a", "b-c"), orphan); err != nil {
		t.Fatal(err)
	}
	orphan.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	if err := tn.consumer.Update(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	deleteObject(t, tn.consumer, widgetGVK, key("a", "b-c"))
	waitGone(t, tn.consumer, widgetGVK, key("a", "b-c"))
	waitCopy(t, widgetGVK, key(ns, "a.b-c"), key("a", "b-c"), tn.name)
}

// cleanup deletes the tenants' remaining objects and waits for them to
// go.
func cleanup(t *testing.T, ts []tenant, gvk schema.GroupVersionKind, keys ...client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	for _, tn := range ts {
		for _, k := range keys {
			_ = tn.consumer.Delete(ctx, object(gvk, k.Namespace, k.Name, nil))
		}
	}
	for _, tn := range ts {
		for _, k := range keys {
			waitGone(t, tn.consumer, gvk, k)
		}
	}
}

// teardown removes the bindings, Connection and Secret from consumer A,
// which the tests share, so that the next test starts from an empty one.
func teardown(t *testing.T, a tenant) {
	t.Helper()
	ctx := context.Background()
	ts := []tenant{a}
	var cbs kbindv1alpha1.ClusterBindingList
	if err := ts[0].consumer.List(ctx, &cbs); err != nil {
		t.Fatal(err)
	}
	for i := range cbs.Items {
		_ = ts[0].consumer.Delete(ctx, &cbs.Items[i])
	}
	var bs kbindv1alpha1.BindingList
	if err := ts[0].consumer.List(ctx, &bs); err != nil {
		t.Fatal(err)
	}
	for i := range bs.Items {
		_ = ts[0].consumer.Delete(ctx, &bs.Items[i])
	}
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}
	_ = ts[0].consumer.Delete(ctx, conn)
	waitGone(t, ts[0].consumer, kbindv1alpha1.GroupVersion.WithKind("Connection"), key("", "provider"))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"}}
	_ = a.consumer.Delete(ctx, secret)
	waitGone(t, a.consumer, corev1.SchemeGroupVersion.WithKind("Secret"), key(enginetest.SecretNamespace, "provider"))
}

// prefixPolicy is the admission policy that confines a Prefixed consumer's
// writes to its prefix (docs/isolation.md#prefixed): RBAC cannot say
// "namespaces starting with", a ValidatingAdmissionPolicy can.
func prefixPolicy(t *testing.T, user, prefix string) {
	t.Helper()
	name := "kbind-prefix-" + prefix
	writes := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
	rule := func(group, resource string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: writes,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}}
	}
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				rule("example.org", "*"), rule("", "namespaces"), rule("", "secrets"), rule("", "configmaps"), rule("coordination.k8s.io", "leases"),
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "consumer", Expression: fmt.Sprintf("request.userInfo.username == %q", user)}},
			Variables:       []admissionregistrationv1.Variable{{Name: "place", Expression: "has(request.namespace) && request.namespace != '' ? request.namespace : request.name"}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("variables.place == %q || variables.place.startsWith(%q)", prefix, prefix+"-"),
				Message:    fmt.Sprintf("this consumer may only write in namespaces and names starting with %q", prefix+"-"),
				Reason:     &forbidden,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Provider.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrefixedIsolation: two consumers with the same namespaces and
// cluster-scoped names get "<prefix>-" namespaces and names, created and
// marked by kbind; a provider namespace kbind did not create is reported,
// never used; each consumer's writes are confined to its prefix.
func TestPrefixedIsolation(t *testing.T) {
	ctx := context.Background()
	ts := tenants(t)
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	for _, tn := range ts {
		user := "consumer-" + tn.name + "-" + t.Name()
		bindRole(t, "", "kbind-prefixed-"+tn.name, user, append(append([]rbacv1.PolicyRule{}, discoveryRules...),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
			rbacv1.PolicyRule{APIGroups: []string{"example.org"}, Resources: []string{"gadgets", "clustergadgets"}, Verbs: all},
			rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
			relatedRule,
		))
		prefixPolicy(t, user, tn.name)
		connect(t, tn, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: tn.name}, []kbindv1alpha1.RelatedResource{secretUp, settingsDown},
			"gadgets.example.org", "clustergadgets.example.org")
	}
	waitBound(t, ts, "gadgets.example.org")
	waitBound(t, ts, "clustergadgets.example.org")
	// A provider namespace that happens to have A's derived name.
	ensureNamespace(t, env.Provider, "a-taken")

	create(t, ts, gadgetGVK, key("default", "db"), key("team-a", "w1"))
	create(t, ts, clusterGadgetGVK, key("", "c1"))
	create(t, ts[:1], gadgetGVK, key("taken", "t1"))

	copies := map[string]*unstructured.Unstructured{}
	for _, tn := range ts {
		copies[tn.name] = waitCopy(t, gadgetGVK, key(tn.name+"-default", "db"), key("default", "db"), tn.name)
		waitCopy(t, gadgetGVK, key(tn.name+"-team-a", "w1"), key("team-a", "w1"), tn.name)
		waitCopy(t, clusterGadgetGVK, key("", tn.name+"-c1"), key("", "c1"), tn.name)
		ns := &corev1.Namespace{}
		if err := env.Provider.Get(ctx, key("", tn.name+"-team-a"), ns); err != nil {
			t.Fatal(err)
		}
		if ns.Labels[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue || ns.Annotations[kbindv1alpha1.ConsumerNamespaceAnnotation] != "team-a" {
			t.Errorf("namespace %s lacks kbind's markers: %v %v", ns.Name, ns.Labels, ns.Annotations)
		}
		// What has no consumer namespace to its name carries the prefix
		// (docs/isolation.md): the namespaces kbind creates, the Lease
		// namespace, cluster-scoped copies.
		assertPrefixLabel(t, &corev1.Namespace{}, key("", tn.name+"-team-a"), tn.name)
		assertPrefixLabel(t, object(clusterGadgetGVK, "", "", nil), key("", tn.name+"-c1"), tn.name)
		assertPrefixLabel(t, object(gadgetGVK, "", "", nil), key(tn.name+"-team-a", "w1"), "")
	}
	// A cluster-scoped copy written before kbind stamped the label (here:
	// the label removed) gets it on its next sync.
	old := object(clusterGadgetGVK, "", "", nil)
	if err := env.Provider.Get(ctx, key("", "a-c1"), old); err != nil {
		t.Fatal(err)
	}
	labels := old.GetLabels()
	delete(labels, kbindv1alpha1.PrefixLabel)
	old.SetLabels(labels)
	if err := env.Provider.Update(ctx, old); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the prefix label back on a-c1", func() error {
		if err := env.Provider.Get(ctx, key("", "a-c1"), old); err != nil {
			return err
		}
		if got := old.GetLabels()[kbindv1alpha1.PrefixLabel]; got != "a" {
			return fmt.Errorf("%s = %q", kbindv1alpha1.PrefixLabel, got)
		}
		return nil
	})

	// The namespace kbind did not create is reported on the object, and
	// nothing is written into it.
	enginetest.Eventually(t, "conflict on taken/t1", func() error {
		u := object(gadgetGVK, "", "", nil)
		if err := ts[0].consumer.Get(ctx, key("taken", "t1"), u); err != nil {
			return err
		}
		if got := u.GetAnnotations()[kbindv1alpha1.ConflictAnnotation]; got != string(kbindv1alpha1.ReasonForeignObjectExists) {
			return fmt.Errorf("conflict annotation %q", got)
		}
		return nil
	})
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.org"}}
	enginetest.WaitCondition(t, ts[0].consumer, cb, kbindv1alpha1.ConditionConflicts, metav1.ConditionTrue, kbindv1alpha1.ReasonForeignObjectExists, "1 object(s) skipped")
	if err := env.Provider.Get(ctx, key("a-taken", "t1"), object(gadgetGVK, "", "", nil)); !apierrors.IsNotFound(err) {
		t.Errorf("a copy was written into the foreign namespace a-taken: %v", err)
	}

	// The related Secret goes to the prefixed namespace; a ClusterBinding
	// cannot copy FromProvider under isolation, and says so.
	for _, tn := range ts {
		createSecret(t, tn.consumer, "default", "db-credentials", tn.name)
	}
	for _, tn := range ts {
		waitData(t, env.Provider, &corev1.Secret{}, key(tn.name+"-default", "db-credentials"), tn.name, key("default", "db-credentials"))
		enginetest.Eventually(t, "the FromProvider entry skipped", func() error {
			cb := &kbindv1alpha1.ClusterBinding{}
			if err := tn.consumer.Get(ctx, key("", "gadgets.example.org"), cb); err != nil {
				return err
			}
			if st := cb.Status.RelatedResources; st == nil || st.Skipped != 1 || st.Copies != 1 {
				return fmt.Errorf("relatedResources status %+v", st)
			}
			return nil
		})
	}

	// A namespace only a related copy needs is created by the related
	// copier, with the prefix label too.
	createSecret(t, ts[0].consumer, "related-only", "db-credentials", "a")
	waitData(t, env.Provider, &corev1.Secret{}, key("a-related-only", "db-credentials"), "a", key("related-only", "db-credentials"))
	assertPrefixLabel(t, &corev1.Namespace{}, key("", "a-related-only"), "a")

	setProviderStatus(t, copies["a"], "ReadyForA")
	setProviderStatus(t, copies["b"], "ReadyForB")
	waitStatus(t, ts[0], gadgetGVK, key("default", "db"), "ReadyForA")
	waitStatus(t, ts[1], gadgetGVK, key("default", "db"), "ReadyForB")

	// A's credentials cannot write into B's namespaces or names.
	if err := ts[0].provider.Create(ctx, object(gadgetGVK, "b-default", "intruder", map[string]any{})); !apierrors.IsForbidden(err) {
		t.Errorf("consumer A creating in b-default: %v, want Forbidden", err)
	}
	if err := ts[0].provider.Delete(ctx, object(clusterGadgetGVK, "", "b-c1", nil)); !apierrors.IsForbidden(err) {
		t.Errorf("consumer A deleting b-c1: %v, want Forbidden", err)
	}

	deleteObject(t, ts[0].consumer, gadgetGVK, key("default", "db"))
	deleteObject(t, ts[0].consumer, clusterGadgetGVK, key("", "c1"))
	waitGone(t, env.Provider, gadgetGVK, key("a-default", "db"))
	waitGone(t, env.Provider, clusterGadgetGVK, key("", "a-c1"))
	waitCopy(t, gadgetGVK, key("b-default", "db"), key("default", "db"), "b")
	waitCopy(t, clusterGadgetGVK, key("", "b-c1"), key("", "c1"), "b")

	roundTrip(t, ts[0], gadgetGVK, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"})

	for _, tn := range ts {
		conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}
		enginetest.WaitCondition(t, tn.consumer, conn, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, tn.name+"/")
		assertPrefixLabel(t, &corev1.Namespace{}, key("", tn.name), tn.name) // created for the Lease
	}
	cleanup(t, ts, gadgetGVK, key("team-a", "w1"), key("taken", "t1"))
	cleanup(t, ts, clusterGadgetGVK, key("", "c1"))
	teardown(t, ts[0])
}
