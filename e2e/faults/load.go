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
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WidgetGVK is the quickstart's API that the load writes.
var WidgetGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}

// Load writes Widgets in one namespace: the consumer creates up to N,
// then keeps updating their spec and deleting and re-creating them, while
// the provider (as the API's controller would) patches the status of the
// copies; each side writes once every Every. Errors are counted, not
// fatal: the API servers may be the fault.
// The invariants compare what exists on both sides afterwards, so the
// load needs no bookkeeping of what should exist.
type Load struct {
	Consumer, Provider client.Client
	Namespace          string
	// N is how many Widgets the consumer keeps.
	N int
	// Every is the pause between two writes.
	Every time.Duration

	mu   sync.Mutex
	live []string
	next int
	seq  atomic.Int64

	// Writes and Errors count the attempted writes and the failed ones.
	Writes, Errors atomic.Int64
}

// Widget returns an unstructured Widget ns/name with a spec size.
func Widget(ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(WidgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

// requestTimeout bounds each write, so that an API server that hangs
// (its etcd is down) slows the load without stopping it.
const requestTimeout = 5 * time.Second

// Run writes until ctx ends: the consumer's writes and the provider's
// status patches in two loops, so that one side's fault does not stop the
// other side's writes.
func (l *Load) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { l.every(ctx, l.consumerStep) })
	wg.Go(func() { l.every(ctx, l.providerStep) })
	wg.Wait()
}

func (l *Load) every(ctx context.Context, step func(context.Context)) {
	tick := time.NewTicker(l.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		step(rctx)
		cancel()
	}
}

// CreateAll creates the Widgets the load keeps up to N at once, as a
// burst (errors counted).
func (l *Load) CreateAll(ctx context.Context) {
	for l.size() < l.N && ctx.Err() == nil {
		l.create(ctx)
	}
}

func (l *Load) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.live)
}

// pick returns a random live Widget, "" when there is none.
func (l *Load) pick() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.live) == 0 {
		return "", -1
	}
	i := rand.IntN(len(l.live))
	return l.live[i], i
}

// providerStep patches the status of a provider copy, as the API's
// controller would (a copy not there yet is a failed write).
func (l *Load) providerStep(ctx context.Context) {
	name, _ := l.pick()
	if name == "" {
		return
	}
	patch := fmt.Sprintf(`{"status":{"phase":"p%d"}}`, l.seq.Add(1))
	l.write(l.Provider.Status().Patch(ctx, Widget(l.Namespace, name, 0), client.RawPatch(types.MergePatchType, []byte(patch))))
}

// consumerStep creates a Widget until there are N, then updates a spec
// (two in three) or deletes a Widget (to be replaced next step).
func (l *Load) consumerStep(ctx context.Context) {
	if l.size() < l.N {
		l.create(ctx)
		return
	}
	name, i := l.pick()
	switch r := rand.IntN(3); {
	case r < 2: // spec update
		patch := fmt.Sprintf(`{"spec":{"size":%d}}`, rand.IntN(1000))
		l.write(l.Consumer.Patch(ctx, Widget(l.Namespace, name, 0), client.RawPatch(types.MergePatchType, []byte(patch))))
	default: // delete, and create another next step
		err := client.IgnoreNotFound(l.Consumer.Delete(ctx, Widget(l.Namespace, name, 0)))
		l.write(err)
		if err == nil {
			l.mu.Lock()
			if i < len(l.live) && l.live[i] == name {
				l.live = append(l.live[:i], l.live[i+1:]...)
			}
			l.mu.Unlock()
		}
	}
}

func (l *Load) create(ctx context.Context) {
	l.mu.Lock()
	name := fmt.Sprintf("w-%05d", l.next)
	l.next++
	l.mu.Unlock()
	err := l.Consumer.Create(ctx, Widget(l.Namespace, name, 1))
	l.write(err)
	if err == nil {
		l.mu.Lock()
		l.live = append(l.live, name)
		l.mu.Unlock()
	}
}

// DeleteAll deletes every Widget of the namespace on the consumer, one
// request each, as a burst.
func (l *Load) DeleteAll(ctx context.Context) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(WidgetGVK.GroupVersion().WithKind("WidgetList"))
	if err := l.Consumer.List(ctx, list, client.InNamespace(l.Namespace)); err != nil {
		l.write(err)
		return
	}
	for i := range list.Items {
		l.write(client.IgnoreNotFound(l.Consumer.Delete(ctx, &list.Items[i], client.PropagationPolicy(metav1.DeletePropagationBackground))))
	}
	l.mu.Lock()
	l.live = nil
	l.mu.Unlock()
}

func (l *Load) write(err error) {
	l.Writes.Add(1)
	if err != nil {
		l.Errors.Add(1)
	}
}
