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

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// Regression tests for issue #14.

func waitGoneBinding(t *testing.T, obj client.Object) {
	t.Helper()
	enginetest.Eventually(t, "binding gone", func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// defaultObject is a consumer object in the default namespace.
func defaultObject(apiVersion, kind, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace("default")
	obj.SetName(name)
	return obj
}

func setPullPolicy(t *testing.T, name string, policy kbindv1alpha1.PullPolicy) {
	t.Helper()
	ctx := context.Background()
	enginetest.Eventually(t, "pullPolicy "+string(policy), func() error {
		conn := &kbindv1alpha1.Connection{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: name}, conn); err != nil {
			return err
		}
		conn.Spec.Schema.PullPolicy = policy
		return env.Consumer.Update(ctx, conn)
	})
}

// A CRD stamped under pullPolicy None stays the user's when the policy
// later says Bound: kbind never updates it, and unbinding never deletes it
// (with every object of it).
func TestPolicySwitchNeverTakesOverAStampedCRD(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	api := "switches." + g
	installCRDs(t, env.Provider, enginetest.CRD("switches", "switch", "Switch", g, ns, true))
	mine := enginetest.CRD("switches", "switch", "Switch", g, ns, false)
	mine.Labels = map[string]string{"owner": "me"}
	if err := env.Consumer.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, "switcher", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyNone })
	cb := clusterBinding(t, "switches", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	stamped := consumerCRD(t, api)
	if stamped.Annotations[kbindv1alpha1.ConnectionAnnotation] != conn.Name {
		t.Fatalf("not stamped: %v", stamped.Annotations)
	}

	setPullPolicy(t, conn.Name, kbindv1alpha1.PullPolicyBound)
	// The provider's schema differs (its CRD is exported with other
	// labels); under Bound kbind would update its own CRD. This one is not
	// kbind's: the Connection says it lags, and it is left alone.
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, api)
	if crd.Annotations[kbindv1alpha1.SchemaHashAnnotation] != "" || crd.Generation != stamped.Generation || crd.Labels["owner"] != "me" {
		t.Fatalf("kbind took the CRD over: generation %d→%d, annotations %v", stamped.Generation, crd.Generation, crd.Annotations)
	}

	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, cb)
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Fatalf("unbinding deleted a CRD kbind did not create: %v", err)
	}
}

// A provider storage-version change reaches the consumer CRD although the
// old version is in its status.storedVersions; stored objects stay
// readable and sync goes on in the new version.
func TestStorageVersionChangeIsFollowed(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	api := "storeds." + g
	installCRDs(t, env.Provider, enginetest.CRD("storeds", "stored", "Stored", g, ns, true))
	conn := connect(t, "storer", nil)
	cb := clusterBinding(t, "storeds", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	old := defaultObject(g+"/v1alpha1", "Stored", "before")
	if err := env.Consumer.Create(ctx, old); err != nil {
		t.Fatal(err)
	}

	// The provider adds v1 and makes it the storage version.
	enginetest.Eventually(t, "provider storage version v1", func() error {
		p := providerCRD(t, api)
		v1 := *p.Spec.Versions[0].DeepCopy()
		v1.Name = "v1"
		p.Spec.Versions[0].Storage = false
		p.Spec.Versions = append(p.Spec.Versions, v1)
		return env.Provider.Update(ctx, p)
	})
	enginetest.Eventually(t, "consumer CRD stores v1", func() error {
		crd := consumerCRD(t, api)
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1" && v.Storage {
				return nil
			}
		}
		return fmt.Errorf("versions %+v, stored %v", crd.Spec.Versions, crd.Status.StoredVersions)
	})
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	// The object stored as v1alpha1 reads as v1; a new object syncs.
	got := &unstructured.Unstructured{}
	got.SetAPIVersion(g + "/v1")
	got.SetKind("Stored")
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(old), got); err != nil {
		t.Fatalf("the object stored in the old version: %v", err)
	}
	fresh := defaultObject(g+"/v1", "Stored", "after")
	if err := env.Consumer.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the new object's provider copy", func() error {
		return env.Provider.Get(ctx, client.ObjectKeyFromObject(fresh), fresh.DeepCopy())
	})
}

// pullPolicy All keeps every export installed: unbinding never deletes a
// CRD, and a Connection that stops being Ready keeps its CRDs. The
// Connection installs every export of its provider: the provider is the
// test's own.
func TestPullPolicyAllKeepsCRDsOnUnbindAndWhenNotReady(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := "all." + group()
	api := "keeps." + g
	cluster, provider := ownProvider(t, enginetest.CRD("keeps", "keep", "Keep", g, ns, true))
	conn := connect(t, "keeper", cluster.Kubeconfig, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyAll })
	cb := clusterBinding(t, "keeps", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, api)
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, cb)
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Fatalf("unbinding under pullPolicy All deleted the CRD: %v", err)
	}

	// An object synced through a new binding...
	cb = clusterBinding(t, "keeps-again", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	obj := defaultObject(g+"/v1alpha1", "Keep", "kept")
	if err := env.Consumer.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the provider copy", func() error { return provider.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()) })

	// ...the Connection stops being Ready (its Secret breaks): CRDs,
	// objects and provider copies stay.
	secret := &corev1.Secret{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Namespace: enginetest.SecretNamespace, Name: conn.Spec.KubeconfigSecretRef.Name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = []byte("broken")
	if err := env.Consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Fatalf("a Connection that is not Ready lost its CRD: %v", err)
	}
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || !obj.GetDeletionTimestamp().IsZero() {
		t.Fatalf("a Connection that is not Ready lost a consumer object: %v", err)
	}
	if err := provider.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()); err != nil {
		t.Fatalf("a Connection that is not Ready lost a provider copy: %v", err)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := env.Consumer.List(ctx, &crds, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		t.Fatal(err)
	}
	for _, c := range crds.Items {
		if c.Annotations[kbindv1alpha1.ConnectionAnnotation] == conn.Name && !c.DeletionTimestamp.IsZero() {
			t.Errorf("CRD %s is being deleted", c.Name)
		}
	}
}

// The last binding of an API — a namespaced Binding — releases what the
// engine holds for it when it goes: its syncer, and with it every watch on
// the API on both clusters (a Binding that counted itself among the
// bindings still listing the API kept them for good). No other test has
// an API of plural "lasts": the watches counted are this test's.
func TestLastBindingReleasesTheAPIsWatches(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("lasts", "last", "Last", g, ns, true))
	provider := env.Provider
	watches := func() (consumer, provider int) {
		return enginetest.OpenWatches(t, env.Pair.Consumer.Config, "lasts"), enginetest.OpenWatches(t, env.Pair.Provider.Config, "lasts")
	}
	consumerBefore, providerBefore := watches()

	conn := connect(t, "lasts", nil, admitAll)
	lastA := unique("last-a")
	b := namespacedBinding(t, lastA, "lasts", conn.Name, "lasts."+g)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	obj := defaultObject(g+"/v1alpha1", "Last", "one")
	obj.SetNamespace(lastA)
	if err := env.Consumer.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitProviderSpec(t, provider, g+"/v1alpha1", obj, 1)
	if c, p := watches(); c <= consumerBefore || p <= providerBefore {
		t.Fatalf("while bound: %d consumer and %d provider watch(es), %d and %d before", c, p, consumerBefore, providerBefore)
	}

	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, b)
	enginetest.Eventually(t, "the watches on lasts back to where they were", func() error {
		if c, p := watches(); c != consumerBefore || p != providerBefore {
			return fmt.Errorf("%d consumer and %d provider watch(es), %d and %d before", c, p, consumerBefore, providerBefore)
		}
		return nil
	})
}
