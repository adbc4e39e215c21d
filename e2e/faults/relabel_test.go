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
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// shardGVK is the API the relabel scenario routes: served by the suite's
// provider ("east", behind the fault proxy) and by a second one
// ("relabel-west", reached directly).
var shardGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Shard"}

func shardCRD() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("shards", "shard", "Shard", "example.org", apiextensionsv1.NamespaceScoped, true)
}

// A relabel under load (issue #52, path 1): namespaces routed to east by
// ClusterBinding shards-east (namespaceSelector region=east) are moved to
// west in two steps, as an operator does it — `kubectl label ns X
// region-`, a pause, then `region=west` for ClusterBinding shards-west
// — and one is handed to a Binding waiting in it through west, while the
// consumer keeps updating every object and creating and deleting others.
// Between the steps nobody selects the objects; a deselection is acted on
// only once it persists (two binding resyncs: 30 s with the suite's
// --binding-resync, env_test.go), so every move is a move and keeps
// east's copy. Lost: an
// original object whose east copy (by UID) is gone — a deleted database.
// Every live object converges on west with its current spec.
func (e *env) relabelUnderLoad(t *testing.T) {
	ctx := context.Background()
	const namespaces, perNamespace, westConn = 6, 20, "relabel-west"
	// The operator's pause between the two steps, per namespace: from a
	// quick one to a slow one, all within the grace (2 × bindingResync:
	// the longest pause, 10 s, leaves 20 s for the two kubectl label
	// calls on a busy machine). The last namespace
	// is handed over to a waiting Binding in one step.
	pauses := []time.Duration{0, time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second}
	if grace := 2 * bindingResync; pauses[len(pauses)-1] > grace/2 {
		t.Fatalf("the longest pause %s leaves less than half the deselection grace %s for the relabels themselves", pauses[len(pauses)-1], grace)
	}
	must(t, e.provider.Create(ctx, shardCRD()))
	west := testenv.StartClusterT(t, westConn, testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{shardCRD()}})
	westClient, err := client.New(west.Config, client.Options{Scheme: e.consumer.Scheme()})
	must(t, err)
	handover := fmt.Sprintf("relabel-%d", namespaces-1)
	for i := range namespaces {
		must(t, e.consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("relabel-%d", i), Labels: map[string]string{"region": "east"}}}))
	}
	manifest := enginetest.ConnectionManifestWith(westConn, westConn, west.Kubeconfig, "  namespacedBindings: {from: All}\n") + `
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: shards-east}
spec:
  connectionRef: {name: ` + connectionName + `}
  namespaceSelector: {matchLabels: {region: east}}
  apis: [{name: shards.example.org}]
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: shards-west}
spec:
  connectionRef: {name: ` + westConn + `}
  namespaceSelector: {matchLabels: {region: west}}
  apis: [{name: shards.example.org}]
---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: shards, namespace: ` + handover + `}
spec:
  connectionRef: {name: ` + westConn + `}
  apis: [{name: shards.example.org}]
`
	file := filepath.Join(t.TempDir(), "relabel.yaml")
	must(t, os.WriteFile(file, []byte(manifest), 0o600))
	kubectl := func(args ...string) {
		t.Helper()
		if out, err := testenv.Kubectl(ctx, e.pair.KubeconfigPath, append([]string{"--context=consumer"}, args...)...); err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("apply", "-f", file)
	for _, obj := range []string{"connection/" + westConn, "clusterbinding/shards-east", "clusterbinding/shards-west"} {
		kubectl("wait", "--for=condition=Ready", obj, "--timeout=90s")
	}
	defer func() {
		// Gone before west stops (deleteAndWait).
		e.deleteAndWait(t, 2*time.Minute,
			&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: handover, Name: "shards"}},
			&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "shards-east"}},
			&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "shards-west"}},
			&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: westConn}})
	}()

	// The originals: never deleted by the consumer, only updated.
	for i := range namespaces {
		for j := range perNamespace {
			must(t, e.consumer.Create(ctx, shard(fmt.Sprintf("relabel-%d", i), fmt.Sprintf("s-%d", j), 1)))
		}
	}
	originals := map[types.NamespacedName]types.UID{}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		copies, err := shardCopies(ctx, e.provider)
		if err != nil || len(copies) != namespaces*perNamespace {
			return false, nil
		}
		for _, c := range copies {
			originals[client.ObjectKeyFromObject(&c)] = c.GetUID()
		}
		return true, nil
	}); err != nil {
		t.Fatalf("east did not copy the %d Shards: %v", namespaces*perNamespace, err)
	}

	// The load: every original updated, other Shards created and deleted,
	// in every namespace, until the relabels are done.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var writes, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var extras []types.NamespacedName
		for seq := int64(2); loadCtx.Err() == nil; seq++ {
			ns := fmt.Sprintf("relabel-%d", rand.IntN(namespaces))
			var err error
			switch k := seq % 4; {
			case k < 2:
				err = e.consumer.Patch(loadCtx, shard(ns, fmt.Sprintf("s-%d", rand.IntN(perNamespace)), seq), client.Merge)
			case k == 2:
				key := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("extra-%d", seq)}
				if err = e.consumer.Create(loadCtx, shard(key.Namespace, key.Name, seq)); err == nil {
					extras = append(extras, key)
				}
			case len(extras) > 0:
				i := rand.IntN(len(extras))
				err = client.IgnoreNotFound(e.consumer.Delete(loadCtx, shard(extras[i].Namespace, extras[i].Name, 0)))
				extras = append(extras[:i], extras[i+1:]...)
			}
			writes.Add(1)
			if err != nil && loadCtx.Err() == nil {
				failed.Add(1)
			}
			select {
			case <-loadCtx.Done():
			case <-time.After(20 * time.Millisecond): // the load's pace, about 50 writes a second
			}
		}
	}()
	defer func() {
		stopLoad()
		wg.Wait()
	}()

	// Under the load, each namespace relabelled in two steps, one after
	// the other with the operator's pause in between; the last handed to
	// its waiting Binding.
	started := time.Now()
	for i, pause := range pauses {
		ns := fmt.Sprintf("relabel-%d", i)
		kubectl("label", "ns", ns, "region-")
		select {
		case <-time.After(pause): // the operator's pause, not a wait for state
		case <-ctx.Done():
		}
		kubectl("label", "ns", ns, "region=west")
	}
	kubectl("label", "ns", handover, "region-")
	relabelled := time.Since(started)
	stopLoad()
	wg.Wait()
	done := time.Now()

	// Every live Shard converges on west with its current spec; east
	// keeps each original's copy (the same UID), no longer kbind's.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		err := shardsOnWest(ctx, e.consumer, westClient)
		if err != nil {
			last = err
		}
		return err == nil, nil
	}); err != nil {
		t.Errorf("west did not converge within 2 minutes: %v", last)
		if copies, err := shardCopies(ctx, westClient); err == nil {
			for _, c := range copies {
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(shardGVK)
				if err := e.consumer.Get(ctx, client.ObjectKeyFromObject(&c), live); err != nil || live.GetDeletionTimestamp() != nil {
					e.konnector.logObject(t, c.GetNamespace(), c.GetName())
				}
			}
		}
	}
	converged := time.Since(done)
	lost, kept := 0, 0
	for key, uid := range originals {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(shardGVK)
		switch err := e.provider.Get(ctx, key, got); {
		case err != nil || got.GetUID() != uid:
			lost++
			t.Errorf("east's copy of %s was deleted (%v): a relabel destroyed a database", key, err)
		case got.GetAnnotations()[kbindv1alpha1.MovedAnnotation] == "":
			t.Errorf("east's copy of %s was not released for the move: %v", key, got.GetAnnotations())
		default:
			kept++
		}
	}
	t.Logf("relabel under load: %d namespaces (%d moved in two steps with pauses %v, 1 handed to a waiting Binding), %d originals; "+
		"relabels took %s under %d consumer writes (%d failed); west converged %s after the last relabel; east kept %d of %d original copies, lost %d",
		namespaces, len(pauses), pauses, len(originals), relabelled.Round(100*time.Millisecond), writes.Load(), failed.Load(),
		converged.Round(100*time.Millisecond), kept, len(originals), lost)

	// Clean up: the bindings drain west; east's kept copies are no longer
	// kbind's, so the suite deletes them as their owner would.
	for _, b := range []client.Object{
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: handover, Name: "shards"}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "shards-east"}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "shards-west"}},
	} {
		must(t, client.IgnoreNotFound(e.consumer.Delete(ctx, b)))
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		copies, err := shardCopies(ctx, westClient)
		return err == nil && len(copies) == 0, nil
	}); err != nil {
		t.Errorf("west's copies were not drained: %v", err)
	}
	for i := range namespaces {
		must(t, client.IgnoreNotFound(e.provider.DeleteAllOf(ctx, shard(fmt.Sprintf("relabel-%d", i), "", 0), client.InNamespace(fmt.Sprintf("relabel-%d", i)))))
	}
}

func shard(ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(shardGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

// shardCopies lists kbind's copies of Shards on a provider.
func shardCopies(ctx context.Context, c client.Client) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shardGVK.GroupVersion().WithKind("ShardList"))
	if err := c.List(ctx, list, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// shardsOnWest reports how west differs from the consumer: every live
// Shard has exactly one kbind copy there with its spec, and nothing else.
func shardsOnWest(ctx context.Context, consumer, west client.Client) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shardGVK.GroupVersion().WithKind("ShardList"))
	if err := consumer.List(ctx, list); err != nil {
		return err
	}
	want := map[types.NamespacedName]int64{}
	for _, u := range list.Items {
		if u.GetDeletionTimestamp() == nil {
			want[client.ObjectKeyFromObject(&u)], _, _ = unstructured.NestedInt64(u.Object, "spec", "size")
		}
	}
	copies, err := shardCopies(ctx, west)
	if err != nil {
		return err
	}
	if len(copies) != len(want) {
		return fmt.Errorf("west holds %d copies, the consumer %d Shards%s", len(copies), len(want), unwanted(copies, want))
	}
	for _, c := range copies {
		size, ok := want[client.ObjectKeyFromObject(&c)]
		got, _, _ := unstructured.NestedInt64(c.Object, "spec", "size")
		if !ok || got != size {
			return fmt.Errorf("west's copy of %s/%s has size %d, want %d (live: %t)", c.GetNamespace(), c.GetName(), got, size, ok)
		}
	}
	return nil
}

// unwanted names west's copies of no live consumer Shard, with what tells
// where each came from: the consumer object it was made of (UID), when it
// was created, and whether it is being deleted or kept.
func unwanted(copies []unstructured.Unstructured, want map[types.NamespacedName]int64) string {
	var out []string
	for _, c := range copies {
		if _, ok := want[client.ObjectKeyFromObject(&c)]; ok {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s (object UID %s, created %s, deleting %t, labels %v)", c.GetNamespace(), c.GetName(),
			c.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation], c.GetCreationTimestamp().UTC().Format(time.RFC3339),
			c.GetDeletionTimestamp() != nil, c.GetLabels()))
	}
	if len(out) == 0 {
		return ""
	}
	return "; west's copies of no live Shard: " + strings.Join(out, ", ")
}
