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
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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

// sprocketGVK is the API the autoBind scenario binds: exported by a
// provider of its own, bound only through the autoBind ClusterBinding.
var sprocketGVK = schema.GroupVersionKind{Group: "autobind.example.org", Version: "v1alpha1", Kind: "Sprocket"}

func sprocketCRD() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("sprockets", "sprocket", "Sprocket", sprocketGVK.Group, apiextensionsv1.NamespaceScoped, true)
}

// A provider CRD re-created under autoBind (issue #52, path 2). A second
// provider exports the Sprocket CRD; Connection "autobound" (autoBind,
// source CRD) binds it through its autoBind ClusterBinding only. With 100
// Sprockets synced and their specs updated on the consumer all along, the
// provider deletes the CRD — the API server deletes every provider object
// of it with it, the provider copies included: that is the provider's
// act, not kbind's — waits until it is gone, and 10 s later creates it
// again (an upgrade that re-installs its CRDs).
//
// Asserted: while the CRD is gone the autoBind ClusterBinding is never
// deleted nor narrowed (checked at every poll: it still lists the API)
// and reports Ready=False/APINotExported within crdReportBound; kbind's consumer CRD
// keeps its UID and every consumer object keeps its UID and is never
// deleted (0 lost consumer objects); after the re-creation, within the
// reflector's backoff (below) and convergeBound,
// every consumer object has exactly one provider copy again with its
// current spec (faults.Check: 0 lost copies, 0 duplicated, 0 orphaned)
// and the ClusterBinding is Ready. Before the fix the ClusterBinding was
// deleted when the export went, which drained the copies and deleted the
// consumer CRD with all 100 consumer objects.
func (e *env) autoBindCRDRecreated(t *testing.T) {
	ctx := context.Background()
	const (
		name, ns = "autobound", "f-autobind-crd-recreated"
		n        = 100
		lasts    = 10 * time.Second
		// While the CRD is gone, the Syncer's provider informer keeps
		// failing to list Sprockets, and client-go's reflector waits
		// between attempts with a backoff capped at 30 s and jittered by
		// up to as much again (reflector.go: defaultBackoffMax 30 s,
		// defaultBackoffJitter 1.0): its next list may come up to 60 s
		// after the re-creation. Convergence is bound by that wait plus
		// the sync's own bound.
		reflectorWait = 2 * 30 * time.Second
	)
	converge := reflectorWait + convergeBound
	other := testenv.StartClusterT(t, name, testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{sprocketCRD()}})
	pc, err := client.New(other.Config, client.Options{Scheme: e.consumer.Scheme()})
	must(t, err)
	manifest := enginetest.ConnectionManifestWith(name, name, other.Kubeconfig, "  autoBind: true\n  schema: {source: CRD}\n")
	file := filepath.Join(t.TempDir(), name+".yaml")
	must(t, os.WriteFile(file, []byte(manifest), 0o600))
	if out, err := testenv.Kubectl(ctx, e.pair.KubeconfigPath, "--context=consumer", "apply", "-f", file); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer func() {
		// The Connection's deletion deletes its autoBind ClusterBinding,
		// which drains the copies.
		must(t, client.IgnoreNotFound(e.consumer.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}})))
		must(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(e.consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.Connection{})), nil
		}))
		must(t, client.IgnoreNotFound(e.consumer.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}()
	for _, obj := range []string{"connection/" + name, "clusterbinding/" + name} {
		if out, err := testenv.Kubectl(ctx, e.pair.KubeconfigPath, "--context=consumer", "wait", "--for=condition=Ready", obj, "--timeout=90s"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	must(t, e.consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	for i := range n {
		must(t, e.consumer.Create(ctx, sprocket(ns, fmt.Sprintf("s-%d", i), 1)))
	}
	if vs := sprocketsConverged(ctx, e.consumer, pc, ns, time.Minute); len(vs) > 0 {
		t.Fatalf("not synced before the fault: %d violations, first: %v", len(vs), vs[:min(len(vs), 10)])
	}
	consumerUIDs := map[string]string{}
	objs, err := listSprockets(ctx, e.consumer, ns)
	must(t, err)
	for _, o := range objs {
		consumerUIDs[o.key()] = o.UID
	}
	crdUID := consumerCRDUID(ctx, e.consumer)

	// Specs updated on the consumer all along.
	var writes, failed atomic.Int64
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for i := 0; loadCtx.Err() == nil; i++ {
			err := e.consumer.Patch(loadCtx, sprocket(ns, fmt.Sprintf("s-%d", i%n), int64(2+i/n)), client.Merge)
			writes.Add(1)
			if err != nil && loadCtx.Err() == nil {
				failed.Add(1)
			}
			select {
			case <-loadCtx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer stopLoad()

	// The fault: the provider deletes the CRD (and its objects with it).
	injected := time.Now()
	crd := sprocketCRD()
	must(t, pc.Delete(ctx, crd))
	must(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(pc.Get(ctx, client.ObjectKeyFromObject(crd), crd)), nil
	}))
	// kept checks, at every poll, that kbind keeps what it holds.
	kept := func(ctx context.Context) error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := e.consumer.Get(ctx, client.ObjectKey{Name: name}, cb); err != nil {
			return fmt.Errorf("the autoBind ClusterBinding: %w", err)
		}
		if !cb.DeletionTimestamp.IsZero() || fmt.Sprint(cb.Spec.ConsumerNames()) != "[sprockets.autobind.example.org]" {
			return fmt.Errorf("the autoBind ClusterBinding is deleting (%v) or lists %v", !cb.DeletionTimestamp.IsZero(), cb.Spec.ConsumerNames())
		}
		if got := consumerCRDUID(ctx, e.consumer); got != crdUID {
			return fmt.Errorf("the consumer CRD is %q, was %s", got, crdUID)
		}
		return nil
	}
	var reported time.Duration
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, crdReportBound, true, func(ctx context.Context) (bool, error) {
		if err := kept(ctx); err != nil {
			return false, err
		}
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := e.consumer.Get(ctx, client.ObjectKey{Name: name}, cb); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionReady))
		return c != nil && c.Reason == string(kbindv1alpha1.ReasonAPINotExported), nil
	}); err != nil {
		t.Fatalf("the autoBind ClusterBinding did not report APINotExported within %s, or kbind dropped what it holds: %v", crdReportBound, err)
	}
	reported = time.Since(injected)
	// The CRD stays gone for lasts; kbind keeps everything meanwhile.
	deadline := injected.Add(lasts)
	for time.Now().Before(deadline) {
		must(t, kept(ctx))
		select {
		case <-time.After(200 * time.Millisecond):
		case <-loadDone:
			t.Fatal("the load ended early")
		}
	}

	// The heal: the CRD created again, established.
	crd = sprocketCRD()
	must(t, pc.Create(ctx, crd))
	must(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := pc.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}))
	healed := time.Now()
	stopLoad()
	<-loadDone

	vs := sprocketsConverged(ctx, e.consumer, pc, ns, converge+time.Minute) // beyond the bound: measured, then failed
	converged := time.Since(healed)
	must(t, kept(ctx))
	objs, err = listSprockets(ctx, e.consumer, ns)
	must(t, err)
	lostConsumer := len(consumerUIDs)
	for _, o := range objs {
		if uid, ok := consumerUIDs[o.key()]; ok && uid == o.UID && !o.Deleting {
			lostConsumer--
		}
	}
	t.Logf("autoBind, provider CRD re-created: APINotExported after %s; converged %s after the re-creation; lost consumer objects %d of %d, lost copies %d, duplicated %d, orphaned %d; consumer CRD kept; %d writes (%d failed)",
		reported.Round(100*time.Millisecond), converged.Round(100*time.Millisecond), lostConsumer, n,
		Count(vs, Lost), Count(vs, Duplicated), Count(vs, Orphaned), writes.Load(), failed.Load())
	if lostConsumer > 0 {
		t.Errorf("%d consumer object(s) lost or replaced", lostConsumer)
	}
	if len(vs) > 0 {
		t.Errorf("not converged %s after the re-creation: %d violations, first: %v", converged, len(vs), vs[:min(len(vs), 10)])
	} else if converged > converge {
		t.Errorf("converged %s after the re-creation, want within %s", converged, converge)
	}
	if out, err := testenv.Kubectl(ctx, e.pair.KubeconfigPath, "--context=consumer", "wait", "--for=condition=Ready", "clusterbinding/"+name, "--timeout=30s"); err != nil {
		t.Errorf("the autoBind ClusterBinding is not Ready again: %v: %s", err, out)
	}
}

func sprocket(ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(sprocketGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

func listSprockets(ctx context.Context, c client.Client, ns string) ([]Object, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(sprocketGVK.GroupVersion().WithKind("SprocketList"))
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := make([]Object, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, FromUnstructured(&list.Items[i]))
	}
	return out, nil
}

// sprocketsConverged polls until the Sprockets of ns hold the invariants
// (Check, no foreign object) and returns the violations left at timeout.
func sprocketsConverged(ctx context.Context, consumer, provider client.Client, ns string, timeout time.Duration) []Violation {
	var vs []Violation
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		c, err := listSprockets(ctx, consumer, ns)
		if err != nil {
			vs = []Violation{{Kind: "unreadable", Object: "consumer", Detail: err.Error()}}
			return false, nil
		}
		p, err := listSprockets(ctx, provider, ns)
		if err != nil {
			vs = []Violation{{Kind: "unreadable", Object: "provider", Detail: err.Error()}}
			return false, nil
		}
		vs = Check(c, p, nil)
		return len(vs) == 0, nil
	})
	return vs
}

// consumerCRDUID is the UID of kbind's Sprocket CRD on the consumer, ""
// when it is gone or deleting.
func consumerCRDUID(ctx context.Context, c client.Client) types.UID {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "sprockets." + sprocketGVK.Group}, crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		return ""
	}
	return crd.UID
}
