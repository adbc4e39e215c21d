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

package related

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/goroutines"
)

// side is a cluster: the consumer or the provider.
type side int

const (
	consumerSide side = iota
	providerSide
)

func (s side) String() string {
	if s == providerSide {
		return "provider"
	}
	return "consumer"
}

// key identifies an informer within a pool: one resource, one namespace
// ("" is every namespace), one server-side label and field selector.
type key struct {
	resource  kbindv1alpha1.RelatedResourceKind
	namespace string
	labels    string
	fields    string
}

func (k key) String() string {
	var sel []string
	for _, s := range []string{k.labels, k.fields} {
		if s != "" {
			sel = append(sel, s)
		}
	}
	ns := k.namespace
	if ns == "" {
		ns = "*"
	}
	return fmt.Sprintf("%s in %s [%s]", k.resource, ns, strings.Join(sel, "; "))
}

// pool holds the informers of one cluster: the consumer's live as long as
// the Copier, a provider's as long as its session (at most the Copier).
type pool struct {
	side side
	cs   kubernetes.Interface
	ctx  context.Context
	// goroutines runs the informers (the Copier's, which it waits for when
	// it stops).
	goroutines *goroutines.Group
	// informers is guarded by Copier.mu.
	informers map[key]*informer
}

// ref names an informer a binding holds.
type ref struct {
	pool *pool
	key  key
}

// informer is a shared, reference-counted informer and the outcome of its
// last list or watch request.
type informer struct {
	key    key
	inf    toolscache.SharedIndexInformer
	ctx    context.Context
	cancel context.CancelFunc
	// users maps the UIDs of the bindings that hold it to their Connection
	// (guarded by Copier.mu).
	users map[string]string

	mu  sync.Mutex
	err error
}

// record keeps the outcome of a list or watch request: a success clears an
// earlier error.
func (i *informer) record(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // stopping
	}
	i.mu.Lock()
	i.err = err
	i.mu.Unlock()
}

func (i *informer) state() (synced bool, err error) {
	if i.ctx.Err() != nil {
		return false, errStopped
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.inf.HasSynced(), i.err
}

// errStopped is the state of an informer whose pool stopped while it was
// in use: its provider session ended (or the Copier stopped, at shutdown,
// when nothing reads it any more).
var errStopped = errors.New("stopped (the provider session ended)")

// ErrNotReadYet is the state of an informer whose first list has not
// completed yet: nothing it would hold is known, and nothing is decided
// from it (Cleanup returns it wrapped while the copies are being listed).
var ErrNotReadYet = errors.New("not read yet (the first list has not completed)")

// readable decides whether what an informer holds may be acted on: only
// after a complete first list, and not while the API server refuses it (a
// refused read is reported and never shrinks what exists).
func readable(synced bool, err error) error {
	switch {
	case err != nil && isForbidden(err):
		return err
	case synced:
		return nil
	case err != nil:
		return err
	}
	return ErrNotReadYet
}

// bindingIndex indexes copies by the UID of the binding that made them.
const bindingIndex = "related-binding"

func byBinding(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	owner := m.GetAnnotations()[kbindv1alpha1.RelatedBindingAnnotation]
	if uid, _, ok := strings.Cut(owner, "/"); ok && uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// newInformer starts an informer for k in p; its events and its first sync
// call fire, which re-queues the bindings that use it.
func newInformer(p *pool, k key, transform toolscache.TransformFunc, fire func(*informer)) *informer {
	ctx, cancel := context.WithCancel(p.ctx)
	i := &informer{key: k, ctx: ctx, cancel: cancel, users: map[string]string{}}
	opts := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector, o.FieldSelector = k.labels, k.fields
		return o
	}
	var example runtime.Object
	var lw *toolscache.ListWatch
	if k.resource == kbindv1alpha1.RelatedResourceSecrets {
		example, lw = &corev1.Secret{}, listWatch(p.cs.CoreV1().Secrets(k.namespace), opts, i.record)
	} else {
		example, lw = &corev1.ConfigMap{}, listWatch(p.cs.CoreV1().ConfigMaps(k.namespace), opts, i.record)
	}
	i.inf = toolscache.NewSharedIndexInformerWithOptions(toolscache.ToListWatcherWithWatchListSemantics(lw, p.cs), example, toolscache.SharedIndexInformerOptions{
		Indexers:          toolscache.Indexers{bindingIndex: byBinding},
		ObjectDescription: fmt.Sprintf("related %s (%s side)", k, p.side),
	})
	logger := log.FromContext(p.ctx).WithValues("side", p.side.String(), "informer", k.String())
	_ = i.inf.SetTransform(transform)
	_ = i.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		if ctx.Err() == nil {
			logger.V(1).Info("Related informer: list or watch failed; retrying", "error", err.Error())
		}
	})
	handler := func() { fire(i) }
	_, _ = i.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { handler() },
		UpdateFunc: func(any, any) { handler() },
		DeleteFunc: func(any) { handler() },
	})
	// Once the Copier stops these do not start: the informer reads as
	// stopped (its context is done), never as listed.
	p.goroutines.Go(func() { i.inf.RunWithContext(ctx) })
	p.goroutines.Go(func() {
		if toolscache.WaitForCacheSync(ctx.Done(), i.inf.HasSynced) {
			handler()
		}
	})
	logger.V(1).Info("Started a related informer")
	return i
}

// lister is what listWatch needs of a typed client (Secrets or ConfigMaps).
type lister[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// listWatch lists and watches through c with the informer's selectors
// (opts), recording each request's outcome.
func listWatch[L runtime.Object](c lister[L], opts func(metav1.ListOptions) metav1.ListOptions, record func(context.Context, error)) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := c.List(ctx, opts(o))
			record(ctx, err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := c.Watch(ctx, opts(o))
			record(ctx, err)
			return w, err
		},
	}
}

// stripTransform drops what kbind never needs from cached objects: managed
// fields and kubectl's last-applied-configuration (which holds the whole
// object, Secret data included); in namespaces kbind never copies from,
// the payload too (such sources are only reported).
func stripTransform(denied map[string]bool) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return obj, nil // a tombstone: nothing to strip
		}
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				m.SetAnnotations(a)
			}
		}
		if denied[m.GetNamespace()] {
			switch o := obj.(type) {
			case *corev1.Secret:
				o.Data, o.StringData = nil, nil
			case *corev1.ConfigMap:
				o.Data, o.BinaryData = nil, nil
			}
		}
		return obj, nil
	}
}

// objects returns what an informer holds, optionally only the copies of
// one binding.
func (i *informer) objects(bindingUID string) []client.Object {
	var items []any
	if bindingUID == "" {
		items = i.inf.GetStore().List()
	} else {
		items, _ = i.inf.GetIndexer().ByIndex(bindingIndex, bindingUID)
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out
}

// get returns the cached object namespace/name, if any. Callers must not
// modify it.
func (i *informer) get(namespace, name string) (client.Object, bool) {
	item, ok, err := i.inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	o, ok := item.(client.Object)
	return o, ok
}
