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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// End to end with the syncers that keep copies (BIND-5): a namespace
// relabelled out of a protected ClusterBinding's namespaceSelector keeps
// its object's provider copy, and the binding counts it — keptCopies,
// CopiesKept saying "objects no longer selected", one Event; labelled
// back, the copy is the object's again and the count and condition go.
// An API removed from its spec.apis keeps its copies (and consumer CRD
// and objects): counted as removed until the copies are deleted.
func TestDeselectedCopyIsCounted(t *testing.T) {
	setup(t)
	ctx := context.Background()
	s := newScenario()
	api, journals := s.api("ledgers"), s.api("journals")
	installCRDs(t, env.Provider, sized(s.group, "ledgers", "Ledger", "integer", ""), sized(s.group, "journals", "Journal", "integer", ""))
	conn := connect(t, "kept-deselect", nil)
	p := sharedProvider(s, conn)
	team := s.ns("team-kept")
	makeNamespace(t, team, map[string]string{"kept": "yes"})
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("kept-deselect")}, Spec: spec(conn.Name, journals, api)}
	cb.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kept": "yes"}}
	cb.Spec.DeletionProtection = true
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	db := namespacedObject(s.version(), "Ledger", team, "db")
	create(t, db)
	p.waitCopies(t, "Ledger", team+"/db")

	relabel(t, team, nil)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [%s]}]", api, team))
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionCopiesKept, metav1.ConditionTrue, kbindv1alpha1.ReasonDeletionProtected,
		"1 of "+api+" in "+team+": objects no longer selected", "kubectl kbind kept clusterbinding/"+cb.Name+" --delete")
	p.waitCopies(t, "Ledger", team+"/db")
	enginetest.Eventually(t, "one CopiesKept Event", func() error {
		if n := keptEvents(t, cb.UID); n != 1 {
			return fmt.Errorf("%d CopiesKept Events", n)
		}
		return nil
	})

	relabel(t, team, map[string]string{"kept": "yes"})
	waitKept(t, cb, "[]")
	enginetest.Eventually(t, "CopiesKept absent once the copy is the object's again", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if c := meta(cb.Status.Conditions, kbindv1alpha1.ConditionCopiesKept); c != nil {
			return fmt.Errorf("CopiesKept %s: %s", c.Status, c.Message)
		}
		return nil
	})

	j := namespacedObject(s.version(), "Journal", team, "j")
	create(t, j)
	p.waitCopies(t, "Journal", team+"/j")
	setAPIs(t, cb, api)
	waitKept(t, cb, fmt.Sprintf("[{%s  1 [%s]}]", journals, team))
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionCopiesKept, metav1.ConditionTrue, kbindv1alpha1.ReasonDeletionProtected,
		"1 of "+journals+" in "+team+": the API was removed from spec.apis (its consumer CRD and objects stay)")
	p.waitCopies(t, "Journal", team+"/j")
	if got := consumerObject(t, j); got.GetDeletionTimestamp() != nil {
		t.Error("the consumer object of the removed API is being deleted")
	}
	deleteKeptOf(t, s, "Journal", "ClusterBinding/"+cb.Name)
	waitKept(t, cb, "[]")

	setProtection(t, cb, false)
	deleteBindings(t, cb)
	p.waitCopies(t, "Ledger")
	deleteCRD(t, journals, false)
}
