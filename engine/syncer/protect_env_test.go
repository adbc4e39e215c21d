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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// These tests hold BIND-5 on the engine (issue #55): under a binding with
// spec.deletionProtection: true, an object it stops syncing without the
// object being deleted keeps its provider copy.

// waitKept waits until the consumer object ns/name is released (no syncer
// finalizer) and its provider copy — the very copy synced before (uid) —
// carries kbind's markers of that object, the kept label and the kept-by
// annotation naming keptBy.
func waitKept(t *testing.T, gvk schema.GroupVersionKind, ns, name string, uid types.UID, keptBy string) {
	t.Helper()
	waitReleased(t, gvk, ns, name)
	cobj, _ := get(t, env.Consumer, gvk, ns, name)
	u, ok := get(t, env.Provider, gvk, ns, name)
	if !ok {
		t.Fatalf("the provider copy of %s/%s was deleted", ns, name)
	}
	if u.GetUID() != uid || !u.GetDeletionTimestamp().IsZero() {
		t.Errorf("the provider copy of %s/%s was replaced or is being deleted (uid %s, was %s; deletionTimestamp %v)", ns, name, u.GetUID(), uid, u.GetDeletionTimestamp())
	}
	if got := u.GetLabels()[kbindv1alpha1.KeptLabel]; got != kbindv1alpha1.KeptDeletionProtection {
		t.Errorf("%s/%s: label %s = %q, want %q", ns, name, kbindv1alpha1.KeptLabel, got, kbindv1alpha1.KeptDeletionProtection)
	}
	if got := u.GetAnnotations()[kbindv1alpha1.KeptByAnnotation]; got != keptBy {
		t.Errorf("%s/%s: annotation %s = %q, want %q", ns, name, kbindv1alpha1.KeptByAnnotation, got, keptBy)
	}
	if u.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] != clusterUID(t) ||
		u.GetAnnotations()[kbindv1alpha1.ConsumerClusterUIDAnnotation] != clusterUID(t) ||
		u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] != string(cobj.GetUID()) {
		t.Errorf("%s/%s: the kept copy lost kbind's markers: labels %v annotations %v", ns, name, u.GetLabels(), u.GetAnnotations())
	}
}

// waitTakenBack waits until the consumer object ns/name syncs again: it
// holds the finalizer, and its provider copy — the same one (uid) — no
// longer carries the kept label nor the kept-by annotation.
func waitTakenBack(t *testing.T, gvk schema.GroupVersionKind, ns, name string, uid types.UID) {
	t.Helper()
	waitCopy(t, gvk, ns, name, func(u *unstructured.Unstructured) error {
		if v, ok := u.GetLabels()[kbindv1alpha1.KeptLabel]; ok {
			return fmt.Errorf("still labelled kept %q", v)
		}
		if v, ok := u.GetAnnotations()[kbindv1alpha1.KeptByAnnotation]; ok {
			return fmt.Errorf("still annotated kept by %q", v)
		}
		if u.GetUID() != uid {
			return fmt.Errorf("the copy was replaced")
		}
		return nil
	})
	enginetest.Eventually(t, fmt.Sprintf("%s/%s holds the finalizer again", ns, name), func() error {
		u, _ := get(t, env.Consumer, gvk, ns, name)
		if !controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
			return fmt.Errorf("finalizers %v", u.GetFinalizers())
		}
		return nil
	})
}

// waitCopiesKeptEvent waits for the one Normal CopiesKept Event on the
// consumer object ns/name naming keptBy.
func waitCopiesKeptEvent(t *testing.T, ns, name, keptBy string) {
	t.Helper()
	enginetest.Eventually(t, "the CopiesKept Event on "+ns+"/"+name, func() error {
		var events corev1.EventList
		if err := env.Consumer.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == "CopiesKept" && e.Type == corev1.EventTypeNormal &&
				strings.Contains(e.Message, keptBy) && strings.Contains(e.Message, "spec.deletionProtection") {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(events.Items))
	})
}

// setProtection sets a ClusterBinding's spec.deletionProtection.
func setProtection(t *testing.T, cb *kbindv1alpha1.ClusterBinding, on bool) {
	t.Helper()
	p := map[string]any{"spec": map[string]any{"deletionProtection": on}}
	if err := env.Consumer.Patch(context.Background(), cb, client.RawPatch(types.MergePatchType, mustJSON(t, p))); err != nil {
		t.Fatal(err)
	}
}

// TestProtectedNamespaceRelabelKeepsCopies: under a protected
// ClusterBinding, a namespace relabelled out of its namespaceSelector
// keeps the provider copy of every object in it, whatever the object's
// deletion policy — markers kept, labelled kept: DeletionProtection,
// annotated with the binding, the finalizer gone, one CopiesKept Event;
// relabelled back in, the objects take their copies back.
func TestProtectedNamespaceRelabelKeepsCopies(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	gvk, api := namespacedAPI(t, "NsGuarded", "protect.example.org")
	ns := unique("protect-ns")
	key := unique("kbind")
	if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{key: "on"}}}); err != nil {
		t.Fatal(err)
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("protected-ns")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:      kbindv1alpha1.ConnectionReference{Name: "provider"},
		DeletionProtection: true,
		NamespaceSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{key: "on"}},
		APIs:               []kbindv1alpha1.APIReference{{Name: api}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	// Every deletion policy: protection wins over each.
	policies := map[string]string{"plain": "", "fg": kbindv1alpha1.DeletionPolicyForeground,
		"del": kbindv1alpha1.DeletionPolicyDelete, "orphan": kbindv1alpha1.DeletionPolicyOrphan}
	uids := map[string]types.UID{}
	for name, policy := range policies {
		u := object(gvk, ns, name, map[string]any{"size": int64(1)})
		if policy != "" {
			u.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: policy})
		}
		create(t, env.Consumer, u)
	}
	for name := range policies {
		uids[name] = waitCopy(t, gvk, ns, name, nil).GetUID()
	}

	relabel := func(labels map[string]any) {
		t.Helper()
		p := map[string]any{"metadata": map[string]any{"labels": labels}}
		if err := env.Consumer.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, mustJSON(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	relabel(map[string]any{key: nil})
	keptBy := "ClusterBinding/" + cb.Name
	for name := range policies {
		waitKept(t, gvk, ns, name, uids[name], keptBy)
	}
	waitCopiesKeptEvent(t, ns, "plain", keptBy)

	// Selected again: each object takes its copy back.
	relabel(map[string]any{key: "on"})
	for name := range policies {
		waitTakenBack(t, gvk, ns, name, uids[name])
	}
}

// TestProtectedObjectSelectorEditKeepsCopies: under a protected
// ClusterBinding, an objectSelector edit that deselects every object keeps
// every copy; an object selected again takes its copy back; protection
// turned off afterwards deletes none of the kept copies, while an object
// deselected after that is released as before (its copy deleted).
func TestProtectedObjectSelectorEditKeepsCopies(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	gvk, api := namespacedAPI(t, "SelGuarded", "protect.example.org")
	ns := unique("protect-sel")
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("protected-sel")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:      kbindv1alpha1.ConnectionReference{Name: "provider"},
		DeletionProtection: true,
		APIs: []kbindv1alpha1.APIReference{{Name: api,
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	names := []string{"a", "b", "c"}
	uids := map[string]types.UID{}
	for _, name := range names {
		create(t, env.Consumer, labelled(object(gvk, ns, name, map[string]any{"size": int64(1)}), map[string]string{"tier": "gold"}))
	}
	for _, name := range names {
		uids[name] = waitCopy(t, gvk, ns, name, nil).GetUID()
	}

	// The selector edited: nothing it selected is selected any more.
	editSelector := func(tier string) {
		t.Helper()
		p := map[string]any{"spec": map[string]any{"apis": []any{map[string]any{"name": api,
			"objectSelector": map[string]any{"matchLabels": map[string]any{"tier": tier}}}}}}
		if err := env.Consumer.Patch(ctx, cb, client.RawPatch(types.MergePatchType, mustJSON(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	editSelector("silver")
	keptBy := "ClusterBinding/" + cb.Name
	for _, name := range names {
		waitKept(t, gvk, ns, name, uids[name], keptBy)
	}
	waitCopiesKeptEvent(t, ns, "a", keptBy)

	// Selected again: a takes its copy back.
	setLabels(t, gvk, ns, "a", map[string]any{"tier": "silver"})
	waitTakenBack(t, gvk, ns, "a", uids["a"])

	// Protection off: the kept copies of b and c stay. An object
	// deselected now is released as without protection — its copy
	// deleted — which also says the engine runs the new policy.
	setProtection(t, cb, false)
	enginetest.Eventually(t, "the ClusterBinding observed without protection", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if c := findCondition(cb.Status.Conditions, kbindv1alpha1.ConditionReady); c == nil || c.ObservedGeneration != cb.Generation {
			return fmt.Errorf("Ready %+v at generation %d", c, cb.Generation)
		}
		return nil
	})
	setLabels(t, gvk, ns, "a", map[string]any{"tier": nil})
	waitGone(t, env.Provider, gvk, ns, "a")
	waitReleased(t, gvk, ns, "a")
	for _, name := range []string{"b", "c"} {
		u, ok := get(t, env.Provider, gvk, ns, name)
		if !ok || u.GetUID() != uids[name] || !u.GetDeletionTimestamp().IsZero() {
			t.Errorf("turning protection off touched the kept copy %s/%s (exists %v)", ns, name, ok)
			continue
		}
		if u.GetLabels()[kbindv1alpha1.KeptLabel] != kbindv1alpha1.KeptDeletionProtection {
			t.Errorf("the kept copy %s/%s lost its kept label: %v", ns, name, u.GetLabels())
		}
	}
}

// TestProtectedBindingRemovedAPIKeepsCopies: an API removed from a
// protected Binding's spec.apis (no admission policy here) releases its
// objects the same way: every copy kept, the finalizers gone; the API
// the Binding still lists syncs on; put back, the objects take their
// copies back.
func TestProtectedBindingRemovedAPIKeepsCopies(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	staysGVK, stays := namespacedAPI(t, "Stays", "protect.example.org")
	goesGVK, goes := namespacedAPI(t, "Goes", "protect.example.org")
	ns := unique("protect-api")
	ensureNamespace(t, env.Consumer, ns)
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "protected"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:      kbindv1alpha1.ConnectionReference{Name: "provider"},
		DeletionProtection: true,
		APIs:               []kbindv1alpha1.APIReference{{Name: stays}, {Name: goes}}}}
	if err := env.Consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	create(t, env.Consumer, object(staysGVK, ns, "s", map[string]any{"size": int64(1)}))
	orphan := object(goesGVK, ns, "orphan", map[string]any{"size": int64(2)})
	orphan.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	create(t, env.Consumer, orphan)
	create(t, env.Consumer, object(goesGVK, ns, "g", map[string]any{"size": int64(1)}))
	waitCopy(t, staysGVK, ns, "s", nil)
	uids := map[string]types.UID{}
	for _, name := range []string{"g", "orphan"} {
		uids[name] = waitCopy(t, goesGVK, ns, name, nil).GetUID()
	}

	setAPIs := func(apis ...string) {
		t.Helper()
		var list []any
		for _, a := range apis {
			list = append(list, map[string]any{"name": a})
		}
		p := map[string]any{"spec": map[string]any{"apis": list}}
		if err := env.Consumer.Patch(ctx, b, client.RawPatch(types.MergePatchType, mustJSON(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	setAPIs(stays)
	keptBy := "Binding/" + ns + "/protected"
	for _, name := range []string{"g", "orphan"} {
		waitKept(t, goesGVK, ns, name, uids[name], keptBy)
	}
	waitCopiesKeptEvent(t, ns, "g", keptBy)
	// The API still listed syncs on.
	setLabels(t, staysGVK, ns, "s", map[string]any{"touched": "yes"})
	if u, _ := get(t, env.Consumer, staysGVK, ns, "s"); !controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
		t.Error("the API the Binding still lists was released")
	}

	// Listed again: the objects take their copies back.
	setAPIs(stays, goes)
	for _, name := range []string{"g", "orphan"} {
		waitTakenBack(t, goesGVK, ns, name, uids[name])
	}
}

// findCondition returns the condition of type ct, nil when absent.
func findCondition(conds []metav1.Condition, ct kbindv1alpha1.ConditionType) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == string(ct) {
			return &conds[i]
		}
	}
	return nil
}
