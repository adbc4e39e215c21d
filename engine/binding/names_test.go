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
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// namesCRD is a consumer CRD of group with the given names (the API
// server defaults singular and list kind when empty).
func namesCRD(plural, group string, names apiextensionsv1.CustomResourceDefinitionNames) *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD(plural, names.Singular, names.Kind, group, ns, false)
	names.Plural = plural
	crd.Spec.Names = names
	return crd
}

// namesAccepted waits until the consumer API server has decided on the
// names of the CRD name and returns the decision (the CRD as read).
func namesAccepted(t *testing.T, name string) (bool, *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	var accepted bool
	enginetest.Eventually(t, "the consumer API server's names decision on "+name, func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.NamesAccepted && c.Status != apiextensionsv1.ConditionUnknown {
				accepted = c.Status == apiextensionsv1.ConditionTrue
				return nil
			}
		}
		return fmt.Errorf("no NamesAccepted decision yet: %+v", crd.Status.Conditions)
	})
	return accepted, crd
}

// crdDeletion bounds the wait for a deleted consumer CRD to go: the API
// server's CRD finalizer has five workers and holds each up to a minute
// for a CRD whose objects do not go yet (other tests' CRDs, whose objects
// wait for kbind's finalizers), so a deletion may queue that long before
// its own short cleanup.
const crdDeletion = enginetest.PollTimeout + time.Minute

// waitCRDGone waits until the consumer CRD name is gone, or is another
// object than uid ("" any).
func waitCRDGone(t *testing.T, name string, uid types.UID) {
	t.Helper()
	enginetest.EventuallyWithin(t, crdDeletion, "consumer CRD "+name+" gone", func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, crd)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case uid != "" && crd.UID != uid:
			return nil
		}
		return fmt.Errorf("still there (uid %s, deleting %v)", crd.UID, crd.DeletionTimestamp != nil)
	})
}

func absentCRD(t *testing.T, name, why string) {
	t.Helper()
	err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: consumer CRD %s exists (%v)", why, name, err)
	}
}

// deleteCRD deletes the consumer CRD name and, when wait is set, waits
// until it is gone.
func deleteCRD(t *testing.T, name string, wait bool) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Consumer.Delete(context.Background(), crd); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if wait {
		waitCRDGone(t, name, "")
	}
}

func projecting(name, connection, api string, p kbindv1alpha1.Projection) *kbindv1alpha1.ClusterBinding {
	return &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: connection},
		APIs:          []kbindv1alpha1.APIReference{{Name: api, Projection: &p}}}}
}

// NameConflicts agrees with the consumer API server's naming controller:
// for each pair, the second CRD's names are refused exactly when
// NameConflicts finds the first holding one of them.
func TestNameConflictsAgreeWithTheAPIServer(t *testing.T) {
	setup(t)
	type names = apiextensionsv1.CustomResourceDefinitionNames
	cases := []struct {
		name             string
		holder, newcomer names
		holderPlural     string
		newPlural        string
		refused          bool
	}{
		{"the same kind under another plural", names{Kind: "Gizmo"}, names{Kind: "Gizmo", Singular: "gizmoz"}, "gizmos", "gizmoz", true},
		{"our plural is their singular", names{Kind: "Thing", Singular: "gizmoz"}, names{Kind: "Gizmo"}, "things", "gizmoz", true},
		{"our singular is their plural", names{Kind: "GizmoThing", Singular: "gizmothing"}, names{Kind: "Gizmo"}, "gizmo", "gizmoz", true},
		{"our short name is their plural", names{Kind: "GzThing"}, names{Kind: "Gizmo", ShortNames: []string{"gz"}}, "gz", "gizmoz", true},
		{"our plural is their short name", names{Kind: "Other", ShortNames: []string{"gizmoz"}}, names{Kind: "Gizmo"}, "others", "gizmoz", true},
		{"short name against short name", names{Kind: "Other", ShortNames: []string{"gz"}}, names{Kind: "Gizmo", ShortNames: []string{"gz"}}, "others", "gizmoz", true},
		{"our kind is their list kind", names{Kind: "Lst", ListKind: "Gizmo"}, names{Kind: "Gizmo"}, "lsts", "gizmoz", true},
		{"our list kind is their kind", names{Kind: "GizmoList"}, names{Kind: "Gizmo"}, "gizmolists", "gizmoz", true},
		{"kinds and resource names apart", names{Kind: "Gizmoz", Singular: "z", ListKind: "Gz"}, names{Kind: "Gizmo", ShortNames: []string{"gz"}}, "zs", "gizmoz", false},
		{"nothing shared", names{Kind: "Widget", ShortNames: []string{"wd"}}, names{Kind: "Gizmo", ShortNames: []string{"gz"}}, "widgets", "gizmoz", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			group := unique(fmt.Sprintf("contract%d", i)) + ".example.org"
			holder := namesCRD(tc.holderPlural, group, tc.holder)
			if err := env.Consumer.Create(context.Background(), holder); err != nil {
				t.Fatal(err)
			}
			if ok, _ := namesAccepted(t, holder.Name); !ok {
				t.Fatalf("the holder's names were refused")
			}
			newcomer := namesCRD(tc.newPlural, group, tc.newcomer)
			var list apiextensionsv1.CustomResourceDefinitionList
			if err := env.Consumer.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			predicted := kbindschema.NameConflicts(newcomer, list.Items)
			if err := env.Consumer.Create(context.Background(), newcomer); err != nil {
				t.Fatal(err)
			}
			accepted, got := namesAccepted(t, newcomer.Name)
			if accepted != (len(predicted) == 0) || accepted == tc.refused {
				t.Errorf("the API server accepted the names: %v (%+v); NameConflicts found %+v; the row expects refused %v",
					accepted, got.Status.Conditions, predicted, tc.refused)
			}
			deleteCRD(t, newcomer.Name, false)
			deleteCRD(t, holder.Name, false)
		})
	}
}

// (a) An admin projects a provider API onto the kind of a CRD the consumer
// cluster has in that group, under another plural: kbind installs nothing
// and says which CRD holds which names; the cluster's CRD, deleted and
// created again (an operator upgrade), gets its names back.
func TestProjectionOntoAKindTheGroupHas(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g, acme := group(), unique("acme")+".io"
	installCRDs(t, env.Provider, widgets(g))
	foreign := enginetest.CRD("gizmos", "gizmo", "Gizmo", acme, ns, false)
	if err := env.Consumer.Create(ctx, foreign.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := namesAccepted(t, foreign.Name); !ok {
		t.Fatal("the cluster's own CRD was refused its names")
	}
	conn := connect(t, "names-a", nil)
	cb := projecting(unique("names-a"), conn.Name, "widgets."+g, kbindv1alpha1.Projection{Group: acme, Kind: "Gizmo", Plural: "gizmoz"})
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		"the consumer API gizmoz."+acme+" is not installed", "singular gizmo, kind Gizmo, list kind GizmoList of the CRD gizmos."+acme+" (which kbind did not create)",
		"project widgets."+g+" onto another kind and plural")
	absentCRD(t, "gizmoz."+acme, "a projection onto names another CRD holds")
	if len(cb.Status.BoundAPIs) != 0 {
		t.Errorf("the refused entry is in status.boundAPIs: %+v", cb.Status.BoundAPIs)
	}

	// The operator upgrade: its CRD deleted and created again.
	deleteCRD(t, foreign.Name, true)
	if err := env.Consumer.Create(ctx, foreign.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if ok, crd := namesAccepted(t, foreign.Name); !ok {
		t.Errorf("the cluster's CRD created again lost its names: %+v", crd.Status.Conditions)
	}
	consumerCRD(t, foreign.Name) // established
	absentCRD(t, "gizmoz."+acme, "after the cluster's CRD was created again")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		"kind Gizmo", "gizmos."+acme)

	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, cb)
	deleteCRD(t, foreign.Name, false)
}

// (b) The race: the cluster's CRD appears between kbind's names check and
// its create, and the API server refuses the names of kbind's CRD. Such a
// CRD — kbind's for this Connection, names refused, never established — is
// deleted (it never served: nothing was stored in it), and the binding
// says why. A CRD kbind did not create whose names were refused is never
// touched.
func TestRefusedNeverServedCRDIsDeleted(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g, race := group(), unique("race")+".acme.io"
	installCRDs(t, env.Provider, widgets(g))
	foreign := enginetest.CRD("gizmos", "gizmo", "Gizmo", race, ns, false)
	if err := env.Consumer.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if ok, _ := namesAccepted(t, foreign.Name); !ok {
		t.Fatal("the cluster's own CRD was refused its names")
	}
	conn := connect(t, "names-b", nil)
	// kbind's CRD as the create in the race left it: its markers, the
	// projection's names.
	lost := namesCRD("gizmoz", race, apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", Singular: "gizmo", ListKind: "GizmoList"})
	lost.Labels = map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}
	lost.Annotations = map[string]string{
		kbindv1alpha1.ConnectionAnnotation: conn.Name, kbindv1alpha1.SchemaHashAnnotation: "sha256:0000000000000000",
		kbindv1alpha1.ProviderAPIAnnotation: "widgets." + g, kbindv1alpha1.ProviderKindAnnotation: "Widget",
	}
	if err := env.Consumer.Create(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if ok, _ := namesAccepted(t, lost.Name); ok {
		t.Fatal("the API server accepted names another CRD holds")
	}
	// Not kbind's, names refused too: left alone.
	bystander := namesCRD("gizmoes", race, apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", Singular: "gizmoe"})
	if err := env.Consumer.Create(ctx, bystander); err != nil {
		t.Fatal(err)
	}
	if ok, _ := namesAccepted(t, bystander.Name); ok {
		t.Fatal("the API server accepted names another CRD holds")
	}

	cb := projecting(unique("names-b"), conn.Name, "widgets."+g, kbindv1alpha1.Projection{Group: race, Kind: "Gizmo", Plural: "gizmoz"})
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitCRDGone(t, lost.Name, lost.UID)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		"the consumer API gizmoz."+race+" is not installed", "kind Gizmo", "CRD gizmos."+race+" (which kbind did not create)")
	absentCRD(t, lost.Name, "after kbind deleted its refused CRD")
	// The engine logs once its delete returned, which may be after the
	// test saw the CRD go: wait for the line. The engine's log is the
	// package's: the line must name this CRD.
	enginetest.Eventually(t, "the log line for the deletion", func() error {
		if !logged("Deleted a consumer CRD whose names the API server refused and that never served", lost.Name) {
			return fmt.Errorf("no log line for the deletion")
		}
		return nil
	})
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(bystander), bystander); err != nil || !bystander.DeletionTimestamp.IsZero() {
		t.Errorf("the CRD kbind did not create: %v, deleting %v", err, bystander.DeletionTimestamp)
	}

	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, cb)
	deleteCRD(t, bystander.Name, false)
	deleteCRD(t, foreign.Name, false)
}

// (c) A namespace's Binding installed the unprojected gizmos.squat.acme.io;
// an admin's ClusterBinding then projects another provider API onto that
// very name. While the Binding lists it, or it holds objects, the
// ClusterBinding is refused naming both; once neither holds it, kbind
// replaces its CRD and the projection serves the name.
func TestProjectionOntoANameABindingHeld(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g, squat, team := group(), unique("squat")+".acme.io", unique("team-names-c")
	gizmos := "gizmos." + squat
	installCRDs(t, env.Provider, enginetest.CRD("gizmos", "gizmo", "Gizmo", squat, ns, true), enginetest.CRD("cogs", "cog", "Cog", g, ns, true))
	provider := env.Provider
	conn := connect(t, "names-c", nil, admitAll)
	b := namespacedBinding(t, team, "gizmos", conn.Name, gizmos)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	old := consumerCRD(t, gizmos)
	gizmo := namespacedObject(squat+"/v1alpha1", "Gizmo", team, "g1")
	create(t, gizmo)
	waitProviderSpec(t, provider, squat+"/v1alpha1", gizmo, 1)

	cb := projecting(unique("names-c"), conn.Name, "cogs."+g, kbindv1alpha1.Projection{Group: squat, Kind: "Gizmo"})
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		"CRD "+gizmos+" serves the provider's "+gizmos, "Binding "+team+"/gizmos lists it", "it holds 1 object(s)",
		"project cogs."+g+" onto another group or kind")

	// The Binding goes (its object's copy drained): the object still holds
	// the CRD.
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, b)
	// The condition read before the ClusterBinding's next reconcile still
	// names the Binding (it held the CRD then): wait for the one written
	// after the Binding went, which must not name it.
	enginetest.Eventually(t, "the refusal written after the Binding went", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if msg := conditionMessage(cb, kbindv1alpha1.ConditionReady); strings.Contains(msg, "Binding "+team) {
			return fmt.Errorf("a gone Binding is still named: %s", msg)
		}
		return nil
	})
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		"it holds 1 object(s)")
	if strings.Contains(conditionMessage(cb, kbindv1alpha1.ConditionReady), "Binding "+team) {
		t.Errorf("a gone Binding is still named: %s", conditionMessage(cb, kbindv1alpha1.ConditionReady))
	}
	if crd := consumerCRD(t, gizmos); crd.UID != old.UID {
		t.Fatal("the CRD holding an object was replaced")
	}

	// Its last object goes: kbind replaces the CRD (waiting for the API
	// server to delete it), and the projection serves the name.
	if err := env.Consumer.Delete(ctx, gizmo); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitConditionWithin(t, crdDeletion, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, gizmos)
	if crd.UID == old.UID || crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation] != "cogs."+g || crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != conn.Name {
		t.Errorf("the consumer CRD after the replacement: uid %s (was %s), annotations %v", crd.UID, old.UID, crd.Annotations)
	}
	cogged := namespacedObject(squat+"/v1alpha1", "Gizmo", team, "c1")
	create(t, cogged)
	asCog := namespacedObject(g+"/v1alpha1", "Cog", team, "c1")
	waitProviderSpec(t, provider, g+"/v1alpha1", asCog, 1)

	// A Binding of the provider's gizmos now waits: the ClusterBinding
	// serves that consumer API.
	again := namespacedBinding(t, team, "again", conn.Name, gizmos)
	enginetest.WaitCondition(t, env.Consumer, again, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"already covered by a ClusterBinding")

	for _, o := range []client.Object{again, cb} {
		if err := env.Consumer.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, o)
	}
}

// conditionMessage is the message of a binding's condition.
func conditionMessage(b kbindv1alpha1.BindingObject, typ kbindv1alpha1.ConditionType) string {
	for _, c := range b.BindingStatus().Conditions {
		if c.Type == string(typ) {
			return c.Message
		}
	}
	return ""
}

// logged reports whether one line of the engines' log holds every
// fragment.
func logged(fragments ...string) bool {
	for _, line := range strings.Split(engineLogs.String(), "\n") {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(line, f)
		}
		if all {
			return true
		}
	}
	return false
}
