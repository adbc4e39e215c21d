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
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// TestMutations: up rules set a field from CEL (the consumer namespace
// into .spec.tenant), delete one, and derive one from a field some objects
// lack — those fail alone with a MutationFailed Event and no write while
// the others sync; a down rule reshapes the provider's conditions into
// .status.ready; a rule that does not compile stops its binding with
// InvalidMutation.
func TestMutations(t *testing.T) {
	parallelEnv(t)
	ns := unique("mutations-a")
	ctx := context.Background()
	mutatedGVK, mutateds := namespacedAPI(t, "Mutated", "mutate.example.org")
	_, badMutateds := namespacedAPI(t, "BadMutated", "mutate.example.org")
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("mutations")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs: []kbindv1alpha1.APIReference{{Name: mutateds, Mutations: &kbindv1alpha1.Mutations{
			Up: []kbindv1alpha1.MutationRule{
				{Path: ".spec.tenant", Expression: "object.metadata.namespace"},
				{Path: ".spec.secret", Delete: true},
				{Path: ".spec.owner", Expression: "object.spec.team + '-owner'"},
			},
			Down: []kbindv1alpha1.MutationRule{
				{Path: ".status.ready", Expression: `has(object.status.conditions) && object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`},
			},
		}}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	m2 := create(t, env.Consumer, object(mutatedGVK, ns, "m2", map[string]any{"size": int64(2)}))
	create(t, env.Consumer, object(mutatedGVK, ns, "m1", map[string]any{"size": int64(1), "secret": "hunter2", "team": "blue"}))
	pcopy := waitCopy(t, mutatedGVK, ns, "m1", func(u *unstructured.Unstructured) error {
		if got, want := specOf(u), "map[owner:blue-owner size:1 team:blue tenant:"+ns+"]"; got != want {
			return fmt.Errorf("spec %s, want %s", got, want)
		}
		return nil
	})

	// m2 has no .spec.team: its rule fails on it alone, named in an Event.
	enginetest.Eventually(t, "a MutationFailed Event on m2", func() error {
		var list corev1.EventList
		if err := env.Consumer.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"involvedObject.uid": string(m2.GetUID())}); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "MutationFailed" && strings.Contains(e.Message, "mutations.up[2] (.spec.owner)") {
				return nil
			}
		}
		return fmt.Errorf("events %d", len(list.Items))
	})
	if _, ok := get(t, env.Provider, mutatedGVK, ns, "m2"); ok {
		t.Error("an object whose mutation failed was written to the provider")
	}

	// Down: the provider's conditions reshaped into .status.ready.
	pcopy.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	if err := env.Provider.Status().Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "status.ready on m1", func() error {
		u, _ := get(t, env.Consumer, mutatedGVK, ns, "m1")
		if ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready"); !ready {
			return fmt.Errorf("status %v", u.Object["status"])
		}
		return nil
	})
	// The provider copy's status is the provider's alone.
	if p, _ := get(t, env.Provider, mutatedGVK, ns, "m1"); p.Object["status"].(map[string]any)["ready"] != nil {
		t.Errorf("the down rule wrote the provider object: %v", p.Object["status"])
	}

	bad := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("bad-mutations")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs: []kbindv1alpha1.APIReference{{Name: badMutateds, Mutations: &kbindv1alpha1.Mutations{
			Up: []kbindv1alpha1.MutationRule{{Path: ".spec.tenant", Expression: "object.metadata.namespace +"}},
		}}}}}
	if err := env.Consumer.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, bad, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonInvalidMutation,
		"the mutations of "+badMutateds, "mutations.up[0] (.spec.tenant)")
}
