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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// A refused projection entry is its binding's to report (issue #54): the
// binding says ProjectionRefused for it — one entry projected onto the
// name of a CRD kbind did not create (a collision), one onto a kind that
// CRD holds (names taken) — while the Connection's SchemaInSync stays
// True for the CRDs it does supply, and another binding of the Connection
// stays Ready. Before, each refused entry's CRD was counted as lagging,
// and SchemaInSync turned False for the whole Connection at its next
// reconcile. A tenant's Binding of an API whose names the cluster's CRD
// holds cannot turn it False either: a namespace's user cannot make the
// cluster admin's Connection report a lag.
func TestRefusedProjectionEntryIsReportedOnItsBindingOnly(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g, acme := group(), unique("refused")+".io"
	installCRDs(t, env.Provider, widgets(g),
		enginetest.CRD("gadgets", "gadget", "Gadget", g, ns, true), enginetest.CRD("cogs", "cog", "Cog", g, ns, true),
		enginetest.CRD("gizmoes", "gizmoe", "Gizmo", acme, ns, true))
	// The consumer cluster's own CRD, which kbind did not create.
	foreign := enginetest.CRD("gizmos", "gizmo", "Gizmo", acme, ns, false)
	if err := env.Consumer.Create(ctx, foreign.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := namesAccepted(t, foreign.Name); !ok {
		t.Fatal("the cluster's own CRD was refused its names")
	}
	defer deleteCRD(t, foreign.Name, false)

	conn := connect(t, "refused-entry", nil, admitAll)
	healthy := clusterBinding(t, "healthy", conn.Name, "widgets."+g)
	enginetest.WaitCondition(t, env.Consumer, healthy, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	refused := projecting(unique("refused"), conn.Name, "gadgets."+g, kbindv1alpha1.Projection{Group: acme, Kind: "Gizmo", Plural: "gizmos"})
	refused.Spec.APIs = append(refused.Spec.APIs,
		kbindv1alpha1.APIReference{Name: "cogs." + g, Projection: &kbindv1alpha1.Projection{Group: acme, Kind: "Gizmo", Plural: "gizmoz"}})
	if err := env.Consumer.Create(ctx, refused); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, refused, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		"collides with the CRD gizmos."+acme+", which kbind did not create", "the consumer API gizmoz."+acme+" is not installed")
	absentCRD(t, "gizmoz."+acme, "a projection onto a kind another CRD holds")
	tenant := namespacedBinding(t, unique("team-refused"), "gizmoes", conn.Name, "gizmoes."+acme)
	enginetest.WaitCondition(t, env.Consumer, tenant, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"the consumer API gizmoes."+acme+" is not installed")
	absentCRD(t, "gizmoes."+acme, "an API whose kind another CRD holds")

	// The Connection reconciles after the refusals were decided: a spec
	// change that changes nothing for it (allowing an insecure feature its
	// kubeconfig does not use) bumps its generation, and WaitCondition
	// reads SchemaInSync only once it was written for that generation.
	generation := conn.Generation
	enginetest.Eventually(t, "Connection "+conn.Name+" spec changed", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(conn), conn); err != nil {
			return err
		}
		conn.Spec.AllowInsecure = []kbindv1alpha1.InsecureKubeconfigFeature{kbindv1alpha1.InsecureProxyURL}
		return env.Consumer.Update(ctx, conn)
	})
	if conn.Generation == generation {
		t.Fatalf("the Connection's generation stayed %d", generation)
	}
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, healthy, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	for _, b := range []client.Object{tenant, refused, healthy} {
		if err := env.Consumer.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, b)
	}
}
