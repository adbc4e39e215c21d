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

package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/engine/test/enginetest"
)

// Floor is what the requests and watch events the sync contract needs per
// object cost a client on this machine, with no sync logic around them:
// the konnector's CPU per object can approach it, never go below it
// (docs/bench.md "The client floor").
type Floor struct {
	// Per request or event, in CPU microseconds of the bench process.
	FinalizerPatchUs float64 `json:"finalizer_patch_us"`
	ApplyUs          float64 `json:"apply_us"`
	StatusUpdateUs   float64 `json:"status_update_us"`
	WatchEventUs     float64 `json:"watch_event_us"`
	// CPUSecondsPer1000 is one of each write and floorEvents events, per
	// 1000 objects.
	CPUSecondsPer1000 float64 `json:"cpu_seconds_per_1000"`
}

// floorEvents are the watch events the konnector receives per synced
// object: on the consumer its creation, its finalizer and its status; on
// the provider its copy's creation and status.
const floorEvents = 5

var floorGVR = schema.GroupVersionResource{Group: "floor.bench.kbind.io", Version: "v1alpha1", Resource: "floors"}

// cpuTime is the CPU (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// floorCRD is the CRD the floor's objects are of: installed on the consumer
// with the cluster, not exported, so no konnector ever binds it.
func floorCRD() *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD(floorGVR.Resource, "floor", "Floor", floorGVR.Group, apiextensionsv1.NamespaceScoped, false)
	crd.Spec.Versions[0].Name = floorGVR.Version
	return crd
}

// measureFloor makes, on the API server cfg points at, n objects of
// floorCRD (installed there) and times each kind of request the sync makes
// per object with the client the konnector uses (controller-runtime's, over the same HTTP/2 and TLS), from workers
// goroutines as its workers do: a merge patch of a finalizer (the
// consumer's hold), a server-side apply (the provider's copy), a status
// update (the status down); and a watch event, the CPU a merge patch costs
// with an informer receiving its event less the same patch without one.
// It runs before the konnector starts, while the bench is otherwise idle:
// its CPU is the requests'.
func measureFloor(ctx context.Context, cfg *rest.Config, n, workers int) (Floor, error) {
	var f Floor
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return f, err
	}
	const ns = "default"
	obj := func(name string) *unstructured.Unstructured {
		u := object(floorGVR, ns, name)
		u.SetKind("Floor")
		return u
	}
	name := func(set string, i int) string { return fmt.Sprintf("%s-%d", set, i) }
	// Not measured: the objects the finalizer and watch rounds patch.
	if _, err := perCall(n, workers, func(i int) error { return c.Create(ctx, obj(name("held", i))) }); err != nil {
		return f, err
	}
	merge := func(i int, patch string) error {
		return c.Patch(ctx, obj(name("held", i)), client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	if f.FinalizerPatchUs, err = perCall(n, workers, func(i int) error {
		return merge(i, `{"metadata":{"finalizers":["floor.bench.kbind.io/held"]}}`)
	}); err != nil {
		return f, err
	}
	applied := make([]*unstructured.Unstructured, n)
	if f.ApplyUs, err = perCall(n, workers, func(i int) error {
		applied[i] = obj(name("applied", i))
		return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied[i]), client.FieldOwner("kbind-bench"), client.ForceOwnership)
	}); err != nil {
		return f, err
	}
	// Not measured: the reads the konnector makes from its cache.
	if _, err := perCall(n, workers, func(i int) error {
		return c.Get(ctx, client.ObjectKeyFromObject(applied[i]), applied[i])
	}); err != nil {
		return f, err
	}
	if f.StatusUpdateUs, err = perCall(n, workers, func(i int) error {
		_ = unstructured.SetNestedField(applied[i].Object, "Ready", "status", "phase")
		return c.Status().Update(ctx, applied[i])
	}); err != nil {
		return f, err
	}
	plain, err := perCall(n, workers, func(i int) error { return merge(i, `{"metadata":{"annotations":{"floor":"1"}}}`) })
	if err != nil {
		return f, err
	}
	watched, err := watchedPatches(ctx, cfg, n, workers, func(i int) error { return merge(i, `{"metadata":{"annotations":{"floor":"2"}}}`) })
	if err != nil {
		return f, err
	}
	f.WatchEventUs = max(watched-plain, 0)
	f.CPUSecondsPer1000 = (f.FinalizerPatchUs + f.ApplyUs + f.StatusUpdateUs + floorEvents*f.WatchEventUs) / 1000
	// The CRD and its objects stay: deleting them would keep the API
	// server busy (the held objects' finalizers) while the runs measure.
	return f, nil
}

// watchedPatches is perCall of patch with an informer of floorGVR running,
// until the informer has received every patch's event.
func watchedPatches(ctx context.Context, cfg *rest.Config, n, workers int, patch func(int) error) (float64, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, "default", nil)
	inf := factory.ForResource(floorGVR).Informer()
	var mu sync.Mutex
	updates := 0
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {
		mu.Lock()
		updates++
		mu.Unlock()
	}}); err != nil {
		return 0, err
	}
	factory.Start(wctx.Done())
	if !toolscache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
		return 0, fmt.Errorf("the floor's informer did not sync")
	}
	start := cpuTime()
	if _, err := perCall(n, workers, patch); err != nil {
		return 0, err
	}
	err = waitFor(time.Minute, "every floor event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return updates >= n
	})
	return float64(cpuTime()-start) / float64(time.Microsecond) / float64(n), err
}

// perCall runs fn for 0..n-1 from workers goroutines and returns the
// process's CPU per call, in microseconds.
func perCall(n, workers int, fn func(int) error) (float64, error) {
	start := cpuTime()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := retryOnServerTimeout(func() error { return fn(i) }); err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(cpuTime()-start) / float64(time.Microsecond) / float64(n), nil
}
