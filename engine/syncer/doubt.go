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
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/ownership"
)

// A write of a provider copy that failed without a clear answer is in
// doubt: the connection was reset after the request left, the client gave
// up, or the server answered that it may still be processing it. The
// server may have committed it, or may still commit it, after kbind has
// read the copy as absent, released the consumer object's finalizer (the
// object is gone) or deleted the copy. Such a late write creates a copy
// nothing owns any more: an orphan on the provider, which also blocks a
// consumer object created again under the same name (OwnedByAnother).
// Found by the fault suite's connections-reset scenario.
//
// The Syncer remembers its writes in doubt, per consumer object (key and
// UID), for DoubtHorizon. When it releases such an object under a policy
// that deletes its copy (Delete, Foreground), the copy of that object
// (its ownership markers: this cluster and that UID) is known to have no
// owner any more — until the object's copy is applied again — and if it
// appears later, the Syncer deletes it (UID precondition), under the
// policy the object was released with. Orphan releases forget the doubt:
// a copy the user asked to keep may stay.

// DoubtHorizon is how long after a write in doubt the Syncer deletes the
// copy it may create once its consumer object is released: longer than an
// API server lets a request run (its --request-timeout, 60 s by default),
// after which the server no longer commits it.
const DoubtHorizon = 5 * time.Minute

// inDoubt reports whether a failed write may have been committed anyway,
// or may still be: any failure but a refused connection (nothing was
// sent) or an answer that says the server did not and will not apply it
// (a 4xx status other than 408; 429 is answered before the request is
// processed).
func inDoubt(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusRequestTimeout || code == 0
	}
	return !utilnet.IsConnectionRefused(err)
}

// doubtKey is one consumer object: its key and UID (an object created
// again under the same key is another object).
type doubtKey struct {
	key types.NamespacedName
	uid types.UID
}

// doubt is what the Syncer remembers of a consumer object's writes in
// doubt: when the last one failed, and — once the object is released
// under a policy that deletes its copy — that policy (empty while the
// object still holds the finalizer).
type doubt struct {
	at       time.Time
	released kbindv1alpha1.DeletionPolicy
}

// doubts are a Syncer's writes in doubt (see above); the zero value is
// ready, and a nil *doubts remembers nothing (a drain's releaser).
type doubts struct {
	mu    sync.Mutex
	m     map[doubtKey]doubt
	swept time.Time
	now   func() time.Time // tests
}

func (d *doubts) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}

// wrote records a write in doubt for the consumer object key with uid.
func (d *doubts) wrote(key types.NamespacedName, uid types.UID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock()
	if d.m == nil {
		d.m = map[doubtKey]doubt{}
	}
	sweep(d.m, &d.swept, now, DoubtHorizon, func(v doubt) time.Time { return v.at })
	d.m[doubtKey{key, uid}] = doubt{at: now}
}

// sweep drops the entries of m older than horizon (at tells an entry's
// time), at most once per a tenth of it (*swept: the last sweep) — the
// memory of doubts and holds stays bounded by what happened within their
// horizon; the caller holds their lock.
func sweep[K comparable, V any](m map[K]V, swept *time.Time, now time.Time, horizon time.Duration, at func(V) time.Time) {
	if now.Sub(*swept) < horizon/10 {
		return
	}
	*swept = now
	for k, v := range m {
		if now.Sub(at(v)) > horizon {
			delete(m, k)
		}
	}
}

// released records that the finalizer of the consumer object key with uid
// was released under policy: a copy of it that appears later is deleted
// when the policy deletes copies and a write of it was in doubt; under
// Orphan the doubt is forgotten.
func (d *doubts) released(key types.NamespacedName, uid types.UID, policy kbindv1alpha1.DeletionPolicy) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := doubtKey{key, uid}
	v, ok := d.m[k]
	switch {
	case !ok:
	case policy == kbindv1alpha1.DeletionPolicyOrphan:
		delete(d.m, k)
	default:
		v.released = policy
		d.m[k] = v
	}
}

// applied records that a copy of the consumer object key with uid was
// applied: the object holds its copy again (selected again after a
// release), so a release before no longer says a copy appearing is late;
// the next release does again.
func (d *doubts) applied(key types.NamespacedName, uid types.UID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := doubtKey{key, uid}
	if v, ok := d.m[k]; ok && v.released != "" {
		v.released = ""
		d.m[k] = v
	}
}

// late returns the policy a copy of the consumer object key with uid is to
// be deleted under, when that object was released with a write in doubt
// less than DoubtHorizon ago (ok false otherwise).
func (d *doubts) late(key types.NamespacedName, uid types.UID) (kbindv1alpha1.DeletionPolicy, bool) {
	if d == nil {
		return "", false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[doubtKey{key, uid}]
	if !ok || v.released == "" || d.clock().Sub(v.at) > DoubtHorizon {
		return "", false
	}
	return v.released, true
}

// any reports whether any write is remembered in doubt: the cheap test
// before a sync looks for a late copy.
func (d *doubts) any() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.m) > 0
}

// lateCopy is whether the provider copy pobj (nil: none) of the consumer
// object key is a late write of an object released while a write of it was
// in doubt, and the policy to delete it under.
func (s *Syncer) lateCopy(key types.NamespacedName, pobj *unstructured.Unstructured) (kbindv1alpha1.DeletionPolicy, bool) {
	if pobj == nil || !pobj.GetDeletionTimestamp().IsZero() {
		return "", false
	}
	if _, kept := pobj.GetLabels()[kbindv1alpha1.KeptLabel]; kept {
		// A copy kbind kept (Orphan, deletion protection) is never late.
		return "", false
	}
	uid := types.UID(pobj.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation])
	if ownership.Classify(true, pobj.GetAnnotations(), s.target.ClusterUID, string(uid)) != ownership.Ours {
		return "", false
	}
	return s.doubts.late(key, uid)
}

// reapLate deletes, for a consumer object key that is gone (or no longer
// synced, without the finalizer), a provider copy a write in doubt created
// after the object was released (see above); anything else is left alone.
// The copy comes from the session cache: its appearance is an informer
// event, which brings the key here.
func (s *Syncer) reapLate(ctx context.Context, key types.NamespacedName) (outcome, error) {
	return s.reapLateFrom(ctx, key, s.providerGet)
}

// reapLateFrom is reapLate reading the copy with get; a failed read is an
// error, never a reason to delete.
func (s *Syncer) reapLateFrom(ctx context.Context, key types.NamespacedName,
	get func(context.Context, types.NamespacedName) (*unstructured.Unstructured, bool, error)) (outcome, error) {
	if !s.doubts.any() {
		return done, nil
	}
	pkey, err := s.target.Isolation.Object(key)
	if err != nil {
		return done, nil
	}
	pobj, exists, err := get(ctx, pkey)
	if err != nil || !exists {
		return done, err
	}
	_, err = s.deleteLate(ctx, key, pobj)
	return done, err
}

// deleteLate deletes pobj, the provider copy of the consumer object key,
// when it is a late copy (lateCopy): exactly that copy (UID precondition),
// under the policy its object was released with; deleted reports whether
// it was one. The copy's deletion event brings the key back.
func (s *Syncer) deleteLate(ctx context.Context, key types.NamespacedName, pobj *unstructured.Unstructured) (deleted bool, err error) {
	policy, late := s.lateCopy(key, pobj)
	if !late {
		return false, nil
	}
	if err := s.releaser.deleteLate(ctx, pobj, policy); err != nil {
		return false, err
	}
	return true, nil
}
