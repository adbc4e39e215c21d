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
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// gizmoGVK is the API the two-provider scenario routes: served by the
// suite's provider ("east", behind the fault proxy) and by a second one
// ("west", reached directly).
var gizmoGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Gizmo"}

func gizmoCRD() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("gizmos", "gizmo", "Gizmo", "example.org", apiextensionsv1.NamespaceScoped, true)
}

// One API from two providers, one of them unreachable
// (docs/bindings.md#one-api-several-providers): team-east's Gizmos route
// to the suite's provider behind the proxy, team-west's to a second
// provider. While east is a blackhole, west's objects keep syncing —
// created and updated, before and after east's Connection reports the
// outage — and east's wait; after the heal east's converge. Nothing is
// lost, nothing is copied to both providers, and no object changes route.
//
// West converging while east is still a blackhole is the property: east
// heals only after west has converged, so a west held up by east never
// converges, however long the wait. The wait is an eventual-consistency
// poll (westWait, generous for a busy machine) and its measured time is
// logged, not asserted.
func (e *env) twoProviders(t *testing.T) {
	ctx := context.Background()
	const n, westWait = 40, 2 * time.Minute
	must(t, e.provider.Create(ctx, gizmoCRD()))
	west := testenv.StartClusterT(t, "west", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{gizmoCRD()}})
	westClient, err := client.New(west.Config, client.Options{Scheme: e.consumer.Scheme()})
	must(t, err)
	manifest := enginetest.ConnectionManifest("west", west.Kubeconfig) + `
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: gizmos-east}
spec:
  connectionRef: {name: ` + connectionName + `}
  namespaceSelector: {matchLabels: {region: east}}
  apis: [{name: gizmos.example.org}]
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: gizmos-west}
spec:
  connectionRef: {name: west}
  namespaceSelector: {matchLabels: {region: west}}
  apis: [{name: gizmos.example.org}]
`
	file := filepath.Join(t.TempDir(), "west.yaml")
	must(t, os.WriteFile(file, []byte(manifest), 0o600))
	if out, err := testenv.Kubectl(ctx, e.pair.KubeconfigPath, "--context=consumer", "apply", "-f", file); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, obj := range []string{"connection/west", "clusterbinding/gizmos-east", "clusterbinding/gizmos-west"} {
		if out, err := testenv.Kubectl(ctx, e.pair.KubeconfigPath, "--context=consumer", "wait", "--for=condition=Ready", obj, "--timeout=90s"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	providers := map[string]client.Client{"east": e.provider, "west": westClient}
	for _, region := range []string{"east", "west"} {
		must(t, e.consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-" + region, Labels: map[string]string{"region": region}}}))
		for i := range n {
			must(t, e.consumer.Create(ctx, gizmo("team-"+region, fmt.Sprintf("g-%d", i), 1)))
		}
	}
	e.waitGizmos(t, providers, n, 1, 2*time.Minute)

	// east goes dark: every Gizmo is updated and n more are created in
	// both namespaces; west's converge within the bound meanwhile.
	must(t, e.proxy.Add(Both("blackhole", "timeout", map[string]any{"timeout": 0})...))
	healed := false
	defer func() {
		if !healed {
			e.proxy.Heal()
		}
	}()
	injected := time.Now()
	for _, region := range []string{"east", "west"} {
		for i := range 2 * n {
			obj := gizmo("team-"+region, fmt.Sprintf("g-%d", i), 2)
			if i < n {
				must(t, e.consumer.Patch(ctx, obj, client.Merge))
			} else {
				must(t, e.consumer.Create(ctx, obj))
			}
		}
	}
	if err := e.gizmosConverged(ctx, "west", westClient, 2*n, 2, westWait); err != nil {
		t.Errorf("west did not converge within %s while east was unreachable: %v", westWait, err)
	}
	westSynced := time.Since(injected)

	// Once east's Connection reports the outage (its syncers stop), every
	// Gizmo is updated again: west's still converge. The report is
	// waited for (reportBound is the scenarios' bound for it), polled
	// for three times as long: a measurement, logged.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*reportBound, true, func(ctx context.Context) (bool, error) {
		conn := &kbindv1alpha1.Connection{}
		if err := e.consumer.Get(ctx, client.ObjectKey{Name: connectionName}, conn); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionFalse(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)), nil
	}); err != nil {
		t.Fatalf("east's Connection was not reported not Ready within %s of the outage: %v", 3*reportBound, err)
	}
	reported := time.Since(injected)
	updated := time.Now()
	for _, region := range []string{"east", "west"} {
		for i := range 2 * n {
			must(t, e.consumer.Patch(ctx, gizmo("team-"+region, fmt.Sprintf("g-%d", i), 3), client.Merge))
		}
	}
	if err := e.gizmosConverged(ctx, "west", westClient, 2*n, 3, westWait); err != nil {
		t.Errorf("west did not converge within %s while east was reported unreachable: %v", westWait, err)
	}
	westSyncedReported := time.Since(updated)
	e.proxy.Heal()
	healed = true
	heal := time.Now()
	e.waitGizmos(t, providers, 2*n, 3, 2*time.Minute)
	t.Logf("two providers: west converged %s into east's outage (%d objects created or updated); east reported not Ready after %s, west converged %s after %d more updates; east converged %s after the heal",
		westSynced.Round(100*time.Millisecond), 2*n, reported.Round(100*time.Millisecond), westSyncedReported.Round(100*time.Millisecond), 2*n,
		time.Since(heal).Round(100*time.Millisecond))

	for _, cb := range []string{"gizmos-east", "gizmos-west"} {
		must(t, client.IgnoreNotFound(e.consumer.Delete(ctx, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: cb}})))
	}
	e.waitGizmos(t, providers, 0, 0, 2*time.Minute)
	// The copies are gone before the drains end (each confirms every
	// copy's absence with its provider): the bindings and west's
	// Connection are waited out before west stops (deleteAndWait).
	e.deleteAndWait(t, 2*time.Minute,
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "gizmos-east"}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "gizmos-west"}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "west"}})
}

func gizmo(ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gizmoGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

// waitGizmos waits until each provider holds exactly the copies of its
// region's n Gizmos with spec.size size (none with n 0), and never one of
// the other region's.
func (e *env) waitGizmos(t *testing.T, providers map[string]client.Client, n int, size int64, timeout time.Duration) {
	t.Helper()
	for region, c := range providers {
		if err := e.gizmosConverged(context.Background(), region, c, n, size, timeout); err != nil {
			t.Fatalf("%s: %v", region, err)
		}
	}
}

// gizmosConverged polls until the provider of region holds n kbind copies
// of Gizmos, all of team-<region>'s objects, each with spec.size size.
func (e *env) gizmosConverged(ctx context.Context, region string, c client.Client, n int, size int64, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gizmoGVK.GroupVersion().WithKind("GizmoList"))
		if last = c.List(ctx, list, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); last != nil {
			return false, nil
		}
		if len(list.Items) != n {
			last = fmt.Errorf("%d copies, want %d", len(list.Items), n)
			return false, nil
		}
		for _, u := range list.Items {
			got, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
			switch {
			case u.GetNamespace() != "team-"+region:
				return false, fmt.Errorf("a copy of another region's object: %s/%s", u.GetNamespace(), u.GetName())
			case got != size:
				last = fmt.Errorf("%s/%s has size %d, want %d", u.GetNamespace(), u.GetName(), got, size)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return err
}
