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

package syncer

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/ownership"
)

// A consumer object can vanish with kbind's finalizer on it. The API
// server decides that a DELETE removes an object at once (it has no
// finalizers) before it deletes it; a finalizer added in between, by a
// write the API server answers with success, is then deleted with the
// object (kubernetes/kubernetes#77988, open). kbind adds its finalizer
// (holdFinalizer) and applies the provider copy right after: an object
// created and deleted within moments leaves that copy behind, an orphan
// nothing owns, which also blocks an object created again under the same
// name. The fault suite found it (a few in a thousand such objects, under
// load; one in fifteen when an object is deleted the moment it is
// created).
//
// The Syncer remembers, per consumer object (key and UID), that it added
// the finalizer, for HoldHorizon. It forgets once it sees the object being
// deleted (a deletionTimestamp: the finalizer held, and the release
// decides) or releases the finalizer. An object gone from the cache while
// remembered vanished with the finalizer: its provider copy — this
// cluster's and that object's markers, not kept, not terminating — is
// deleted under the object's deletion policy (releaser.deleteVanished).

// HoldHorizon is how long after kbind added its finalizer to an object a
// vanishing of that object is taken for the API server's race: longer than
// the API server lets a DELETE run (its --request-timeout, 60 s by
// default), after which the race is over.
const HoldHorizon = 5 * time.Minute

// hold is a finalizer the Syncer added: to which object (UID), when, and
// the deletion policy the object had (deletionPolicyOf: known false for an
// annotation that names no policy).
type hold struct {
	uid    types.UID
	at     time.Time
	policy kbindv1alpha1.DeletionPolicy
	known  bool
}

// holds are the finalizers a Syncer added and has not seen held yet (see
// above); the zero value is ready, and a nil *holds remembers nothing (a
// drain's releaser).
type holds struct {
	mu    sync.Mutex
	m     map[types.NamespacedName]hold
	swept time.Time
	now   func() time.Time // tests
}

func (h *holds) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// added records that the Syncer added its finalizer to the consumer object
// key with uid, whose deletion policy is policy (known: it names one).
func (h *holds) added(key types.NamespacedName, uid types.UID, policy kbindv1alpha1.DeletionPolicy, known bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock()
	if h.m == nil {
		h.m = map[types.NamespacedName]hold{}
	}
	sweep(h.m, &h.swept, now, HoldHorizon, func(v hold) time.Time { return v.at })
	h.m[key] = hold{uid: uid, at: now, policy: policy, known: known}
}

// held forgets key: its object was seen being deleted, or its finalizer
// was released, handed over or is otherwise accounted for.
func (h *holds) held(key types.NamespacedName) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, key)
}

// vanished returns the finalizer the Syncer added to the object at key
// less than HoldHorizon ago, if it remembers one.
func (h *holds) vanished(key types.NamespacedName) (hold, bool) {
	if h == nil {
		return hold{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[key]
	if !ok || h.clock().Sub(v.at) > HoldHorizon {
		return hold{}, false
	}
	return v, true
}

// vanishedAction is what becomes of the provider copy of an object that
// vanished with kbind's finalizer on it (decideVanished).
type vanishedAction int

const (
	// vanishedNothing: no copy of that object of kbind's to act on.
	vanishedNothing vanishedAction = iota
	// vanishedKeep: the object's deletion policy keeps its copy (Orphan),
	// or names no policy (never guessed): the copy stays.
	vanishedKeep
	// vanishedDelete: the copy is deleted under the object's policy.
	vanishedDelete
)

// decideVanished decides for the provider copy pobj (nil: none) of an
// object that vanished while the Syncer held h, its finalizer: only this
// consumer cluster's copy of exactly that object (clusterUID, h.uid), not
// being deleted and not kept (core.kbind.io/kept: a copy kbind kept on
// purpose), is acted on, under the policy the object had.
func decideVanished(pobj *unstructured.Unstructured, clusterUID string, h hold) vanishedAction {
	if pobj == nil || !pobj.GetDeletionTimestamp().IsZero() {
		return vanishedNothing
	}
	if _, kept := pobj.GetLabels()[kbindv1alpha1.KeptLabel]; kept {
		return vanishedNothing
	}
	if ownership.Classify(true, pobj.GetAnnotations(), clusterUID, string(h.uid)) != ownership.Ours {
		return vanishedNothing
	}
	if !h.known || h.policy == kbindv1alpha1.DeletionPolicyOrphan {
		return vanishedKeep
	}
	return vanishedDelete
}

// reapVanished deletes, for a consumer object key gone from the cache, the
// provider copy it left when it vanished with the finalizer the Syncer
// had just added (see above). The copy comes from the session cache: one
// applied a moment ago that the cache has not seen yet comes with its
// informer event, which brings the key back here. A failed read is an
// error, never a reason to delete.
func (s *Syncer) reapVanished(ctx context.Context, key types.NamespacedName) error {
	h, ok := s.holds.vanished(key)
	if !ok {
		return nil
	}
	pkey, err := s.target.Isolation.Object(key)
	if err != nil {
		s.holds.held(key)
		return nil
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	if err != nil || !exists {
		return err
	}
	switch decideVanished(pobj, s.target.ClusterUID, h) {
	case vanishedDelete:
		if err := s.releaser.deleteVanished(ctx, pobj, h.policy); err != nil {
			return err
		}
	case vanishedKeep:
		log.FromContext(ctx).Info("A consumer object vanished with kbind's finalizer on it (the API server's race, kubernetes/kubernetes#77988); its deletion policy keeps its provider copy",
			"copy", pkey.String(), "objectUID", string(h.uid), "deletionPolicy", string(h.policy))
	}
	s.holds.held(key)
	return nil
}
