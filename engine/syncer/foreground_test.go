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
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// dependentFinalizer is what a provider controller puts on a dependent of
// a provider copy that it must clean up before the dependent goes.
const dependentFinalizer = "example.org/dependent-cleanup"

// withPolicy annotates u with a deletion policy.
func withPolicy(u *unstructured.Unstructured, policy string) *unstructured.Unstructured {
	u.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: policy})
	return u
}

// dependentOf creates, on the provider, a ConfigMap the provider copy owns
// (blockOwnerDeletion, as a provider controller sets it) that holds a
// finalizer of its own.
func dependentOf(t *testing.T, pcopy *unstructured.Unstructured) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: pcopy.GetNamespace(), Name: pcopy.GetName() + "-dependent",
		Finalizers: []string{dependentFinalizer},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: pcopy.GetAPIVersion(), Kind: pcopy.GetKind(), Name: pcopy.GetName(),
			UID: pcopy.GetUID(), BlockOwnerDeletion: ptr.To(true)}}}}
	if err := env.Provider.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// collectGarbage does, for one provider copy deleted in the foreground,
// what the provider's garbage collector does (the test control plane runs
// no kube-controller-manager): it deletes the copy's dependents, and once
// they are gone (each dependent's own finalizer released by its
// controller: release) it removes the foregroundDeletion finalizer, which
// lets the copy go.
func collectGarbage(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, dependent *corev1.ConfigMap, release func()) {
	t.Helper()
	ctx := context.Background()
	if err := env.Provider.Delete(ctx, dependent); err != nil {
		t.Fatal(err)
	}
	release()
	enginetest.Eventually(t, "the dependent gone", func() error {
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	pcopy, ok := get(t, env.Provider, gvk, namespace, name)
	if !ok {
		t.Fatal("the provider copy went before its foregroundDeletion finalizer was removed")
	}
	controllerutil.RemoveFinalizer(pcopy, metav1.FinalizerDeleteDependents)
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
}

// waitDeletingInForeground waits until the provider copy is being deleted
// in the foreground: the API server puts foregroundDeletion on it only for
// a DELETE with propagationPolicy Foreground.
func waitDeletingInForeground(t *testing.T, gvk schema.GroupVersionKind, namespace, name string) {
	t.Helper()
	waitCopy(t, gvk, namespace, name, func(u *unstructured.Unstructured) error {
		if u.GetDeletionTimestamp() == nil || !slices.Contains(u.GetFinalizers(), metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("deletionTimestamp %v, finalizers %v", u.GetDeletionTimestamp(), u.GetFinalizers())
		}
		return nil
	})
}

// waitWaitingReported waits for the Event and the best-effort Synced
// condition that say the deleting consumer object waits for its provider
// copy's finalizers, each naming every fragment.
func waitWaitingReported(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, fragments ...string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s %s/%s reported waiting for %v", gvk.Kind, namespace, name, fragments), func() error {
		u, ok := get(t, env.Consumer, gvk, namespace, name)
		if !ok {
			return fmt.Errorf("the consumer object is gone")
		}
		var events corev1.EventList
		if err := env.Consumer.List(context.Background(), &events, client.InNamespace(namespace)); err != nil {
			return err
		}
		found := false
		for _, e := range events.Items {
			if e.InvolvedObject.UID == u.GetUID() && e.Reason == string(kbindv1alpha1.ReasonProviderCopyDeleting) && containsAll(e.Message, fragments) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("no %s Event naming %v", kbindv1alpha1.ReasonProviderCopyDeleting, fragments)
		}
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, r := range raw {
			c, _ := r.(map[string]any)
			if c["type"] == string(kbindv1alpha1.ConditionSynced) && c["status"] == string(metav1.ConditionFalse) &&
				c["reason"] == string(kbindv1alpha1.ReasonProviderCopyDeleting) && containsAll(fmt.Sprint(c["message"]), fragments) {
				return nil
			}
		}
		return fmt.Errorf("status.conditions %v", raw)
	})
}

// waitDeletingCount waits until the binding counts n objects whose
// deletion waits for their provider copy (status.boundAPIs[].instances).
func waitDeletingCount(t *testing.T, cb *kbindv1alpha1.ClusterBinding, n int32) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("ClusterBinding %s counts %d deleting", cb.Name, n), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		for _, b := range cb.Status.BoundAPIs {
			if b.Instances != nil && b.Instances.Deleting == n {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

// The Foreground policy (here the object's annotation, under a binding
// whose default is Delete): the provider copy is deleted with foreground
// propagation, and the consumer object stays — saying which finalizers
// keep the copy — while the copy's blocking dependent, itself held by a
// finalizer, is cleaned up; it goes once the copy is gone.
func TestForegroundDeletionWaitsForDependents(t *testing.T) {
	parallelEnv(t)
	ns := unique("fg-a")
	ctx := context.Background()
	w := create(t, env.Consumer, withPolicy(object(widgetGVK, ns, "db", map[string]any{"size": int64(1)}), kbindv1alpha1.DeletionPolicyForeground))
	dependent := dependentOf(t, waitCopy(t, widgetGVK, ns, "db", nil))
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitDeletingInForeground(t, widgetGVK, ns, "db")
	waitWaitingReported(t, widgetGVK, ns, "db", "Widget "+ns+"/db", metav1.FinalizerDeleteDependents, "blockOwnerDeletion")

	collectGarbage(t, widgetGVK, ns, "db", dependent, func() {
		// The dependent is deleting, held by its own finalizer: so are the
		// copy and the consumer object.
		enginetest.Eventually(t, "the dependent deleting", func() error {
			cm := &corev1.ConfigMap{}
			if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(dependent), cm); err != nil || cm.DeletionTimestamp == nil {
				return fmt.Errorf("%v, %v", cm.DeletionTimestamp, err)
			}
			return nil
		})
		if _, ok := get(t, env.Consumer, widgetGVK, ns, "db"); !ok {
			t.Fatal("the consumer object went while its provider copy's dependent was still deleting")
		}
		cm := &corev1.ConfigMap{}
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(dependent), cm); err != nil {
			t.Fatal(err)
		}
		controllerutil.RemoveFinalizer(cm, dependentFinalizer)
		if err := env.Provider.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	})
	waitGone(t, env.Provider, widgetGVK, ns, "db")
	waitGone(t, env.Consumer, widgetGVK, ns, "db")
}

// A binding's spec.deletionPolicy is the default of its objects, and an
// object's annotation wins: under a Foreground binding an unannotated
// object is deleted in the foreground, one annotated Delete in the
// background (gone at once, its dependent left to the provider's garbage
// collector), one annotated Orphan keeps its copy. Deleting the binding
// releases its objects under its policy too: with Orphan, their copies
// stay. A typo in the annotation keeps the copy and the object, and says
// what to fix.
func TestBindingDeletionPolicy(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	foregroundGVK, cascades := namespacedAPI(t, "Cascade", "foreground.example.org")
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: cascades}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:  kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:           []kbindv1alpha1.APIReference{{Name: cascades}},
		DeletionPolicy: kbindv1alpha1.DeletionPolicyForeground}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	ns := unique("cascade-a")
	byDefault := create(t, env.Consumer, object(foregroundGVK, ns, "by-default", map[string]any{"a": "b"}))
	background := create(t, env.Consumer, withPolicy(object(foregroundGVK, ns, "background", map[string]any{"a": "b"}), kbindv1alpha1.DeletionPolicyDelete))
	orphan := create(t, env.Consumer, withPolicy(object(foregroundGVK, ns, "orphan", map[string]any{"a": "b"}), kbindv1alpha1.DeletionPolicyOrphan))
	typo := create(t, env.Consumer, withPolicy(object(foregroundGVK, ns, "typo", map[string]any{"a": "b"}), "orphan"))
	create(t, env.Consumer, object(foregroundGVK, ns, "left", map[string]any{"a": "b"}))
	for _, name := range []string{"by-default", "background", "orphan", "typo", "left"} {
		waitCopy(t, foregroundGVK, ns, name, nil)
	}
	for _, u := range []*unstructured.Unstructured{byDefault, background, orphan, typo} {
		if err := env.Consumer.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
	}

	waitDeletingInForeground(t, foregroundGVK, ns, "by-default")
	waitWaitingReported(t, foregroundGVK, ns, "by-default", metav1.FinalizerDeleteDependents)
	waitDeletingCount(t, cb, 1)
	waitGone(t, env.Provider, foregroundGVK, ns, "background")
	waitGone(t, env.Consumer, foregroundGVK, ns, "background")
	waitGone(t, env.Consumer, foregroundGVK, ns, "orphan")
	if _, ok := get(t, env.Provider, foregroundGVK, ns, "orphan"); !ok {
		t.Error("the Orphan annotation under a Foreground binding deleted the provider copy")
	}

	// The typo: kept on both sides, a Warning says what to fix; fixed, the
	// object goes as it asks.
	enginetest.Eventually(t, "the InvalidDeletionPolicy Warning", func() error {
		var events corev1.EventList
		if err := env.Consumer.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "typo" && e.Reason == "InvalidDeletionPolicy" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, `core.kbind.io/deletion-policy="orphan" names no deletion policy`) {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(events.Items))
	})
	if u, ok := get(t, env.Provider, foregroundGVK, ns, "typo"); !ok || u.GetDeletionTimestamp() != nil {
		t.Fatalf("a typo in the deletion policy touched the provider copy (exists %v)", ok)
	}
	if _, ok := get(t, env.Consumer, foregroundGVK, ns, "typo"); !ok {
		t.Fatal("a typo in the deletion policy released the consumer object")
	}
	typo, _ = get(t, env.Consumer, foregroundGVK, ns, "typo")
	typo.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	if err := env.Consumer.Update(ctx, typo); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, foregroundGVK, ns, "typo")
	if _, ok := get(t, env.Provider, foregroundGVK, ns, "typo"); !ok {
		t.Error("the corrected Orphan annotation deleted the provider copy")
	}

	// The foreground deletion completes once the copy is gone.
	pcopy, _ := get(t, env.Provider, foregroundGVK, ns, "by-default")
	controllerutil.RemoveFinalizer(pcopy, metav1.FinalizerDeleteDependents)
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, foregroundGVK, ns, "by-default")
	waitDeletingCount(t, cb, 0)

	// The binding, now Orphan, deleted: its last object is released and
	// its copy kept.
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
		t.Fatal(err)
	}
	cb.Spec.DeletionPolicy = kbindv1alpha1.DeletionPolicyOrphan
	if err := env.Consumer.Update(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the binding's new generation observed", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionReady)); c == nil || c.ObservedGeneration != cb.Generation {
			return fmt.Errorf("conditions %v", cb.Status.Conditions)
		}
		return nil
	})
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, schema.GroupVersionKind{Group: kbindv1alpha1.GroupVersion.Group, Version: kbindv1alpha1.GroupVersion.Version, Kind: "ClusterBinding"}, "", cascades)
	if u, ok := get(t, env.Provider, foregroundGVK, ns, "left"); !ok || u.GetDeletionTimestamp() != nil {
		t.Errorf("deleting an Orphan binding deleted its object's provider copy (exists %v)", ok)
	}
	if _, ok := get(t, env.Provider, foregroundGVK, ns, "orphan"); !ok {
		t.Error("the orphaned copy went with the binding")
	}
}
