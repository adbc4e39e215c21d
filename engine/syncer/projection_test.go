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
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

func projected(name string, p kbindv1alpha1.Projection) kbindv1alpha1.APIReference {
	return kbindv1alpha1.APIReference{Name: name, Projection: &p}
}

// TestProjection: a namespaced and a cluster-scoped provider API appear on
// the consumer under another group and kind; spec goes up to the
// provider's kind, status and provider Events come down to the consumer's,
// deletion removes the provider copy, and the provider's widgets are
// bound a second time under another group next to their plain binding.
func TestProjection(t *testing.T) {
	useEnv(t)
	ns, region := unique("projection-a"), unique("eu-west")
	ctx := context.Background()
	// The provider APIs and the consumer groups they are projected onto
	// are the test's own (an earlier run's consumer APIs stay); widgets
	// are setup's, projected a second time next to their plain binding:
	// two consumer APIs from one provider API. (This test runs alone: the
	// second consumer API of widgets is there for the tests that run after
	// it, as it always was.)
	databaseGVK, databases := namespacedAPI(t, "Database", "internal.corp")
	regionGVK, regions := providerAPI(t, enginetest.CRD("regions", "region", "Region", "internal.corp", apiextensionsv1.ClusterScoped, true))
	acme, copyGroup := unique("acme")+".io", unique("copy")+".example.org"
	acmeDatabaseGVK := schema.GroupVersionKind{Group: acme, Version: "v1alpha1", Kind: "AcmeDatabase"}
	acmeRegionGVK := schema.GroupVersionKind{Group: acme, Version: "v1alpha1", Kind: "AcmeRegion"}
	copiedWidgetGVK := schema.GroupVersionKind{Group: copyGroup, Version: "v1alpha1", Kind: "Widget"}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("projection")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs: []kbindv1alpha1.APIReference{
			projected(databases, kbindv1alpha1.Projection{Group: acme, Kind: "AcmeDatabase", ShortNames: []string{"adb"}}),
			projected(regions, kbindv1alpha1.Projection{Group: acme, Kind: "AcmeRegion"}),
			projected("widgets.example.org", kbindv1alpha1.Projection{Group: copyGroup}),
		}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
		t.Fatal(err)
	}
	wantBound := map[string]string{"acmedatabases." + acme: databases, "acmeregions." + acme: regions, "widgets." + copyGroup: "widgets.example.org"}
	for _, b := range cb.Status.BoundAPIs {
		if wantBound[b.Name] != b.ProviderAPI {
			t.Errorf("status.boundAPIs has %s ← %q, want ← %q", b.Name, b.ProviderAPI, wantBound[b.Name])
		}
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "acmedatabases." + acme}, crd); err != nil {
		t.Fatal(err)
	}
	if n := crd.Spec.Names; n.Kind != "AcmeDatabase" || n.ListKind != "AcmeDatabaseList" || n.Singular != "acmedatabase" || fmt.Sprint(n.ShortNames) != "[adb]" {
		t.Errorf("consumer CRD names %+v", n)
	}
	if crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation] != databases || crd.Annotations[kbindv1alpha1.ProviderKindAnnotation] != "Database" {
		t.Errorf("consumer CRD annotations %v", crd.Annotations)
	}

	// Spec up: an AcmeDatabase becomes a provider Database.
	db := create(t, env.Consumer, object(acmeDatabaseGVK, ns, "orders", map[string]any{"size": int64(3)}))
	pcopy := waitCopy(t, databaseGVK, ns, "orders", func(u *unstructured.Unstructured) error {
		if specOf(u) != "map[size:3]" {
			return fmt.Errorf("spec %s", specOf(u))
		}
		return nil
	})
	if pcopy.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] != string(db.GetUID()) {
		t.Errorf("provider copy markers %v", pcopy.GetAnnotations())
	}

	// A spec update goes up too.
	if err := env.Consumer.Patch(ctx, db, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"size":4}}`))); err != nil {
		t.Fatal(err)
	}
	pcopy = waitCopy(t, databaseGVK, ns, "orders", func(u *unstructured.Unstructured) error {
		if specOf(u) != "map[size:4]" {
			return fmt.Errorf("spec %s", specOf(u))
		}
		return nil
	})

	// Status down.
	if err := unstructured.SetNestedField(pcopy.Object, "Provisioned", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Status().Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the provider's status on the AcmeDatabase", func() error {
		u, _ := get(t, env.Consumer, acmeDatabaseGVK, ns, "orders")
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Provisioned" {
			return fmt.Errorf("status %v", u.Object["status"])
		}
		return nil
	})

	// A provider Event on the Database shows on the AcmeDatabase.
	pe := recordOn(t, pcopy, "orders.quota", "ProvisioningFailed", "quota exceeded")
	if got := waitForwarded(t, db, pe, 1); got.InvolvedObject.Kind != "AcmeDatabase" || got.InvolvedObject.APIVersion != acme+"/v1alpha1" {
		t.Errorf("the consumer Event is about %s %s, want AcmeDatabase %s/v1alpha1", got.InvolvedObject.APIVersion, got.InvolvedObject.Kind, acme)
	}

	// Cluster-scoped.
	create(t, env.Consumer, object(acmeRegionGVK, "", region, map[string]any{"zone": "a"}))
	waitCopy(t, regionGVK, "", region, nil)

	// The same provider API under a second consumer API: its own objects
	// sync to the same provider kind.
	create(t, env.Consumer, object(copiedWidgetGVK, ns, "copied", map[string]any{"size": int64(1)}))
	waitCopy(t, widgetGVK, ns, "copied", nil)
	create(t, env.Consumer, object(widgetGVK, ns, "plain", map[string]any{"size": int64(2)}))
	waitCopy(t, widgetGVK, ns, "plain", nil)

	// Deletion removes the provider copies.
	for _, o := range []struct {
		consumer, provider schema.GroupVersionKind
		ns, name           string
	}{{acmeDatabaseGVK, databaseGVK, ns, "orders"}, {acmeRegionGVK, regionGVK, "", region}, {copiedWidgetGVK, widgetGVK, ns, "copied"}} {
		u, _ := get(t, env.Consumer, o.consumer, o.ns, o.name)
		if err := env.Consumer.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
		waitGone(t, env.Provider, o.provider, o.ns, o.name)
		waitGone(t, env.Consumer, o.consumer, o.ns, o.name)
	}
	// The plain widget is untouched by the projected API's deletions.
	if _, ok := get(t, env.Provider, widgetGVK, ns, "plain"); !ok {
		t.Error("the plain widget's provider copy went with the projected API's objects")
	}
}

// TestProjectionRefused: a projection onto a consumer API another entry
// serves, or onto a CRD kbind did not create, is refused with
// ProjectionRefused naming the collision, and the API it collides with
// keeps syncing.
func TestProjectionRefused(t *testing.T) {
	parallelEnv(t)
	ns := unique("projection-b")
	ctx := context.Background()
	// Every API here, provider's and consumer's, is the test's own.
	keeperGVK, keepers := namespacedAPI(t, "Keeper", "keeper.example.org")
	narrowGVK, narrows := namespacedAPI(t, "Narrow", "narrow.example.org")
	_, labelleds := namespacedAPI(t, "Labelled", "labelled.example.org")
	_, guardeds := namespacedAPI(t, "Guarded", "guarded.example.org")
	collide := unique("collide") + ".example.org"
	first := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("projection-first")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{projected(keepers, kbindv1alpha1.Projection{Group: collide, Kind: "Held"})}}}
	if err := env.Consumer.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, first, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	foreign := enginetest.CRD("foreigns", "foreign", "Foreign", collide, apiextensionsv1.NamespaceScoped, false)
	if err := env.Consumer.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	second := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("projection-second")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs: []kbindv1alpha1.APIReference{
			// Another provider API onto the first's consumer API.
			projected(narrows, kbindv1alpha1.Projection{Group: collide, Kind: "Held"}),
			// Onto a CRD kbind did not create.
			projected(labelleds, kbindv1alpha1.Projection{Group: collide, Kind: "Foreign"}),
			// Onto the consumer API another entry of this binding names.
			projected(guardeds, kbindv1alpha1.Projection{Group: collide, Kind: "Foreign"}),
		}}}
	if err := env.Consumer.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, second, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonProjectionRefused,
		fmt.Sprintf("helds.%s collides: CRD helds.%s serves the provider's %s", collide, collide, keepers),
		fmt.Sprintf("foreigns.%s collides with the CRD foreigns.%s, which kbind did not create", collide, collide),
		fmt.Sprintf("%s and %s are both listed as the consumer API foreigns.%s", labelleds, guardeds, collide))

	// The first binding's API is untouched and keeps syncing; the CRD kbind
	// did not create is untouched.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "helds." + collide}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation] != keepers {
		t.Errorf("the first binding's CRD now serves %q", crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation])
	}
	heldGVK := schema.GroupVersionKind{Group: collide, Version: "v1alpha1", Kind: "Held"}
	create(t, env.Consumer, object(heldGVK, ns, "h1", map[string]any{"size": int64(1)}))
	waitCopy(t, keeperGVK, ns, "h1", nil)
	if _, ok := get(t, env.Provider, narrowGVK, ns, "h1"); ok {
		t.Error("the refused entry's provider API got a copy")
	}
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil || foreign.Labels[kbindv1alpha1.ManagedLabel] != "" {
		t.Errorf("the CRD kbind did not create was changed: %v %v", err, foreign.Labels)
	}
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
		t.Fatal(err)
	}
	if len(second.Status.BoundAPIs) != 0 {
		t.Errorf("refused entries in status.boundAPIs: %+v", second.Status.BoundAPIs)
	}
}
