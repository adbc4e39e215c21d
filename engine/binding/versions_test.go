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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// versioned is a provider CRD serving v1alpha1 and v1 (the storage
// version) with conversion None.
func versioned(group string) *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("versioneds", "versioned", "Versioned", group, ns, true)
	v1 := *crd.Spec.Versions[0].DeepCopy()
	v1.Name = "v1"
	crd.Spec.Versions[0].Storage = false
	crd.Spec.Versions = append(crd.Spec.Versions, v1)
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	return crd
}

// servedVersions is "name[(storage)] ..." of the served versions of a CRD.
func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		s := v.Name
		if v.Storage {
			s += "(storage)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// waitServed waits until the consumer CRD name serves want
// (servedVersions form) and is established.
func waitServed(t *testing.T, name, want string) {
	t.Helper()
	enginetest.Eventually(t, "consumer CRD "+name+" serving "+want, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		if got := servedVersions(crd); got != want {
			return fmt.Errorf("serves %q", got)
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established")
	})
}

// at reads obj's key from c at apiVersion.
func at(c client.Client, apiVersion string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got := &unstructured.Unstructured{}
	got.SetAPIVersion(apiVersion)
	got.SetKind(obj.GetKind())
	err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), got)
	return got, err
}

// waitProviderSpec waits until the provider copy of obj (read from p at
// apiVersion) has spec.size size.
func waitProviderSpec(t *testing.T, p client.Client, apiVersion string, obj *unstructured.Unstructured, size int64) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("provider copy of %s with size %d", obj.GetName(), size), func() error {
		got, err := at(p, apiVersion, obj)
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); n != size {
			return fmt.Errorf("spec %v", got.Object["spec"])
		}
		return nil
	})
}

// setProviderStatus writes status.phase on the provider copy of obj.
func setProviderStatus(t *testing.T, p client.Client, obj *unstructured.Unstructured, phase string) {
	t.Helper()
	enginetest.Eventually(t, "provider status of "+obj.GetName(), func() error {
		got, err := at(p, obj.GetAPIVersion(), obj)
		if err != nil {
			return err
		}
		got.Object["status"] = map[string]any{"phase": phase}
		return p.Status().Update(context.Background(), got)
	})
}

// waitConsumerStatus waits until the consumer object, read at apiVersion,
// has status.phase phase.
func waitConsumerStatus(t *testing.T, apiVersion string, obj *unstructured.Unstructured, phase string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("status %s of %s at %s", phase, obj.GetName(), apiVersion), func() error {
		got, err := at(env.Consumer, apiVersion, obj)
		if err != nil {
			return err
		}
		if p, _, _ := unstructured.NestedString(got.Object, "status", "phase"); p != phase {
			return fmt.Errorf("status %v", got.Object["status"])
		}
		return nil
	})
}

// setSize changes spec.size of the consumer object, written at apiVersion.
func setSize(t *testing.T, apiVersion string, obj *unstructured.Unstructured, size int64) {
	t.Helper()
	enginetest.Eventually(t, "spec.size of "+obj.GetName(), func() error {
		got, err := at(env.Consumer, apiVersion, obj)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(got.Object, size, "spec", "size"); err != nil {
			return err
		}
		return env.Consumer.Update(context.Background(), got)
	})
}

// updateProviderCRD applies mutate to the CRD name on the provider p.
func updateProviderCRD(t *testing.T, p client.Client, name string, mutate func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	enginetest.Eventually(t, "provider CRD "+name+" updated", func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := p.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		mutate(crd)
		return p.Update(context.Background(), crd)
	})
}

// With conversion None the consumer CRD serves every version the provider
// serves, with the same storage version; objects created at any version
// sync both ways; a version the provider adds, and a storage-version
// change, keep every object syncing. No other test has an API of plural
// "versioneds": the watches counted are this test's.
func TestEveryServedVersionSyncs(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	api := "versioneds." + g
	installCRDs(t, env.Provider, versioned(g))
	provider := env.Provider
	conn := connect(t, "versions", nil)
	cb := clusterBinding(t, "versioneds", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionAllVersionsServed, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitServed(t, api, "v1alpha1 v1(storage)")

	// An object at the non-storage version and one at the storage version.
	alpha := defaultObject(g+"/v1alpha1", "Versioned", "alpha")
	one := defaultObject(g+"/v1", "Versioned", "one")
	for _, obj := range []*unstructured.Unstructured{alpha, one} {
		if err := env.Consumer.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s at %s: %v", obj.GetName(), obj.GetAPIVersion(), err)
		}
		waitProviderSpec(t, provider, g+"/v1", obj, 1)
	}
	// Status comes down, read at the version the object was created at;
	// spec changes made at it go up.
	setProviderStatus(t, provider, alpha, "Ready")
	waitConsumerStatus(t, g+"/v1alpha1", alpha, "Ready")
	setSize(t, g+"/v1alpha1", alpha, 2)
	waitProviderSpec(t, provider, g+"/v1", alpha, 2)

	// The provider adds v2.
	updateProviderCRD(t, provider, api, func(crd *apiextensionsv1.CustomResourceDefinition) {
		if len(crd.Spec.Versions) == 2 {
			v2 := *crd.Spec.Versions[1].DeepCopy()
			v2.Name, v2.Storage = "v2", false
			crd.Spec.Versions = append(crd.Spec.Versions, v2)
		}
	})
	waitServed(t, api, "v1alpha1 v1(storage) v2")
	two := defaultObject(g+"/v2", "Versioned", "two")
	enginetest.Eventually(t, "creating an object at v2", func() error {
		return client.IgnoreAlreadyExists(env.Consumer.Create(ctx, two.DeepCopy()))
	})
	waitProviderSpec(t, provider, g+"/v2", two, 1)

	// The provider stores v2: the consumer follows, and the syncer goes on
	// at the new storage version for the objects stored before and after.
	updateProviderCRD(t, provider, api, func(crd *apiextensionsv1.CustomResourceDefinition) {
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v2"
		}
	})
	waitServed(t, api, "v1alpha1 v1 v2(storage)")
	// Instance sync moved to v2 on both sides, and nothing watches v1 any
	// more (a watch left behind would hold a second copy of every object).
	// The CRD update itself ends every watch for a moment, so this must
	// hold for a while, not once.
	watchesAtV2Only := func() error {
		for side, cfg := range map[string]*rest.Config{"consumer": env.Pair.Consumer.Config, "provider": env.Pair.Provider.Config} {
			if n := enginetest.OpenWatchesAt(t, cfg, "versioneds", "v1"); n != 0 {
				return fmt.Errorf("%d %s watch(es) at v1", n, side)
			}
			if n := enginetest.OpenWatchesAt(t, cfg, "versioneds", "v2"); n == 0 {
				return fmt.Errorf("no %s watch at v2", side)
			}
		}
		return nil
	}
	enginetest.Eventually(t, "watches at v2 only, for 3 s", func() error {
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if err := watchesAtV2Only(); err != nil {
				return err
			}
		}
		return nil
	})
	setSize(t, g+"/v1alpha1", alpha, 3)
	waitProviderSpec(t, provider, g+"/v2", alpha, 3)
	setSize(t, g+"/v1", one, 4)
	waitProviderSpec(t, provider, g+"/v2", one, 4)
	setProviderStatus(t, provider, one, "Moved")
	waitConsumerStatus(t, g+"/v1", one, "Moved")
	after := defaultObject(g+"/v1alpha1", "Versioned", "after")
	if err := env.Consumer.Create(ctx, after); err != nil {
		t.Fatal(err)
	}
	waitProviderSpec(t, provider, g+"/v2", after, 1)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionAllVersionsServed, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.Eventually(t, "every object counted as synced", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		for _, b := range cb.Status.BoundAPIs {
			if b.Instances != nil && b.Instances.Total == 4 && b.Instances.Synced == 4 {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})
}
