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

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// env is the package's engine, set by shared's start: a test calls useEnv
// (or parallelEnv) before it reads it.
var env *enginetest.Env

var (
	widgetGVK  = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}
	clusterGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "ClusterWidget"}
	adoptGVK   = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Adoptable"}
	thingGVK   = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Thing"}
)

// providerCRDs are the provider APIs setup binds: widgets and
// clusterwidgets (Fail), adoptables (Adopt) cluster-wide, and things in
// team-things, which tests bind in namespaces of their own too. A test that binds an API of its own
// creates it (providerAPI).
func providerCRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, true),
		enginetest.CRD("adoptables", "adoptable", "Adoptable", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("things", "thing", "Thing", "example.org", apiextensionsv1.NamespaceScoped, true),
	}
}

// setup connects to the provider and binds widgets and clusterwidgets
// cluster-wide (Fail), adoptables cluster-wide (Adopt) and things in the
// namespace "team-things" only.
func setup() error {
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
				NamespacedBindings: enginetest.AdmitAllNamespaces()}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
			APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}, {Name: "clusterwidgets.example.org"}}}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "adoptables"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, ConflictPolicy: kbindv1alpha1.ConflictPolicyAdopt,
			APIs: []kbindv1alpha1.APIReference{{Name: "adoptables.example.org"}}}},
		// things are bound in team-things only: the consumer API exists for
		// the tests that bind things in namespaces of their own.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-things"}},
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-things", Name: "things"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
			APIs:          []kbindv1alpha1.APIReference{{Name: "things.example.org"}}}},
	}
	for _, o := range objs {
		if err := env.Consumer.Create(ctx, o); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(enginetest.PollTimeout)
	for _, b := range []client.Object{&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "adoptables"}},
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-things", Name: "things"}}} {
		for {
			err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b)
			var conds []metav1.Condition
			switch b := b.(type) {
			case *kbindv1alpha1.ClusterBinding:
				conds = b.Status.Conditions
			case *kbindv1alpha1.Binding:
				conds = b.Status.Conditions
			}
			if err == nil && conditionTrue(conds, kbindv1alpha1.ConditionSynced) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%T %s not Synced: %v (%v)", b, b.GetName(), conds, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func conditionTrue(conds []metav1.Condition, t kbindv1alpha1.ConditionType) bool {
	for _, c := range conds {
		if c.Type == string(t) {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func object(gvk schema.GroupVersionKind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, c client.Client, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if u.GetNamespace() != "" {
		ensureNamespace(t, c, u.GetNamespace())
	}
	if err := c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// get reads an object; ok is false when it does not exist.
func get(t *testing.T, c client.Client, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

// waitCopy waits until the provider pcopy exists and check passes.
func waitCopy(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	var pcopy *unstructured.Unstructured
	enginetest.Eventually(t, fmt.Sprintf("provider pcopy %s/%s", namespace, name), func() error {
		u, ok := get(t, env.Provider, gvk, namespace, name)
		if !ok {
			return fmt.Errorf("absent")
		}
		pcopy = u
		if check != nil {
			return check(u)
		}
		return nil
	})
	return pcopy
}

func waitGone(t *testing.T, c client.Client, gvk schema.GroupVersionKind, namespace, name string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s %s/%s gone", gvk.Kind, namespace, name), func() error {
		if _, ok := get(t, c, gvk, namespace, name); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

func specOf(u *unstructured.Unstructured) string { return fmt.Sprint(u.Object["spec"]) }

func clusterUID(t *testing.T) string {
	t.Helper()
	conn := &kbindv1alpha1.Connection{}
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: "provider"}, conn); err != nil {
		t.Fatal(err)
	}
	return conn.Status.LocalClusterUID
}

func TestSpecUpStatusDown(t *testing.T) {
	parallelEnv(t)
	ns := unique("sync-a")
	ctx := context.Background()
	w := create(t, env.Consumer, object(widgetGVK, ns, "my-widget", map[string]any{"size": int64(3)}))
	start := time.Now()
	uid := clusterUID(t)
	pcopy := waitCopy(t, widgetGVK, ns, "my-widget", nil)
	t.Logf("spec up took %s", time.Since(start))
	if specOf(pcopy) != specOf(w) {
		t.Errorf("provider spec %s, consumer %s", specOf(pcopy), specOf(w))
	}
	ann, labels := pcopy.GetAnnotations(), pcopy.GetLabels()
	if ann[kbindv1alpha1.ConsumerClusterUIDAnnotation] != uid || ann[kbindv1alpha1.ConsumerObjectUIDAnnotation] != string(w.GetUID()) ||
		labels[kbindv1alpha1.ManagedLabel] != "true" || labels[kbindv1alpha1.ConsumerClusterUIDLabel] != uid {
		t.Errorf("provider pcopy markers: labels %v annotations %v", labels, ann)
	}
	for _, mf := range pcopy.GetManagedFields() {
		if mf.Operation == metav1.ManagedFieldsOperationApply && mf.Manager != kbindv1alpha1.FieldManager {
			t.Errorf("applied by %s", mf.Manager)
		}
	}
	w, _ = get(t, env.Consumer, widgetGVK, ns, "my-widget")
	if !controllerutil.ContainsFinalizer(w, kbindv1alpha1.SyncerFinalizer) {
		t.Error("consumer object lacks the syncer finalizer")
	}
	pns := &corev1.Namespace{}
	if err := env.Provider.Get(ctx, client.ObjectKey{Name: ns}, pns); err != nil {
		t.Fatal(err)
	}
	if pns.Labels[kbindv1alpha1.ManagedLabel] != "true" || pns.Labels[kbindv1alpha1.ConsumerClusterUIDLabel] != uid {
		t.Errorf("provider namespace labels %v", pns.Labels)
	}
	if v, ok := pns.Labels[kbindv1alpha1.PrefixLabel]; ok {
		t.Errorf("a namespace created without isolation carries %s=%q", kbindv1alpha1.PrefixLabel, v)
	}

	// Status down.
	pcopy.Object["status"] = map[string]any{"phase": "Ready", "observed": int64(3)}
	if err := env.Provider.Status().Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "status on the consumer", func() error {
		w, _ = get(t, env.Consumer, widgetGVK, ns, "my-widget")
		if fmt.Sprint(w.Object["status"]) != fmt.Sprint(pcopy.Object["status"]) {
			return fmt.Errorf("consumer status %v", w.Object["status"])
		}
		return nil
	})

	// Update spec up.
	w.Object["spec"] = map[string]any{"size": int64(5)}
	if err := env.Consumer.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "my-widget", func(u *unstructured.Unstructured) error {
		if specOf(u) != specOf(w) {
			return fmt.Errorf("spec %s", specOf(u))
		}
		return nil
	})
	// The status that came down stays: an update does not clear it.
	w, _ = get(t, env.Consumer, widgetGVK, ns, "my-widget")
	if w.Object["status"] == nil {
		t.Error("consumer status cleared")
	}

	// The binding counts it as synced.
	enginetest.Eventually(t, "instances counted", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "widgets"}, cb); err != nil {
			return err
		}
		for _, b := range cb.Status.BoundAPIs {
			if b.Name == "widgets.example.org" && b.Instances != nil && b.Instances.Synced >= 1 && b.Instances.Total >= 1 {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})
}

func TestDeletion(t *testing.T) {
	parallelEnv(t)
	ns := unique("del-a")
	ctx := context.Background()
	w := create(t, env.Consumer, object(widgetGVK, ns, "doomed", map[string]any{"size": int64(1)}))
	pcopy := waitCopy(t, widgetGVK, ns, "doomed", nil)

	// A provider finalizer holds the consumer object (Terminating).
	controllerutil.AddFinalizer(pcopy, "example.org/provider-controller")
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "doomed", func(u *unstructured.Unstructured) error {
		if u.GetDeletionTimestamp() == nil {
			return fmt.Errorf("not deleting yet")
		}
		return nil
	})
	if _, ok := get(t, env.Consumer, widgetGVK, ns, "doomed"); !ok {
		t.Fatal("the consumer object went before its provider pcopy")
	}
	pcopy, _ = get(t, env.Provider, widgetGVK, ns, "doomed")
	controllerutil.RemoveFinalizer(pcopy, "example.org/provider-controller")
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Provider, widgetGVK, ns, "doomed")
	waitGone(t, env.Consumer, widgetGVK, ns, "doomed")
}

func TestOrphan(t *testing.T) {
	parallelEnv(t)
	ns := unique("orphan-a")
	ctx := context.Background()
	w := object(widgetGVK, ns, "kept", map[string]any{"size": int64(1)})
	w.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	create(t, env.Consumer, w)
	waitCopy(t, widgetGVK, ns, "kept", nil)
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, widgetGVK, ns, "kept")
	if _, ok := get(t, env.Provider, widgetGVK, ns, "kept"); !ok {
		t.Error("Orphan deleted the provider pcopy")
	}
}

// waitConflict waits for the conflict annotation and its Warning Event.
func waitConflict(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, reason kbindv1alpha1.Reason) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s conflict on %s/%s", reason, namespace, name), func() error {
		u, ok := get(t, env.Consumer, gvk, namespace, name)
		if !ok {
			return fmt.Errorf("absent")
		}
		if got := u.GetAnnotations()[kbindv1alpha1.ConflictAnnotation]; got != string(reason) {
			return fmt.Errorf("conflict annotation %q", got)
		}
		var events corev1.EventList
		if err := env.Consumer.List(context.Background(), &events, client.InNamespace(namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == string(reason) && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no %s Warning Event", reason)
	})
}

func TestConflicts(t *testing.T) {
	parallelEnv(t)
	ns := unique("conflict-a")
	nsB := unique("conflict-b")
	ctx := context.Background()
	uid := clusterUID(t)
	// ForeignObjectExists: an unmarked provider object, left untouched.
	foreign := create(t, env.Provider, object(widgetGVK, ns, "taken", map[string]any{"owner": "provider-team"}))
	create(t, env.Consumer, object(widgetGVK, ns, "taken", map[string]any{"owner": "me"}))
	waitConflict(t, widgetGVK, ns, "taken", kbindv1alpha1.ReasonForeignObjectExists)
	if u, _ := get(t, env.Provider, widgetGVK, ns, "taken"); specOf(u) != specOf(foreign) || len(u.GetAnnotations()) != 0 {
		t.Errorf("the foreign provider object was touched: %v %v", u.Object["spec"], u.GetAnnotations())
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionConflicts, metav1.ConditionTrue, kbindv1alpha1.ReasonForeignObjectExists, "object(s) skipped")
	// The best-effort condition in the object's own status.
	enginetest.Eventually(t, "Synced=False in the consumer object's status", func() error {
		u, _ := get(t, env.Consumer, widgetGVK, ns, "taken")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Synced" && m["status"] == "False" && m["reason"] == string(kbindv1alpha1.ReasonForeignObjectExists) {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})

	// OwnedByAnother: marked by another cluster; never taken, even by Adopt.
	other := object(adoptGVK, nsB, "elsewhere", map[string]any{"owner": "other"})
	other.SetAnnotations(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: "another-cluster", kbindv1alpha1.ConsumerObjectUIDAnnotation: "x"})
	create(t, env.Provider, other)
	create(t, env.Consumer, object(adoptGVK, nsB, "elsewhere", map[string]any{"owner": "me"}))
	waitConflict(t, adoptGVK, nsB, "elsewhere", kbindv1alpha1.ReasonOwnedByAnother)

	// Adopt takes an unmarked object over.
	create(t, env.Provider, object(adoptGVK, nsB, "adoptme", map[string]any{"owner": "nobody"}))
	create(t, env.Consumer, object(adoptGVK, nsB, "adoptme", map[string]any{"owner": "me"}))
	waitCopy(t, adoptGVK, nsB, "adoptme", func(u *unstructured.Unstructured) error {
		if u.GetAnnotations()[kbindv1alpha1.ConsumerClusterUIDAnnotation] != uid || fmt.Sprint(u.Object["spec"]) != "map[owner:me]" {
			return fmt.Errorf("not adopted: %v %v", u.GetAnnotations(), u.Object["spec"])
		}
		return nil
	})

	// The conflict resolves when the foreign object goes: the object syncs
	// and the annotation is removed.
	if err := env.Provider.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "taken", func(u *unstructured.Unstructured) error {
		if fmt.Sprint(u.Object["spec"]) != "map[owner:me]" {
			return fmt.Errorf("spec %v", u.Object["spec"])
		}
		return nil
	})
	enginetest.Eventually(t, "conflict annotation removed", func() error {
		u, _ := get(t, env.Consumer, widgetGVK, ns, "taken")
		if _, ok := u.GetAnnotations()[kbindv1alpha1.ConflictAnnotation]; ok {
			return fmt.Errorf("still annotated")
		}
		return nil
	})
}

func TestDriftRepair(t *testing.T) {
	parallelEnv(t)
	ns := unique("drift-a")
	ctx := context.Background()
	create(t, env.Consumer, object(widgetGVK, ns, "steady", map[string]any{"size": int64(2)}))
	pcopy := waitCopy(t, widgetGVK, ns, "steady", nil)
	pcopy.Object["spec"] = map[string]any{"size": int64(99)}
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "steady", func(u *unstructured.Unstructured) error {
		if fmt.Sprint(u.Object["spec"]) != "map[size:2]" {
			return fmt.Errorf("spec %v", u.Object["spec"])
		}
		return nil
	})
	if err := env.Provider.Delete(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "steady", func(u *unstructured.Unstructured) error {
		if u.GetUID() == pcopy.GetUID() {
			return fmt.Errorf("not recreated yet")
		}
		return nil
	})
}

func TestProviderRejects(t *testing.T) {
	parallelEnv(t)
	ns := unique("reject-a")
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: unique("no-forbidden-color")},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.org"}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.spec.color) || object.spec.color != "forbidden"`,
				Message:    "the provider does not allow the color forbidden",
			}},
		},
	}
	pb := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: unique("no-forbidden-color")},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, pb} {
		if err := env.Provider.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The policy takes effect asynchronously: probe it directly first.
	enginetest.Eventually(t, "the admission policy in force", func() error {
		probe := object(widgetGVK, "default", "probe", map[string]any{"color": "forbidden"})
		err := env.Provider.Create(ctx, probe, client.DryRunAll)
		if err == nil {
			return fmt.Errorf("still admitted")
		}
		return nil
	})
	create(t, env.Consumer, object(widgetGVK, ns, "bad", map[string]any{"color": "forbidden"}))
	enginetest.Eventually(t, "ProviderRejected Warning Event", func() error {
		var events corev1.EventList
		if err := env.Consumer.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "bad" && e.Reason == "ProviderRejected" && strings.Contains(e.Message, "does not allow the color forbidden") {
				return nil
			}
		}
		return fmt.Errorf("no event among %d", len(events.Items))
	})
	enginetest.Eventually(t, "failed count", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "widgets"}, cb); err != nil {
			return err
		}
		for _, b := range cb.Status.BoundAPIs {
			if b.Name == "widgets.example.org" && b.Instances != nil && b.Instances.Failed >= 1 {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})
	if _, ok := get(t, env.Provider, widgetGVK, ns, "bad"); ok {
		t.Error("a rejected object exists on the provider")
	}
}

func TestClusterScopedAPI(t *testing.T) {
	parallelEnv(t)
	name := unique("global")
	create(t, env.Consumer, object(clusterGVK, "", name, map[string]any{"region": "eu"}))
	waitCopy(t, clusterGVK, "", name, func(u *unstructured.Unstructured) error {
		if fmt.Sprint(u.Object["spec"]) != "map[region:eu]" {
			return fmt.Errorf("spec %v", u.Object["spec"])
		}
		if v, ok := u.GetLabels()[kbindv1alpha1.PrefixLabel]; ok {
			return fmt.Errorf("a cluster-scoped copy without isolation carries %s=%q", kbindv1alpha1.PrefixLabel, v)
		}
		return nil
	})
}

func TestNamespacedBindingScopeAndDrain(t *testing.T) {
	parallelEnv(t)
	ns := unique("team-things")
	other := unique("team-other")
	ensureNamespace(t, env.Consumer, ns)
	if err := env.Consumer.Create(context.Background(), &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "things"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "things.example.org"}}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create(t, env.Consumer, object(thingGVK, ns, "in-scope", map[string]any{"a": "b"}))
	create(t, env.Consumer, object(thingGVK, other, "out-of-scope", map[string]any{"a": "b"}))
	waitCopy(t, thingGVK, ns, "in-scope", nil)
	// Objects outside the Binding's namespace are not synced: by the time
	// the in-scope object is, the out-of-scope one has been seen too.
	if _, ok := get(t, env.Provider, thingGVK, other, "out-of-scope"); ok {
		t.Error("an object outside the Binding's namespace was synced")
	}
	if u, _ := get(t, env.Consumer, thingGVK, other, "out-of-scope"); controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
		t.Error("an object outside the Binding's namespace got the finalizer")
	}

	// Deleting the Binding drains: the provider pcopy goes, the consumer
	// object stays without the finalizer, the CRD stays.
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "things"}}
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Provider, thingGVK, ns, "in-scope")
	enginetest.Eventually(t, "binding gone", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	u, ok := get(t, env.Consumer, thingGVK, ns, "in-scope")
	if !ok || controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
		t.Errorf("after drain the consumer object should stay without the finalizer: %v", u)
	}
}

func TestInstanceBeforeBinding(t *testing.T) {
	parallelEnv(t)
	ns := unique("team-late")
	// adoptables exist before any binding covers their namespace? They are
	// bound cluster-wide; use a fresh API instead: create the object first,
	// then a Binding for its namespace on things.
	ctx := context.Background()
	create(t, env.Consumer, object(thingGVK, ns, "early-bird", map[string]any{"x": "y"}))
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "things"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "things.example.org"}}}}
	if err := env.Consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, thingGVK, ns, "early-bird", nil)
}

// TestIdleWritesNothing: once converged, nothing is written on either side
// for several resync and discovery intervals (2 s each here).
func TestIdleWritesNothing(t *testing.T) {
	useEnv(t)
	ns := unique("idle-a")
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		create(t, env.Consumer, object(widgetGVK, ns, fmt.Sprintf("w%d", i), map[string]any{"i": int64(i)}))
	}
	for i := 0; i < 5; i++ {
		waitCopy(t, widgetGVK, ns, fmt.Sprintf("w%d", i), nil)
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for side, c := range map[string]client.Client{"consumer": env.Consumer, "provider": env.Provider} {
			// plains and scalables (status written without and through the
			// status subresource) are bound when the edge-case tests ran
			// (sequential, like this one, and before it).
			for _, gvk := range append([]schema.GroupVersionKind{widgetGVK, clusterGVK, adoptGVK, thingGVK}, edgeGVKs()...) {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := c.List(ctx, l); meta.IsNoMatchError(err) {
					continue // not bound on the consumer in this run
				} else if err != nil {
					t.Fatal(err)
				}
				for _, u := range l.Items {
					out[side+"/"+gvk.Kind+"/"+u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
				}
			}
			var nss corev1.NamespaceList
			if err := c.List(ctx, &nss); err != nil {
				t.Fatal(err)
			}
			for _, n := range nss.Items {
				out[side+"/ns/"+n.Name] = n.ResourceVersion
			}
		}
		var cbs kbindv1alpha1.ClusterBindingList
		if err := env.Consumer.List(ctx, &cbs); err != nil {
			t.Fatal(err)
		}
		for _, cb := range cbs.Items {
			out["cb/"+cb.Name] = cb.ResourceVersion
		}
		var conns kbindv1alpha1.ConnectionList
		if err := env.Consumer.List(ctx, &conns); err != nil {
			t.Fatal(err)
		}
		for _, c := range conns.Items {
			out["conn/"+c.Name] = c.ResourceVersion
		}
		return out
	}
	// Let in-flight status and count updates settle: wait until nothing
	// changes for two resync intervals, then watch a longer window (three
	// binding resyncs, three discovery passes) for any write.
	unchangedFor := func(window time.Duration) (map[string]string, error) {
		start := snapshot()
		for deadline := time.Now().Add(window); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if now := snapshot(); fmt.Sprint(now) != fmt.Sprint(start) {
				return now, fmt.Errorf("changed")
			}
		}
		return start, nil
	}
	var before map[string]string
	enginetest.Eventually(t, "convergence", func() (err error) {
		before, err = unchangedFor(4 * time.Second)
		return err
	})
	if changed, err := unchangedFor(6 * time.Second); err != nil {
		t.Error("objects were written while idle:")
		for k, v := range before {
			if changed[k] != v {
				t.Errorf("  %s (resourceVersion %s -> %s)", k, v, changed[k])
			}
		}
	}
}

func TestRecreateSameName(t *testing.T) {
	parallelEnv(t)
	ns := unique("recreate-a")
	ctx := context.Background()
	w := create(t, env.Consumer, object(widgetGVK, ns, "phoenix", map[string]any{"gen": int64(1)}))
	first := waitCopy(t, widgetGVK, ns, "phoenix", nil)
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, widgetGVK, ns, "phoenix")
	again := create(t, env.Consumer, object(widgetGVK, ns, "phoenix", map[string]any{"gen": int64(2)}))
	waitCopy(t, widgetGVK, ns, "phoenix", func(u *unstructured.Unstructured) error {
		if u.GetUID() == first.GetUID() || u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] != string(again.GetUID()) ||
			fmt.Sprint(u.Object["spec"]) != "map[gen:2]" {
			return fmt.Errorf("still the old pcopy: %v %v", u.GetAnnotations(), u.Object["spec"])
		}
		return nil
	})
}

func TestLimits(t *testing.T) {
	parallelEnv(t)
	ns := unique("limits-a")
	// A name at the 253-character limit and an object of about 1 MiB.
	long := strings.Repeat("a", 243) + "-253-chars"
	if len(long) != 253 {
		t.Fatalf("name length %d", len(long))
	}
	create(t, env.Consumer, object(widgetGVK, ns, long, map[string]any{"x": "y"}))
	waitCopy(t, widgetGVK, ns, long, nil)

	big := strings.Repeat("0123456789abcdef", 64*1024) // 1 MiB
	create(t, env.Consumer, object(widgetGVK, ns, "big", map[string]any{"blob": big}))
	waitCopy(t, widgetGVK, ns, "big", func(u *unstructured.Unstructured) error {
		if blob, _, _ := unstructured.NestedString(u.Object, "spec", "blob"); len(blob) != len(big) {
			return fmt.Errorf("blob of %d bytes", len(blob))
		}
		return nil
	})
}

func TestProviderNamespaceForbidden(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	guardedGVK, guardeds := namespacedAPI(t, "Guarded", "guarded.example.org")
	restricted, ns := unique("restricted"), unique("guarded-new")
	user := addUser(t, "no-namespaces")
	enginetest.Grant(t, env.Provider, user.Name, user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{guardedGVK.Group}, Resources: []string{"guardeds", "guardeds/status"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	)
	kc, err := testenv.KubeconfigFor("provider", user.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: restricted}, Data: map[string][]byte{"kubeconfig": kc}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: restricted},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: restricted}}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: guardeds}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: restricted},
			APIs:          []kbindv1alpha1.APIReference{{Name: guardeds}}}},
	} {
		if err := env.Consumer.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: guardeds}}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	create(t, env.Consumer, object(guardedGVK, ns, "g", map[string]any{"x": "y"}))
	enginetest.Eventually(t, "a Warning Event naming the refused namespace", func() error {
		var events corev1.EventList
		if err := env.Consumer.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "create namespaces/"+ns) && strings.Contains(e.Message, "forbidden") {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"create namespaces/"+ns+": forbidden")

	// Once the namespace exists, the object syncs and the condition clears.
	ensureNamespace(t, env.Provider, ns)
	waitCopy(t, guardedGVK, ns, "g", nil)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
}

// TestRestartConverges stops the engine, changes things on both sides and
// starts a new one: it converges with nothing lost or duplicated.
func TestRestartConverges(t *testing.T) {
	useEnv(t)
	ns := unique("restart-a")
	ctx := context.Background()
	for _, n := range []string{"w1", "w2", "w3"} {
		create(t, env.Consumer, object(widgetGVK, ns, n, map[string]any{"v": int64(1)}))
	}
	for _, n := range []string{"w1", "w2", "w3"} {
		waitCopy(t, widgetGVK, ns, n, nil)
	}
	env.StopEngine()
	restarted := false
	defer func() {
		if !restarted {
			_ = env.StartEngine()
		}
	}()

	w1, _ := get(t, env.Consumer, widgetGVK, ns, "w1")
	w1.Object["spec"] = map[string]any{"v": int64(2)}
	if err := env.Consumer.Update(ctx, w1); err != nil {
		t.Fatal(err)
	}
	w2, _ := get(t, env.Consumer, widgetGVK, ns, "w2")
	if err := env.Consumer.Delete(ctx, w2); err != nil {
		t.Fatal(err)
	}
	create(t, env.Consumer, object(widgetGVK, ns, "w4", map[string]any{"v": int64(4)}))
	c3, _ := get(t, env.Provider, widgetGVK, ns, "w3")
	c3.Object["status"] = map[string]any{"phase": "Done"}
	if err := env.Provider.Status().Update(ctx, c3); err != nil {
		t.Fatal(err)
	}
	c3, _ = get(t, env.Provider, widgetGVK, ns, "w3")
	c3.Object["spec"] = map[string]any{"v": int64(99)}
	if err := env.Provider.Update(ctx, c3); err != nil {
		t.Fatal(err)
	}

	if err := env.StartEngine(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitCopy(t, widgetGVK, ns, "w1", func(u *unstructured.Unstructured) error {
		if fmt.Sprint(u.Object["spec"]) != "map[v:2]" {
			return fmt.Errorf("spec %v", u.Object["spec"])
		}
		return nil
	})
	waitGone(t, env.Provider, widgetGVK, ns, "w2")
	waitGone(t, env.Consumer, widgetGVK, ns, "w2")
	waitCopy(t, widgetGVK, ns, "w4", nil)
	waitCopy(t, widgetGVK, ns, "w3", func(u *unstructured.Unstructured) error {
		if fmt.Sprint(u.Object["spec"]) != "map[v:1]" {
			return fmt.Errorf("drift not repaired: %v", u.Object["spec"])
		}
		return nil
	})
	enginetest.Eventually(t, "w3 status on the consumer", func() error {
		u, _ := get(t, env.Consumer, widgetGVK, ns, "w3")
		if fmt.Sprint(u.Object["status"]) != "map[phase:Done]" {
			return fmt.Errorf("status %v", u.Object["status"])
		}
		return nil
	})
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
	if err := env.Provider.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range list.Items {
		names = append(names, u.GetName())
	}
	if strings.Join(names, ",") != "w1,w3,w4" {
		t.Errorf("provider copies after restart: %v", names)
	}
}

// TestDrainWaitsForAnUnreachableProvider: a deleting binding whose provider
// is unreachable waits, saying so; only once the Connection itself is gone
// does it release the objects, with an Event naming the copies left behind.
func TestDrainWaitsForAnUnreachableProvider(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	// A second provider of the test's own, which it stops (no pool: no
	// other test takes one). Its API's group is the test's own, so that an
	// earlier run's consumer CRD (its Connection gone) is not in the way.
	group, ns := unique("remote")+".example.org", unique("remote-a")
	remotes := "remotes." + group
	remote := testenv.StartClusterT(t, "remote", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("remotes", "remote", "Remote", group, apiextensionsv1.NamespaceScoped, true),
	}})
	remoteGVK := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Remote"}
	name := unique("remote")
	rc, err := client.New(remote.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: name}, Data: map[string][]byte{"kubeconfig": remote.Kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: name}}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: remotes}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: name},
			APIs:          []kbindv1alpha1.APIReference{{Name: remotes}}}},
	} {
		if err := env.Consumer.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: remotes}}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	create(t, env.Consumer, object(remoteGVK, ns, "r1", map[string]any{"x": "y"}))
	enginetest.Eventually(t, "the remote pcopy", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(remoteGVK)
		return rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r1"}, u)
	})

	// The provider goes away; the binding is deleted.
	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"deleting: waiting for 1 object(s) to release their provider copies")
	if u, _ := get(t, env.Consumer, remoteGVK, ns, "r1"); !controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
		t.Fatal("the finalizer was released while the provider was unreachable")
	}

	// Disaster recovery: the Connection is removed for good.
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(conn), conn); err != nil {
		t.Fatal(err)
	}
	if err := env.Consumer.Delete(ctx, conn); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the Connection's finalizer stripped", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(conn), conn); err != nil {
			return client.IgnoreNotFound(err)
		}
		conn.Finalizers = nil
		return env.Consumer.Update(ctx, conn)
	})
	enginetest.Eventually(t, "the binding released", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if u, _ := get(t, env.Consumer, remoteGVK, ns, "r1"); controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
		t.Error("the finalizer is still held with the Connection gone")
	}
	var events corev1.EventList
	if err := env.Consumer.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		if e.Reason == "ProviderCopiesLeft" && strings.Contains(e.Message, ns+"/r1") {
			found = true
		}
	}
	if !found {
		t.Error("no ProviderCopiesLeft Event naming the pcopy left behind")
	}
}

// TestMetadataUp: the labels and annotations a binding selects reach the
// provider copy and leave it when removed on the consumer or deselected on
// the binding; kbind's keys and last-applied are never copied; what a
// provider controller sets on the copy stays.
func TestMetadataUp(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	gvk, labelleds := namespacedAPI(t, "Labelled", "labelled.example.org")
	ns := unique("meta")
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: labelleds}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: labelleds}},
		Metadata:      &kbindv1alpha1.MetadataSync{Labels: []string{"team"}, Annotations: []string{"example.org/"}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "clusterbinding "+labelleds+" Synced", func() error {
		got := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: labelleds}, got); err != nil {
			return err
		}
		if !conditionTrue(got.Status.Conditions, kbindv1alpha1.ConditionSynced) {
			return fmt.Errorf("not Synced: %v", got.Status.Conditions)
		}
		return nil
	})
	ensureNamespace(t, env.Consumer, ns)
	obj := object(gvk, ns, "l1", map[string]any{"size": int64(1)})
	obj.SetLabels(map[string]string{"team": "a", "other": "x"})
	obj.SetAnnotations(map[string]string{"example.org/owner": "me", "kubectl.kubernetes.io/last-applied-configuration": "{}", "unrelated": "u"})
	create(t, env.Consumer, obj)

	metadataOf := func(u *unstructured.Unstructured) string {
		l, a := u.GetLabels(), u.GetAnnotations()
		return fmt.Sprintf("team=%q other=%q owner=%q lastApplied=%q unrelated=%q shard=%q", l["team"], l["other"], a["example.org/owner"],
			a["kubectl.kubernetes.io/last-applied-configuration"], a["unrelated"], l["provider.io/shard"])
	}
	expect := func(what, want string) {
		t.Helper()
		waitCopy(t, gvk, ns, "l1", func(u *unstructured.Unstructured) error {
			if got := metadataOf(u); got != want {
				return fmt.Errorf("%s: %s, want %s", what, got, want)
			}
			return nil
		})
	}
	expect("selected keys copied", `team="a" other="" owner="me" lastApplied="" unrelated="" shard=""`)

	// A provider controller labels the copy: kept through later syncs.
	pcopy, _ := get(t, env.Provider, gvk, ns, "l1")
	labels := pcopy.GetLabels()
	labels["provider.io/shard"] = "3"
	pcopy.SetLabels(labels)
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}

	// Removed on the consumer: removed on the provider.
	cobj, _ := get(t, env.Consumer, gvk, ns, "l1")
	cobj.SetLabels(map[string]string{"other": "x"})
	if err := env.Consumer.Update(ctx, cobj); err != nil {
		t.Fatal(err)
	}
	expect("a label removed on the consumer", `team="" other="" owner="me" lastApplied="" unrelated="" shard="3"`)

	// Deselected on the binding: the annotation goes. (The engine writes the
	// binding's status meanwhile: a conflict is retried.)
	enginetest.Eventually(t, "the binding's metadata list edited", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: labelleds}, cb); err != nil {
			return err
		}
		cb.Spec.Metadata = &kbindv1alpha1.MetadataSync{Labels: []string{"team", "other"}}
		return env.Consumer.Update(ctx, cb)
	})
	expect("the binding selects other keys", `team="" other="x" owner="" lastApplied="" unrelated="" shard="3"`)
}
