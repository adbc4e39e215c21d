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
	"sync"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// plainCRD and scalableCRD are the provider CRDs of the subresource edge
// cases: plains have no status subresource, scalables have a scale
// subresource. Each test creates its own (providerAPI).
func plainCRD() *apiextensionsv1.CustomResourceDefinition {
	plain := enginetest.CRD("plains", "plain", "Plain", "plain.example.org", apiextensionsv1.NamespaceScoped, true)
	plain.Spec.Versions[0].Subresources = nil
	return plain
}

func scalableCRD() *apiextensionsv1.CustomResourceDefinition {
	scalable := enginetest.CRD("scalables", "scalable", "Scalable", "scalable.example.org", apiextensionsv1.NamespaceScoped, true)
	selector := ".status.selector"
	scalable.Spec.Versions[0].Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{
		SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: &selector,
	}
	return scalable
}

// The edge-case tests run one at a time, before TestIdleWritesNothing,
// which checks that their objects are not written while idle either.
var (
	edgeMu   sync.Mutex
	edgeAPIs []schema.GroupVersionKind
)

func idleToo(gvk schema.GroupVersionKind) {
	edgeMu.Lock()
	defer edgeMu.Unlock()
	edgeAPIs = append(edgeAPIs, gvk)
}

func edgeGVKs() []schema.GroupVersionKind {
	edgeMu.Lock()
	defer edgeMu.Unlock()
	return append([]schema.GroupVersionKind(nil), edgeAPIs...)
}

// waitConsumer waits until the consumer object passes check.
func waitConsumer(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, check func(*unstructured.Unstructured) error) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("consumer %s %s/%s", gvk.Kind, namespace, name), func() error {
		u, ok := get(t, env.Consumer, gvk, namespace, name)
		if !ok {
			return fmt.Errorf("absent")
		}
		return check(u)
	})
}

// fieldIs checks a nested field of an object against want (fmt.Sprint).
func fieldIs(want any, fields ...string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%v is %v, want %v", fields, got, want)
		}
		return nil
	}
}

// An API without a status subresource: spec goes up, and the status the
// provider's controller writes (through the object itself, there being no
// status subresource) comes down the same way; a consumer edit meanwhile
// goes up and keeps that status.
func TestWithoutStatusSubresource(t *testing.T) {
	useEnv(t)
	ns := unique("edge-plain")
	ctx := context.Background()
	plainGVK, plains := providerAPI(t, plainCRD())
	idleToo(plainGVK)
	bindCluster(t, plains, "provider", plains)
	create(t, env.Consumer, object(plainGVK, ns, "p1", map[string]any{"size": int64(1)}))
	pcopy := waitCopy(t, plainGVK, ns, "p1", fieldIs(1, "spec", "size"))

	pcopy.Object["status"] = map[string]any{"phase": "Ready"}
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	waitConsumer(t, plainGVK, ns, "p1", fieldIs("Ready", "status", "phase"))

	enginetest.Eventually(t, "a spec edit on the consumer", func() error {
		u, _ := get(t, env.Consumer, plainGVK, ns, "p1")
		u.Object["spec"] = map[string]any{"size": int64(2)}
		return env.Consumer.Update(ctx, u)
	})
	waitCopy(t, plainGVK, ns, "p1", func(u *unstructured.Unstructured) error {
		if err := fieldIs(2, "spec", "size")(u); err != nil {
			return err
		}
		// kbind's apply carries spec only: the controller's status stays.
		return fieldIs("Ready", "status", "phase")(u)
	})
	waitConsumer(t, plainGVK, ns, "p1", fieldIs("Ready", "status", "phase"))

	// Another one stays, with its status, for TestIdleWritesNothing: the
	// status written without a subresource is not written again and again.
	create(t, env.Consumer, object(plainGVK, ns, "p2", map[string]any{"size": int64(1)}))
	kept := waitCopy(t, plainGVK, ns, "p2", nil)
	kept.Object["status"] = map[string]any{"phase": "Ready", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	if err := env.Provider.Update(ctx, kept); err != nil {
		t.Fatal(err)
	}
	waitConsumer(t, plainGVK, ns, "p2", fieldIs("Ready", "status", "phase"))

	// Deletion still goes through the provider copy.
	u, _ := get(t, env.Consumer, plainGVK, ns, "p1")
	if err := env.Consumer.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Provider, plainGVK, ns, "p1")
	waitGone(t, env.Consumer, plainGVK, ns, "p1")
}

// scaleOf reads the consumer object's scale subresource (autoscaling/v1
// Scale, unstructured: the client reads unstructured objects' subresources
// as unstructured).
func scaleOf(gvk schema.GroupVersionKind, namespace, name string) (obj, scale *unstructured.Unstructured, err error) {
	obj = &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	scale = &unstructured.Unstructured{}
	scale.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	err = env.Consumer.SubResource("scale").Get(context.Background(), obj, scale)
	return obj, scale, err
}

// scaleTo does what kubectl scale does: read the scale subresource and
// write it back with the new replica count.
func scaleTo(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, replicas int64) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("scaling %s/%s to %d", namespace, name, replicas), func() error {
		obj, scale, err := scaleOf(gvk, namespace, name)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(scale.Object, replicas, "spec", "replicas"); err != nil {
			return err
		}
		return env.Consumer.SubResource("scale").Update(context.Background(), obj, client.WithSubResourceBody(scale))
	})
}

// An API with a scale subresource: the consumer CRD has it, kubectl scale
// on the consumer works, the replicas go up as spec, and the replicas and
// selector the provider's controller reports come back through the
// consumer's scale subresource.
func TestScaleSubresource(t *testing.T) {
	useEnv(t)
	ns := unique("edge-scale")
	ctx := context.Background()
	scalableGVK, scalables := providerAPI(t, scalableCRD())
	idleToo(scalableGVK)
	bindCluster(t, scalables, "provider", scalables)
	create(t, env.Consumer, object(scalableGVK, ns, "s1", map[string]any{"replicas": int64(1)}))
	waitCopy(t, scalableGVK, ns, "s1", fieldIs(1, "spec", "replicas"))

	scaleTo(t, scalableGVK, ns, "s1", 3)
	pcopy := waitCopy(t, scalableGVK, ns, "s1", fieldIs(3, "spec", "replicas"))

	pcopy.Object["status"] = map[string]any{"replicas": int64(3), "selector": "app=s1"}
	if err := env.Provider.Status().Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the provider's replicas in the consumer's scale subresource", func() error {
		_, scale, err := scaleOf(scalableGVK, ns, "s1")
		if err != nil {
			return err
		}
		for _, check := range []func(*unstructured.Unstructured) error{
			fieldIs(3, "spec", "replicas"), fieldIs(3, "status", "replicas"), fieldIs("app=s1", "status", "selector"),
		} {
			if err := check(scale); err != nil {
				return fmt.Errorf("scale %v: %w", scale.Object, err)
			}
		}
		return nil
	})

	// Scaling again, after status came down, goes up again.
	scaleTo(t, scalableGVK, ns, "s1", 5)
	waitCopy(t, scalableGVK, ns, "s1", fieldIs(5, "spec", "replicas"))
	waitConsumer(t, scalableGVK, ns, "s1", fieldIs(3, "status", "replicas"))
}

// A cluster-scoped API: spec up, status down, edits, instance counts on the
// ClusterBinding and deletion behind the finalizer, with no namespace
// anywhere.
func TestClusterScopedRoundTrip(t *testing.T) {
	parallelEnv(t)
	name := unique("round-trip")
	ctx := context.Background()
	create(t, env.Consumer, object(clusterGVK, "", name, map[string]any{"region": "eu"}))
	pcopy := waitCopy(t, clusterGVK, "", name, fieldIs("eu", "spec", "region"))
	if pcopy.GetNamespace() != "" {
		t.Errorf("the provider copy of a cluster-scoped object is in namespace %q", pcopy.GetNamespace())
	}
	if pcopy.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] != clusterUID(t) {
		t.Errorf("provider copy labels %v", pcopy.GetLabels())
	}

	pcopy.Object["status"] = map[string]any{"phase": "Ready"}
	if err := env.Provider.Status().Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	waitConsumer(t, clusterGVK, "", name, fieldIs("Ready", "status", "phase"))

	enginetest.Eventually(t, "a spec edit on the consumer", func() error {
		u, _ := get(t, env.Consumer, clusterGVK, "", name)
		u.Object["spec"] = map[string]any{"region": "us"}
		return env.Consumer.Update(ctx, u)
	})
	waitCopy(t, clusterGVK, "", name, fieldIs("us", "spec", "region"))

	enginetest.Eventually(t, "cluster-scoped instances counted on the ClusterBinding", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "widgets"}, cb); err != nil {
			return err
		}
		for _, b := range cb.Status.BoundAPIs {
			if b.Name == "clusterwidgets.example.org" && b.Instances != nil && b.Instances.Synced >= 1 && b.Instances.Synced == b.Instances.Total {
				return nil
			}
		}
		return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	})

	u, _ := get(t, env.Consumer, clusterGVK, "", name)
	if err := env.Consumer.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Provider, clusterGVK, "", name)
	waitGone(t, env.Consumer, clusterGVK, "", name)
}
