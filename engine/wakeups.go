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

package engine

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/wake"
	"github.com/kbind/kbind/engine/related"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/syncer"
)

// This file is the one place where the engine's packages signal each
// other. Each signal is a method named for what happened; its doc says who
// produces it, who consumes it, and what a missed one costs. Setup wires
// these methods, never an anonymous closure, so that "why did this binding
// react late?" is answered here.
//
// Every wake-up below has the same consumer today: the binding
// controllers of one Connection (both kinds), which re-read its bindings'
// state and reconcile (Registry.Reconcile, the related copier, status).
// They reach them through one wake.Coalescer, at most once per
// wakeInterval per Connection, so that a burst (a thousand object results)
// costs a handful of binding reconciles, not one each. A wake-up is never
// dropped while the engine runs, only merged; a missed one — a producer
// that forgot to signal — shows only as a delay until the binding resync
// (Options.BindingResync, 30 s by default), which is why each producer is
// named here.

// wakeInterval is how often, at most, one Connection's bindings are woken.
const wakeInterval = time.Second

// wakeups carries the signals between the engine's packages.
type wakeups struct {
	// bindings coalesces the wake-ups of the binding controllers, by
	// Connection name.
	bindings *wake.Coalescer
	// toBindings are the binding controllers' trigger channels (one per
	// controller: ClusterBindings, Bindings); every delivery goes to each.
	toBindings []chan event.GenericEvent
}

// bindingTriggerBuffer is each binding controller's trigger channel
// capacity: deliveries wait (merged per Connection) while it is full.
const bindingTriggerBuffer = 128

// newWakeups returns the engine's signals for n binding controllers.
func newWakeups(n int) *wakeups {
	w := &wakeups{}
	for i := 0; i < n; i++ {
		w.toBindings = append(w.toBindings, make(chan event.GenericEvent, bindingTriggerBuffer))
	}
	w.bindings = wake.NewCoalescer(wakeInterval, w.deliverToBindings)
	return w
}

// deliverToBindings hands a Connection to every binding controller, whose
// trigger source maps it to the Connection's bindings.
func (w *wakeups) deliverToBindings(ctx context.Context, connection string) {
	obj := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: connection}}
	for _, ch := range w.toBindings {
		select {
		case ch <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return
		}
	}
}

// bindingTriggers is the trigger channel of binding controller i.
func (w *wakeups) bindingTriggers(i int) <-chan event.GenericEvent { return w.toBindings[i] }

// resultsChanged: an object's sync result changed (synced, pending,
// failed, conflict) or an API's results were dropped.
// Producer: syncer.Results (NewResults), written by every Syncer.
// Consumer: the binding controllers, which report the counts and Synced.
// Missed: a binding's counts and Synced condition lag until the resync.
func (w *wakeups) resultsChanged(connection string, _ schema.GroupKind) {
	w.bindings.Wake(connection)
}

// syncerChanged: one of the Connection's Syncers has started syncing, or
// one that failed is due for its restart (its backoff ran out).
// Producer: syncer.Registry (Notify).
// Consumer: the binding controllers: Synced=True once the syncer syncs;
// Registry.Reconcile restarts a failed one.
// Missed: Synced stays False, or a failed syncer stays down, until the
// resync.
func (w *wakeups) syncerChanged(connection string) {
	w.bindings.Wake(connection)
}

// sessionChanged: the Connection's provider session was published or
// stopped (credential rotation, Ready lost or regained).
// Producer: session.Manager (Subscribe).
// Consumer: the binding controllers: Registry.Reconcile restarts the
// Connection's syncers on the new session, or stops them.
// Missed: syncers run on a stopped session (and sync nothing) until the
// resync.
func (w *wakeups) sessionChanged(connection string) {
	w.bindings.Wake(connection)
}

// relatedChanged: a related informer (a source or a copy of a
// relatedResources entry, or a bound object a reference entry reads)
// reported a change or its first complete list, or watches were freed in
// a namespace whose bindings waited for them.
// Producer: related.Copier (Options.Trigger).
// Consumer: the binding controllers, which copy related resources again.
// Missed: related copies lag until the resync (SYNC-R2 wants them driven
// by watches).
func (w *wakeups) relatedChanged(connection string) {
	w.bindings.Wake(connection)
}

// releaseOrphanedThrough is not a wake-up but the one direct call between
// the syncer and the related copier: before a Syncer releases the
// finalizer of an object deleted with the Orphan policy, the related
// copies made for it (relatedResources[].reference) are released so that
// they stay.
// Producer: syncer.Syncer (Options.ReleaseOrphaned, via the Registry).
// Consumer: related.Copier.ReleaseOrphaned.
// Missed (nil): those related copies would be deleted with their owner's
// provider copy instead of kept.
func releaseOrphanedThrough(copier *related.Copier) syncer.ReleaseOrphanedFunc {
	return func(ctx context.Context, sess *session.Session, t syncer.Target, owner *unstructured.Unstructured) (bool, error) {
		return copier.ReleaseOrphaned(ctx, sess, t.ClusterUID, t.Isolation, owner)
	}
}
