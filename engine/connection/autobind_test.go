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

package connection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// Issue #52, path 2: a provider-side change of its exports (the label
// removed, the CRD deleted and re-created in an upgrade) never empties the
// consumer. autoBind only ever adds APIs (CONN-6): an API that stops being
// exported stays listed in the autoBind ClusterBinding, which reports
// APINotExported like an explicit binding and drains nothing.

// autoBound is a provider of its own exporting one namespaced API (plural
// keeps in a group of its own), a Connection with autoBind to it on the
// shared consumer, and one consumer object synced through the autoBind
// ClusterBinding.
type autoBound struct {
	name     string
	provider client.Client
	crd      *apiextensionsv1.CustomResourceDefinition
	obj      *unstructured.Unstructured
	// UIDs of what kbind holds or made, as first seen.
	consumerCRD, consumerObj, providerCopy types.UID
}

func startAutoBound(t *testing.T, base string, source kbindv1alpha1.SchemaSource) *autoBound {
	t.Helper()
	ctx := context.Background()
	name := unique(base)
	group := name + ".example.org"
	crd := enginetest.CRD("keeps", "keep", "Keep", group, apiextensionsv1.NamespaceScoped, true)
	other, pc := ownProvider(t, crd)
	a := &autoBound{name: name, provider: pc, crd: crd}
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": other.Kubeconfig})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = source
	})
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	enginetest.WaitCondition(t, consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	a.obj = &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	a.obj.SetAPIVersion(group + "/v1alpha1")
	a.obj.SetKind("Keep")
	a.obj.SetNamespace("default")
	a.obj.SetName("precious")
	if err := consumer.Create(ctx, a.obj.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	a.consumerCRD = a.consumerCRDUID(t)
	a.consumerObj = a.uidOn(t, consumer)
	eventually(t, "the provider copy", func() error {
		a.providerCopy = a.uidOn(t, a.provider)
		if a.providerCopy == "" {
			return fmt.Errorf("no provider copy yet")
		}
		return nil
	})
	// Whatever happens, say what kbind held is still there or not: the
	// evidence of a drain when an assertion fails.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("after the failure: consumer CRD %q (was %s), consumer object %q (was %s), provider copy %q (was %s)",
				a.consumerCRDUID(t), a.consumerCRD, a.uidOn(t, consumer), a.consumerObj, a.uidOn(t, a.provider), a.providerCopy)
		}
	})
	return a
}

// uidOn is the UID of the object on c, "" when it is gone or deleting.
func (a *autoBound) uidOn(t *testing.T, c client.Client) types.UID {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(a.obj.GroupVersionKind())
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(a.obj), got); err != nil || !got.GetDeletionTimestamp().IsZero() {
		return ""
	}
	return got.GetUID()
}

// consumerCRDUID is the UID of kbind's consumer CRD, "" when it is gone or
// deleting.
func (a *autoBound) consumerCRDUID(t *testing.T) types.UID {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := consumer.Get(context.Background(), client.ObjectKey{Name: a.crd.Name}, crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		return ""
	}
	return crd.UID
}

// waitUnexported waits until the Connection no longer exports the API
// (the konnector has seen the change) and the autoBind ClusterBinding
// reports it not exported — still listing it, not deleting.
func (a *autoBound) waitUnexported(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "the export gone from the Connection", func() error {
		if n := len(getConnection(t, a.name).Status.ExportedAPIs); n != 0 {
			return fmt.Errorf("%d export(s)", n)
		}
		return nil
	})
	eventually(t, "the autoBind ClusterBinding reporting APINotExported", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := consumer.Get(ctx, client.ObjectKey{Name: a.name}, cb); err != nil {
			return fmt.Errorf("the autoBind ClusterBinding: %w", err)
		}
		if !cb.DeletionTimestamp.IsZero() {
			return fmt.Errorf("the autoBind ClusterBinding is being deleted (drained)")
		}
		if got := fmt.Sprint(cb.Spec.ConsumerNames()); got != "["+a.crd.Name+"]" {
			return fmt.Errorf("the autoBind ClusterBinding lists %s", got)
		}
		for _, c := range cb.Status.Conditions {
			if c.Type == string(kbindv1alpha1.ConditionReady) {
				if c.Reason != string(kbindv1alpha1.ReasonAPINotExported) || !strings.Contains(c.Message, a.crd.Name) {
					return fmt.Errorf("Ready=%s/%s: %s", c.Status, c.Reason, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no Ready condition")
	})
}

// assertKept fails unless the consumer CRD and object are the ones first
// seen; the provider copy is checked by the caller (a deleted provider CRD
// takes it along).
func (a *autoBound) assertConsumerKept(t *testing.T) {
	t.Helper()
	if got := a.consumerCRDUID(t); got != a.consumerCRD {
		t.Fatalf("the consumer CRD is %q, was %s", got, a.consumerCRD)
	}
	if got := a.uidOn(t, consumer); got != a.consumerObj {
		t.Fatalf("the consumer object is %q, was %s", got, a.consumerObj)
	}
}

func (a *autoBound) relabel(t *testing.T, exported bool) {
	t.Helper()
	ctx := context.Background()
	eventually(t, fmt.Sprintf("provider CRD exported=%v", exported), func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := a.provider.Get(ctx, client.ObjectKey{Name: a.crd.Name}, crd); err != nil {
			return err
		}
		if exported {
			crd.Labels = map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}
		} else {
			delete(crd.Labels, kbindv1alpha1.ExportedLabel)
		}
		return a.provider.Update(ctx, crd)
	})
}

// TestAutoBindKeepsAnUnexportedAPI: the provider removes the export label
// from a bound CRD. The autoBind ClusterBinding keeps the API and reports
// APINotExported; the consumer CRD, the consumer object and its provider
// copy stay. Labelled again, the API is Ready again.
func TestAutoBindKeepsAnUnexportedAPI(t *testing.T) {
	t.Parallel()
	a := startAutoBound(t, "unlabelled", kbindv1alpha1.SchemaSourceCRD)
	a.relabel(t, false)
	a.waitUnexported(t)
	a.assertConsumerKept(t)
	if got := a.uidOn(t, a.provider); got != a.providerCopy {
		t.Fatalf("the provider copy is %q, was %s", got, a.providerCopy)
	}

	a.relabel(t, true)
	enginetest.WaitCondition(t, consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: a.name}},
		kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	a.assertConsumerKept(t)
	if got := a.uidOn(t, a.provider); got != a.providerCopy {
		t.Fatalf("the provider copy is %q, was %s", got, a.providerCopy)
	}
}

// TestAutoBindKeepsARecreatedCRD: the provider deletes an exported CRD
// and creates it again (an upgrade that re-installs its CRDs). Deleting
// the CRD deletes the provider's objects of it, the provider copy
// included — the provider's own act; what kbind holds (the consumer CRD
// and object) stays, the autoBind ClusterBinding reports APINotExported
// meanwhile, and once the CRD is back the copy is made again.
func TestAutoBindKeepsARecreatedCRD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := startAutoBound(t, "recreated", kbindv1alpha1.SchemaSourceCRD)
	if err := a.provider.Delete(ctx, a.crd.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the provider CRD gone", func() error {
		err := a.provider.Get(ctx, client.ObjectKey{Name: a.crd.Name}, &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	a.waitUnexported(t)
	a.assertConsumerKept(t)

	if err := a.provider.Create(ctx, a.crd.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: a.name}},
		kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	eventually(t, "the provider copy made again", func() error {
		got := a.uidOn(t, a.provider)
		if got == "" || got == a.providerCopy {
			return fmt.Errorf("provider copy %q (the deleted one was %s)", got, a.providerCopy)
		}
		return nil
	})
	a.assertConsumerKept(t)
}

// TestAutoSourceSeesALabelRemoval: with the schema source Auto resolved to
// CRD and nothing polled within the test, removing the export label from
// the provider's only exported CRD shows in the Connection's exports
// within seconds (through the watch of the exported CRDs). It used to
// fall through to OpenAPI — which exports every non-built-in resource,
// the unlabelled CRD included — so the Connection went on listing it
// (issue #52: 13 minutes after the label was removed).
//
// A consumer and an engine of its own (slowPolling), and a provider of its
// own.
func TestAutoSourceSeesALabelRemoval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	crd := enginetest.CRD("keeps", "keep", "Keep", "auto.example.org", apiextensionsv1.NamespaceScoped, true)
	other, pc := ownProvider(t, crd)
	cc, c := ownConsumer(t)
	env.StartEngineOn(t, cc.Config, slowPolling)
	for _, o := range []client.Object{
		createdSecret(secretNS, "auto-source", other.Kubeconfig),
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "auto-source"}, Spec: kbindv1alpha1.ConnectionSpec{
			KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: secretNS, Name: "auto-source"},
			AutoBind:            true,
			Schema:              kbindv1alpha1.SchemaPolicy{Source: kbindv1alpha1.SchemaSourceAuto}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitExports(t, c, "auto-source", "keeps.auto.example.org")

	eventually(t, "the export label removed", func() error {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := pc.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
			return err
		}
		delete(got.Labels, kbindv1alpha1.ExportedLabel)
		return pc.Update(ctx, got)
	})
	waitExports(t, c, "auto-source")
	conn := &kbindv1alpha1.Connection{}
	if err := c.Get(ctx, client.ObjectKey{Name: "auto-source"}, conn); err != nil {
		t.Fatal(err)
	}
	if conn.Status.ActiveSchemaSource != kbindv1alpha1.ActiveSchemaSourceCRD {
		t.Errorf("activeSchemaSource %q, want CRD (Auto stays with CRD once resolved to it)", conn.Status.ActiveSchemaSource)
	}
}

// createdSecret is a kubeconfig Secret to create.
func createdSecret(namespace, name string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
}
