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
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

func labelled(u *unstructured.Unstructured, labels map[string]string) *unstructured.Unstructured {
	u.SetLabels(labels)
	return u
}

// setLabels merges labels into a consumer object (nil values remove).
func setLabels(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, labels map[string]any) {
	t.Helper()
	u, _ := get(t, env.Consumer, gvk, namespace, name)
	p := map[string]any{"metadata": map[string]any{"labels": labels}}
	if err := env.Consumer.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", mustJSON(t, p))); err != nil {
		t.Fatal(err)
	}
}

// waitReleased waits until the consumer object no longer holds the syncer
// finalizer.
func waitReleased(t *testing.T, gvk schema.GroupVersionKind, namespace, name string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s/%s released", namespace, name), func() error {
		u, ok := get(t, env.Consumer, gvk, namespace, name)
		if !ok {
			return fmt.Errorf("gone")
		}
		if controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
			return fmt.Errorf("finalizers %v", u.GetFinalizers())
		}
		return nil
	})
}

func waitInstances(t *testing.T, cb *kbindv1alpha1.ClusterBinding, total, synced int32) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("ClusterBinding %s counts %d objects, %d synced", cb.Name, total, synced), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		for _, b := range cb.Status.BoundAPIs {
			if b.Instances != nil && b.Instances.Total == total && b.Instances.Synced == synced {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})
}

// TestObjectSelector: only labelled objects sync; an object relabelled out
// of the selection is released as if unbound (its copy deleted, or kept
// with Orphan) and syncs again when relabelled back; an unselected object
// never gets a finalizer; a selector that does not parse stops the
// binding with InvalidFilter and releases nothing.
func TestObjectSelector(t *testing.T) {
	parallelEnv(t)
	ns := unique("filters-a")
	ctx := context.Background()
	filteredGVK, filtereds := namespacedAPI(t, "Filtered", "filter.example.org")
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("object-selector")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs: []kbindv1alpha1.APIReference{{Name: filtereds,
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sync": "yes"}}}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	create(t, env.Consumer, object(filteredGVK, ns, "draft", map[string]any{"size": int64(0)}))
	create(t, env.Consumer, labelled(object(filteredGVK, ns, "f1", map[string]any{"size": int64(1)}), map[string]string{"sync": "yes"}))
	orphan := labelled(object(filteredGVK, ns, "kept", map[string]any{"size": int64(2)}), map[string]string{"sync": "yes"})
	orphan.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	create(t, env.Consumer, orphan)
	waitCopy(t, filteredGVK, ns, "f1", nil)
	waitCopy(t, filteredGVK, ns, "kept", nil)
	waitInstances(t, cb, 2, 2)
	if draft, _ := get(t, env.Consumer, filteredGVK, ns, "draft"); len(draft.GetFinalizers()) != 0 {
		t.Errorf("an unselected object got finalizers %v", draft.GetFinalizers())
	}
	if _, ok := get(t, env.Provider, filteredGVK, ns, "draft"); ok {
		t.Error("an unselected object was copied to the provider")
	}

	// Out of the selection: released; the copy goes (Delete) or stays
	// (Orphan).
	setLabels(t, filteredGVK, ns, "f1", map[string]any{"sync": nil})
	setLabels(t, filteredGVK, ns, "kept", map[string]any{"sync": "no"})
	waitGone(t, env.Provider, filteredGVK, ns, "f1")
	waitReleased(t, filteredGVK, ns, "f1")
	waitReleased(t, filteredGVK, ns, "kept")
	if _, ok := get(t, env.Provider, filteredGVK, ns, "kept"); !ok {
		t.Error("an Orphan object's provider copy was deleted when it left the selection")
	}
	waitInstances(t, cb, 0, 0)

	// Back in: synced again.
	setLabels(t, filteredGVK, ns, "f1", map[string]any{"sync": "yes"})
	waitCopy(t, filteredGVK, ns, "f1", nil)
	waitInstances(t, cb, 1, 1)

	// A selector that does not parse: InvalidFilter, and nothing released.
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
		t.Fatal(err)
	}
	cb.Spec.APIs[0].ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sync", Operator: "Sometimes"}}}
	if err := env.Consumer.Update(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonInvalidFilter,
		"the objectSelector of "+filtereds, "Sometimes")
	u, _ := get(t, env.Consumer, filteredGVK, ns, "f1")
	if !controllerutil.ContainsFinalizer(u, kbindv1alpha1.SyncerFinalizer) {
		t.Error("an invalid selector released a synced object")
	}
	if _, ok := get(t, env.Provider, filteredGVK, ns, "f1"); !ok {
		t.Error("an invalid selector deleted a provider copy")
	}
}

// TestNamespaceSelector: a ClusterBinding's namespaceSelector syncs the
// objects of labelled namespaces only; a namespace relabelled out of it has
// its objects released, one relabelled into it has its objects synced.
func TestNamespaceSelector(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	nsFilteredGVK, nsFiltereds := namespacedAPI(t, "NsFiltered", "filter.example.org")
	on, off := unique("nsf-on"), unique("nsf-off")
	// The selector is the test's own label: the other tests' namespaces
	// are never selected.
	key := unique("kbind")
	for name, labels := range map[string]map[string]string{on: {key: "on"}, off: nil} {
		if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("namespace-selector")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:     kbindv1alpha1.ConnectionReference{Name: "provider"},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: "on"}},
		APIs:              []kbindv1alpha1.APIReference{{Name: nsFiltereds}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	create(t, env.Consumer, object(nsFilteredGVK, off, "n2", map[string]any{"size": int64(2)}))
	create(t, env.Consumer, object(nsFilteredGVK, on, "n1", map[string]any{"size": int64(1)}))
	waitCopy(t, nsFilteredGVK, on, "n1", nil)
	waitInstances(t, cb, 1, 1)
	if n2, _ := get(t, env.Consumer, nsFilteredGVK, off, "n2"); len(n2.GetFinalizers()) != 0 {
		t.Errorf("an object of an unselected namespace got finalizers %v", n2.GetFinalizers())
	}

	relabel := func(name string, labels map[string]any) {
		t.Helper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p := map[string]any{"metadata": map[string]any{"labels": labels}}
		if err := env.Consumer.Patch(ctx, ns, client.RawPatch("application/merge-patch+json", mustJSON(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	relabel(on, map[string]any{key: nil})
	relabel(off, map[string]any{key: "on"})
	waitGone(t, env.Provider, nsFilteredGVK, on, "n1")
	waitReleased(t, nsFilteredGVK, on, "n1")
	waitCopy(t, nsFilteredGVK, off, "n2", nil)
	waitInstances(t, cb, 1, 1)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
