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

package faults

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// killedInstalling binds a second API (Gadgets) while the load runs and
// kills the konnector as soon as the consumer CRD it installs appears,
// before the API is established and its syncer runs. After the restart
// the binding must become Ready and Synced and a Gadget must sync; then
// the binding is deleted again (its syncer's goroutines and watches go
// with it).
func killedInstalling() scenario {
	const binding, crd, ns = "gadgets", "gadgets.example.org", "f-konnector-killed-installing"
	return scenario{
		name: "konnector-killed-installing", objects: 200, lasts: 2 * time.Second, ready: readyBound, converge: convergeBound,
		inject: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			must(t, e.consumer.Create(ctx, &kbindv1alpha1.ClusterBinding{
				ObjectMeta: metav1.ObjectMeta{Name: binding},
				Spec: kbindv1alpha1.BindingSpec{
					ConnectionRef: kbindv1alpha1.ConnectionReference{Name: connectionName},
					APIs:          []kbindv1alpha1.APIReference{{Name: crd}},
				},
			}))
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				return e.consumer.Get(ctx, client.ObjectKey{Name: crd}, &apiextensionsv1.CustomResourceDefinition{}) == nil, nil
			})
			if err != nil {
				t.Fatalf("the konnector did not install %s: %v", crd, err)
			}
			must(t, e.konnector.Kill(ctx))
			return func() { must(t, e.konnector.Start(ctx)) }
		},
		check: func(t *testing.T, e *env) {
			ctx := context.Background()
			b := &kbindv1alpha1.ClusterBinding{}
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				if err := e.consumer.Get(ctx, client.ObjectKey{Name: binding}, b); err != nil {
					return false, nil
				}
				return meta.IsStatusConditionTrue(b.Status.Conditions, string(kbindv1alpha1.ConditionReady)) &&
					meta.IsStatusConditionTrue(b.Status.Conditions, string(kbindv1alpha1.ConditionSynced)), nil
			})
			if err != nil {
				t.Fatalf("the ClusterBinding %s is not Ready and Synced after the restart: %v", binding, b.Status.Conditions)
			}
			gadget := &unstructured.Unstructured{}
			gadget.SetAPIVersion("example.org/v1alpha1")
			gadget.SetKind("Gadget")
			gadget.SetNamespace(ns)
			gadget.SetName("g")
			_ = unstructured.SetNestedField(gadget.Object, int64(3), "spec", "size")
			must(t, e.consumer.Create(ctx, gadget))
			copied := gadget.DeepCopy()
			must(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				return e.provider.Get(ctx, client.ObjectKeyFromObject(copied), copied) == nil, nil
			}))
			// Clean up: the Gadget through kbind, then the binding.
			must(t, e.consumer.Delete(ctx, gadget))
			for _, c := range []client.Client{e.consumer, e.provider} {
				must(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(gadget), gadget.DeepCopy())), nil
				}))
			}
			must(t, e.consumer.Delete(ctx, b))
			must(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(e.consumer.Get(ctx, client.ObjectKey{Name: binding}, b)), nil
			}))
		},
	}
}

// providerCRDRecreated deletes the provider's Widget CRD — and with it
// every provider copy — while the consumer objects exist and the load
// runs, then creates it again: the binding says the API is gone, nothing
// is deleted on the consumer, and once it is back every consumer object
// is copied again.
func providerCRDRecreated() scenario {
	return scenario{
		name: "provider-crd-recreated", objects: 200, lasts: 10 * time.Second, report: crdReportBound, ready: readyBound, converge: convergeBound,
		reportedBy: sample.bindingReported, dropsForeign: true,
		reportedSays: []string{"APINotExported", "not exported by Connection", "widgets.example.org"},
		inject: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			crd := widgetCRD()
			must(t, e.provider.Delete(ctx, crd))
			must(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(e.provider.Get(ctx, client.ObjectKeyFromObject(crd), crd)), nil
			}))
			return func() {
				crd := widgetCRD()
				must(t, e.provider.Create(ctx, crd))
				must(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					if err := e.provider.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
						return false, nil
					}
					for _, c := range crd.Status.Conditions {
						if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
							return true, nil
						}
					}
					return false, nil
				}))
			}
		},
	}
}
