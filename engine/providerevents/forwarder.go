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

// Package providerevents owns forwarding the provider's Events down (SYNC-E,
// docs/sync.md#provider-events): the Events a provider's controllers
// record on the provider copy of a bound object are re-emitted on the
// consumer object — the same type, reason and message, the provider named
// as the source — so that kubectl describe on the consumer shows why the
// provider's controller is unhappy. Each provider Event maps to one
// consumer Event by name, written once and then only updated when the
// provider Event happens again; the konnector reads its forwarded Events
// back from a label-selected consumer cache, so a restart writes nothing.
// Writes are rate limited per object and per konnector (Limits); what the
// limits refuse is counted (kbind_provider_events_dropped_total).
package providerevents

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/metrics"
)

// Verdict is what Resolve decides for a provider Event.
type Verdict int

// The verdicts: forward it to the consumer object returned; skip it (not
// about a copy of this consumer's, or the binding ignores Events); retry
// later (the copy or its consumer object is not in the caches yet).
const (
	Forward Verdict = iota
	Skip
	Retry
)

// maxRetries bounds the retries of an Event whose object cannot be
// resolved yet (an Event about an object deleted since is not retried
// forever).
const maxRetries = 5

// Options configure a Forwarder for one bound API of one Connection.
type Options struct {
	Connection string
	GroupKind  schema.GroupKind
	// Provider is the provider rest config for watches (no request
	// timeout); Namespace limits the watch to one provider namespace ("":
	// every namespace).
	Provider *rest.Config
	// ProviderHTTPClient carries the watch (the provider session's, so
	// that its connections go with the session); nil: one of Provider's.
	ProviderHTTPClient *http.Client
	Namespace          string
	// Consumer writes the forwarded Events; ConsumerCache reads them back
	// (it must select them by kbind's managed label, see ConfigureCache).
	Consumer      client.Client
	ConsumerCache cache.Cache
	// Resolve maps a provider Event to the consumer object it is about.
	Resolve func(ctx context.Context, e *corev1.Event) (corev1.ObjectReference, Verdict)
	Limiter *Limiter
	// Refused is called with what the provider refuses when it does not
	// let the Events be watched, and with "" once it does again.
	Refused func(refusal string)
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

// Forwarder forwards one bound API's provider Events until its context
// ends.
type Forwarder struct {
	o     Options
	inf   toolscache.SharedIndexInformer
	queue workqueue.TypedRateLimitingInterface[string]
}

func providerClient(o Options) (*kubernetes.Clientset, error) {
	if o.ProviderHTTPClient == nil {
		return kubernetes.NewForConfig(o.Provider)
	}
	return kubernetes.NewForConfigAndClient(o.Provider, o.ProviderHTTPClient)
}

// New returns a Forwarder; Run runs it.
func New(o Options) (*Forwarder, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	cs, err := providerClient(o)
	if err != nil {
		return nil, fmt.Errorf("provider Events client: %w", err)
	}
	f := &Forwarder{o: o, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "events/" + o.Connection + "/" + o.GroupKind.String()})}
	// Only this API's kind: the API server filters, so an Event storm on
	// other objects of the provider costs nothing here.
	selector := fields.OneTermEqualSelector("involvedObject.kind", o.GroupKind.Kind).String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			list, err := cs.CoreV1().Events(o.Namespace).List(ctx, opts)
			f.reportRefusal(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return cs.CoreV1().Events(o.Namespace).Watch(ctx, opts)
		},
	}
	// Both counters exist from the start, at 0: a counter born at 1 shows
	// no increase() over its first sample, so a first drop would not count
	// towards KbindProviderEventsDropped.
	metrics.ProviderEventsForwarded.WithLabelValues(o.Connection, o.GroupKind.String()).Add(0)
	metrics.ProviderEventsDropped.WithLabelValues(o.Connection, o.GroupKind.String()).Add(0)
	f.inf = toolscache.NewSharedIndexInformer(lw, &corev1.Event{}, 0, toolscache.Indexers{})
	if err := f.inf.SetTransform(cache.TransformStripManagedFields()); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *Forwarder) reportRefusal(err error) {
	if f.o.Refused == nil {
		return
	}
	switch {
	case err == nil:
		f.o.Refused("")
	case refusal.IsForbidden(err):
		where := "in every namespace"
		if f.o.Namespace != "" {
			where = "in namespace " + f.o.Namespace
		}
		f.o.Refused(fmt.Sprintf("list events %s (the provider's Events on %s copies are not forwarded: allow get, list and watch on events, or set spec.providerEvents: Ignore)", where, f.o.GroupKind.Kind))
	}
}

// Run watches the provider's Events and forwards them until ctx ends.
func (f *Forwarder) Run(ctx context.Context) {
	defer f.queue.ShutDown()
	logger := log.FromContext(ctx).WithValues("providerEvents", f.o.GroupKind.String())
	ctx = log.IntoContext(ctx, logger)
	enqueue := func(obj any) {
		if key, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil {
			f.queue.Add(key)
		}
	}
	if _, err := f.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		logger.Error(err, "Provider Events are not forwarded")
		return
	}
	go f.inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), f.inf.HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		f.queue.ShutDown()
	}()
	for f.processNext(ctx) {
	}
}

func (f *Forwarder) processNext(ctx context.Context) bool {
	key, shutdown := f.queue.Get()
	if shutdown {
		return false
	}
	defer f.queue.Done(key)
	obj, exists, err := f.inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		f.queue.Forget(key)
		return true
	}
	retry, after, err := f.forward(ctx, obj.(*corev1.Event))
	switch {
	case err != nil || retry:
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).V(1).Info("Forwarding a provider Event failed; retrying", "event", key, "error", err.Error())
		}
		if f.queue.NumRequeues(key) < maxRetries {
			f.queue.AddRateLimited(key)
		} else {
			f.queue.Forget(key)
		}
	case after > 0:
		f.queue.AddAfter(key, after)
	default:
		f.queue.Forget(key)
	}
	return true
}

// forward writes the consumer Event for the provider Event e if it is
// missing or behind. It returns retry for a later attempt with backoff,
// or after > 0 to update once the rate limit allows.
func (f *Forwarder) forward(ctx context.Context, e *corev1.Event) (retry bool, after time.Duration, err error) {
	if !Concerns(e, f.o.GroupKind) {
		return false, 0, nil
	}
	object, verdict := f.o.Resolve(ctx, e)
	switch verdict {
	case Skip:
		return false, 0, nil
	case Retry:
		return true, 0, nil
	}
	desired := Desired(e, object, f.o.Connection)
	existing := &corev1.Event{}
	if err := f.o.ConsumerCache.Get(ctx, client.ObjectKeyFromObject(desired), existing); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, 0, fmt.Errorf("reading the forwarded Event: %w", err)
		}
		existing = nil
	}
	now := f.o.Now()
	action := Decide(existing, desired, now)
	if action == ActionNone {
		return false, 0, nil
	}
	api := f.o.GroupKind.String()
	if d := f.o.Limiter.Reserve(object.UID, now); d > 0 {
		if action == ActionCreate {
			// A new Event over the limit is dropped (counted); the same
			// Event happening again is tried again then.
			metrics.ProviderEventsDropped.WithLabelValues(f.o.Connection, api).Inc()
			return false, 0, nil
		}
		// A repeat of a forwarded Event waits: the queue folds further
		// repeats into one update with the latest count.
		return false, d, nil
	}
	switch action {
	case ActionCreate:
		err = f.o.Consumer.Create(ctx, desired)
	default:
		err = f.o.Consumer.Update(ctx, Merge(existing, desired))
	}
	if err != nil {
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			// The cache is behind our own last write.
			return true, 0, nil
		}
		return false, 0, fmt.Errorf("writing Event %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	metrics.ProviderEventsForwarded.WithLabelValues(f.o.Connection, api).Inc()
	return false, 0, nil
}
