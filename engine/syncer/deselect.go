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

// This file decides what becomes of a synced object its binding's filters
// no longer select (issue #52): a deselection is acted on only when it
// persists on freshly computed claims. A namespace relabelled in two steps
// (its ClusterBinding's label removed, then another binding's set), or
// handed from a ClusterBinding to a Binding waiting in it, is unselected
// for a while — by claims computed before the label change (the syncer
// hears of a namespace's labels before the bindings recompute their
// claims) or truly, between the two steps. Released at once, its provider
// copy would be deleted under the default policy, where the move that
// follows would have kept it: a relabel never destroys a database.

package syncer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultDeselectionGrace is how long a deselection must persist before
// it is acted on, for a Syncer whose Options name none; the engine gives
// two binding resync intervals (engine.Options.BindingResync, 30 s by
// default), so that every binding has recomputed its claims at least once
// in it.
const DefaultDeselectionGrace = time.Minute

// Selection is what becomes of a consumer object that holds the syncer
// finalizer, given its binding's filters and the other routes' claims.
type Selection string

const (
	// SelectionSync means the binding selects the object: it syncs, and a
	// deselection seen before is forgotten.
	SelectionSync Selection = "Sync"
	// SelectionMove means another Connection's binding claims the object:
	// the copy this route made is released for the move (DecideMove),
	// at any time before a release — a move explains a deselection.
	SelectionMove Selection = "Move"
	// SelectionWait means the object is not selected, but not yet for
	// the grace on claims computed since: its copy and its finalizer are
	// kept, nothing is written, and it is looked at again.
	SelectionWait Selection = "Wait"
	// SelectionRelease means the deselection persisted: the object is
	// released like a deleting one (releaseDeleting), under its deletion
	// policy.
	SelectionRelease Selection = "Release"
)

// DecideSelection decides for an object that holds the syncer finalizer:
// selected by its binding's filters, claimed by another Connection's
// binding (elsewhere, "" for none), being deleted (deleting), first seen
// unselected at since (zero: not before now), with claims computed from
// claimsAt on (when the scope in effect began to be computed), at now,
// with grace the time a deselection must persist. A deselection is
// released only once it has held for grace since it was first seen AND
// the claims in effect were computed after that — never on claims that
// may predate the change that caused it. An object being deleted is
// released at once: its deletion is the user's own act. For Wait, after
// is when to look again.
func DecideSelection(selected bool, elsewhere string, deleting bool, since, claimsAt, now time.Time, grace time.Duration) (decision Selection, after time.Duration) {
	switch {
	case selected:
		return SelectionSync, 0
	case elsewhere != "":
		return SelectionMove, 0
	case deleting:
		return SelectionRelease, 0
	case since.IsZero():
		return SelectionWait, grace
	}
	if held := now.Sub(since); held < grace {
		return SelectionWait, grace - held
	}
	if !claimsAt.After(since) {
		// The claims in effect may predate the change: wait for the
		// bindings' next recompute (every binding resync, at least).
		return SelectionWait, max(grace/4, 100*time.Millisecond)
	}
	return SelectionRelease, 0
}

// deselection is when a consumer object (by UID) was first seen holding
// the syncer finalizer but no longer selected.
type deselection struct {
	uid   types.UID
	since time.Time
}

// deselections are the Syncer's deselections waiting to persist, by
// consumer key. The memory does not survive a konnector restart: the
// grace then starts again, which only keeps a copy longer.
type deselections struct{ m sync.Map } // types.NamespacedName → deselection

// since returns when object uid of key was first seen unselected, and
// records now when it was not.
func (d *deselections) since(key types.NamespacedName, uid types.UID, now time.Time) time.Time {
	if v, ok := d.m.Load(key); ok && v.(deselection).uid == uid {
		return v.(deselection).since
	}
	d.m.Store(key, deselection{uid: uid, since: now})
	return time.Time{}
}

// forget drops the deselection of key: selected again, moved, released or
// gone.
func (d *deselections) forget(key types.NamespacedName) { d.m.Delete(key) }

// decideSelection applies DecideSelection to the object o read and the
// Syncer's memory and scope; a Wait is recorded as a pending result and
// the key looked at again after the wait.
func (s *Syncer) decideSelection(ctx context.Context, o *objectSync, selected bool, elsewhere string) Selection {
	now := time.Now()
	var since time.Time
	if !selected && elsewhere == "" {
		since = s.deselected.since(o.key, o.cobj.GetUID(), now)
	}
	decision, after := DecideSelection(selected, elsewhere, !o.cobj.GetDeletionTimestamp().IsZero(), since, s.scopeComputedAt(), now, s.deselectionGrace)
	switch decision {
	case SelectionWait:
		if since.IsZero() {
			log.FromContext(ctx).Info("No longer selected by its binding: the provider copy is kept while the deselection has not persisted",
				"grace", s.deselectionGrace.String())
		}
		fate := "its provider copy is released under its deletion policy"
		if o.policy.KeptBy != "" {
			fate = "it is released and its provider copy kept (" + o.policy.KeptBy + " has spec.deletionProtection)"
		}
		s.results.set(s.target, o.key, Result{State: StatePending, Message: fmt.Sprintf(
			"no longer selected by its binding's filters: %s once that has held for %s "+
				"on freshly computed claims, unless it is selected again or another binding claims it (a move keeps the copy)", fate, s.deselectionGrace)})
		s.queue.AddAfter(o.key, after)
	default:
		s.deselected.forget(o.key)
	}
	return decision
}
