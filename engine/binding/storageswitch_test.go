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
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// Issue #52 path 3: a provider storage-version change must never prune
// consumer data. Each test's provider API is in an API group of its own
// on the shared provider.

// specSchema is a version whose spec holds the given integer/string
// fields (pruned otherwise), with a status subresource.
func specSchema(name string, storage bool, fields map[string]string) apiextensionsv1.CustomResourceDefinitionVersion {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for f, typ := range fields {
		props[f] = apiextensionsv1.JSONSchemaProps{Type: typ}
	}
	preserve := true
	return apiextensionsv1.CustomResourceDefinitionVersion{
		Name: name, Served: true, Storage: storage,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec":   {Type: "object", Properties: props},
				"status": {Type: "object", XPreserveUnknownFields: &preserve},
			},
		}},
		Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
	}
}

// renamingWebhook serves ConversionReviews for a provider whose v2 renames
// v1's spec.size to spec.replicas; caBundle is its certificate (PEM).
func renamingWebhook(t *testing.T, group string) (url string, caBundle []byte) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review := &apiextensionsv1.ConversionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("bad review: %v", err), http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			obj := &unstructured.Unstructured{}
			if err := json.Unmarshal(raw.Raw, &obj.Object); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			from, to := "size", "replicas"
			if review.Request.DesiredAPIVersion == group+"/v1" {
				from, to = "replicas", "size"
			}
			if v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", from); ok {
				unstructured.RemoveNestedField(obj.Object, "spec", from)
				_ = unstructured.SetNestedField(obj.Object, v, "spec", to)
			}
			obj.SetAPIVersion(review.Request.DesiredAPIVersion)
			data, _ := json.Marshal(obj.Object)
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/convert", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// storageProvider installs crd on the shared provider, connects to it
// and binds the API through a ClusterBinding, waiting until it syncs.
func storageProvider(t *testing.T, name string, crd *apiextensionsv1.CustomResourceDefinition) (client.Client, *kbindv1alpha1.Connection, *kbindv1alpha1.ClusterBinding) {
	t.Helper()
	crd.Labels = map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}
	installCRDs(t, env.Provider, crd)
	provider := env.Provider
	conn := connect(t, name, nil)
	cb := clusterBinding(t, name, conn.Name, crd.Name)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	return provider, conn, cb
}

// storageObject is a consumer object of kind at apiVersion with spec.
func storageObject(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace("default")
	obj.SetName(name)
	return obj
}

// consumerStorage is the consumer CRD name's storage version.
func consumerStorage(t *testing.T, name string) string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// switchDecided waits until kbind has decided the provider's storage
// switch of CRD name: the consumer CRD stores v2 (followed), or cb's Ready
// says StorageVersionChange (refused).
func switchDecided(ctx context.Context, t *testing.T, name string, cb *kbindv1alpha1.ClusterBinding) {
	t.Helper()
	enginetest.Eventually(t, "the switch decided", func() error {
		if consumerStorage(t, name) == "v2" {
			return nil
		}
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if c := meta(cb.Status.Conditions, kbindv1alpha1.ConditionReady); c != nil && c.Reason == string(kbindv1alpha1.ReasonStorageVersionChange) {
			return nil
		}
		return fmt.Errorf("consumer stores %s, binding %+v", consumerStorage(t, name), cb.Status.Conditions)
	})
}

// severalResyncs is how long a decision must hold: three binding resyncs
// (enginetest's BindingResync, 2 s), each of which would act on it again.
const severalResyncs = 3 * 2 * time.Second

// holds checks check for d (polling every 250 ms), failing the test on
// the first error.
func holds(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// nested is the value at path in obj read from c at apiVersion.
func nested(c client.Client, apiVersion string, obj *unstructured.Unstructured, path ...string) (any, error) {
	got, err := at(c, apiVersion, obj)
	if err != nil {
		return nil, err
	}
	v, _, _ := unstructured.NestedFieldNoCopy(got.Object, path...)
	return v, nil
}

// The provider moves its storage version v1 → v2 with a conversion webhook
// that renames spec.size to spec.replicas. The consumer cannot run the
// webhook: switching the consumer CRD to v2 (conversion None) reads the
// objects stored at v1 as v2, pruned to v2's schema — spec.size is gone —
// and the syncer then writes that pruned spec to the provider. kbind must
// refuse the switch and report it: the consumer object keeps its data,
// the provider copy keeps spec.replicas.
func TestStorageSwitchByWebhookKeepsConsumerData(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	crd := enginetest.CRD("renames", "rename", "Rename", g, ns, true)
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{specSchema("v1", true, map[string]string{"size": "integer"})}
	provider, conn, cb := storageProvider(t, "renamer", crd)
	obj := storageObject(g+"/v1", "Rename", "db", map[string]any{"size": int64(3)})
	if err := env.Consumer.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitProviderSpec(t, provider, g+"/v1", obj, 3)

	url, caBundle := renamingWebhook(t, g)
	updateProviderCRD(t, provider, crd.Name, func(c *apiextensionsv1.CustomResourceDefinition) {
		if len(c.Spec.Versions) == 1 {
			c.Spec.Versions[0].Storage = false
			c.Spec.Versions = append(c.Spec.Versions, specSchema("v2", true, map[string]string{"replicas": "integer"}))
		}
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	})
	// The provider converts: its copy reads at v2 with spec.replicas.
	enginetest.Eventually(t, "the provider copy converted to v2", func() error {
		v, err := nested(provider, g+"/v2", obj, "spec", "replicas")
		if err != nil || v != int64(3) {
			return fmt.Errorf("spec.replicas %v: %v", v, err)
		}
		return nil
	})

	// Either kbind switched the consumer CRD (today) or it refused and
	// says so; give it a few binding resyncs to do either.
	switchDecided(ctx, t, crd.Name, cb)
	// The consumer object, read at the consumer CRD's storage version,
	// and the provider copy keep their data for several resyncs.
	holds(t, severalResyncs, "data kept after the provider's storage switch", func() error {
		storage := consumerStorage(t, crd.Name)
		field := map[string]string{"v1": "size", "v2": "replicas"}[storage]
		if v, err := nested(env.Consumer, g+"/"+storage, obj, "spec", field); err != nil || v != int64(3) {
			got, _ := at(env.Consumer, g+"/"+storage, obj)
			return fmt.Errorf("the consumer object read at its storage version %s lost spec.%s: spec %v (%v)", storage, field, got.Object["spec"], err)
		}
		if v, err := nested(provider, g+"/v2", obj, "spec", "replicas"); err != nil || v != int64(3) {
			got, _ := at(provider, g+"/v2", obj)
			return fmt.Errorf("the provider copy lost spec.replicas: spec %v (%v)", got.Object["spec"], err)
		}
		return nil
	})
	if got := consumerStorage(t, crd.Name); got != "v1" {
		t.Fatalf("the consumer CRD stores %s, want v1 kept", got)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonStorageVersionChange,
		"v1 to v2", "conversion webhook", "spec.size", kbindv1alpha1.AcceptStorageVersionAnnotation)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionFalse, kbindv1alpha1.ReasonStorageVersionChange,
		crd.Name)
	// Sync goes on at v1 through the provider's webhook.
	setSize(t, g+"/v1", obj, 5)
	enginetest.Eventually(t, "a spec change reaches the provider through its webhook", func() error {
		v, err := nested(provider, g+"/v2", obj, "spec", "replicas")
		if err != nil || v != int64(5) {
			return fmt.Errorf("spec.replicas %v: %v", v, err)
		}
		return nil
	})
}

// With conversion None and both versions served, the provider moves its
// storage version to v2, whose schema lacks v1's spec.color: the consumer
// objects stored at v1 would be read as v2 without it. kbind refuses until
// the operator accepts the switch on the consumer CRD
// (core.kbind.io/accept-storage-version: v2); then it switches.
func TestStorageSwitchThatPrunesWaitsForTheOperator(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	crd := enginetest.CRD("prunes", "prune", "Prune", g, ns, true)
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		specSchema("v1", true, map[string]string{"size": "integer", "color": "string"}),
		specSchema("v2", false, map[string]string{"size": "integer"}),
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	provider, conn, cb := storageProvider(t, "pruner", crd)
	obj := storageObject(g+"/v1", "Prune", "db", map[string]any{"size": int64(3), "color": "red"})
	if err := env.Consumer.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitProviderSpec(t, provider, g+"/v1", obj, 3)

	updateProviderCRD(t, provider, crd.Name, func(c *apiextensionsv1.CustomResourceDefinition) {
		for i := range c.Spec.Versions {
			c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == "v2"
		}
	})
	switchDecided(ctx, t, crd.Name, cb)
	holds(t, severalResyncs, "data kept after the provider's storage switch", func() error {
		storage := consumerStorage(t, crd.Name)
		if v, err := nested(env.Consumer, g+"/"+storage, obj, "spec", "color"); err != nil || v != "red" {
			got, _ := at(env.Consumer, g+"/"+storage, obj)
			return fmt.Errorf("the consumer object read at its storage version %s lost spec.color: spec %v (%v)", storage, got.Object["spec"], err)
		}
		return nil
	})
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonStorageVersionChange,
		"v1 to v2", "spec.color", kbindv1alpha1.AcceptStorageVersionAnnotation)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionFalse, kbindv1alpha1.ReasonStorageVersionChange, crd.Name)

	// The operator moved spec.color's data away (here: dropped it) and
	// accepts the switch: kbind switches, the binding is Ready again.
	enginetest.Eventually(t, "spec.color removed", func() error {
		got, err := at(env.Consumer, g+"/v1", obj)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(got.Object, "spec", "color")
		return env.Consumer.Update(ctx, got)
	})
	enginetest.Eventually(t, "the switch accepted", func() error {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: crd.Name}, c); err != nil {
			return err
		}
		c.Annotations[kbindv1alpha1.AcceptStorageVersionAnnotation] = "v2"
		return env.Consumer.Update(ctx, c)
	})
	waitServed(t, crd.Name, "v1 v2(storage)")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	setSize(t, g+"/v2", obj, 4)
	waitProviderSpec(t, provider, g+"/v2", obj, 4)
}

// meta is the condition typ of conds, nil when absent.
func meta(conds []metav1.Condition, typ kbindv1alpha1.ConditionType) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == string(typ) {
			return &conds[i]
		}
	}
	return nil
}
