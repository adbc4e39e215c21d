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

// Package heartbeat renews one coordination.k8s.io/v1 Lease per Connection
// on the provider (HB-1), so that the provider side (the optional
// backend, or an operator) can tell live consumers from gone ones. Heartbeat
// errors never block sync: they are reported, logged at V(2) and retried.
//
// Requirement ids in comments (such as HB-1) refer to docs/requirements.md.
package heartbeat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/namespace"
	"github.com/kbind/kbind/engine/isolation"
)

const (
	// DurationSeconds is the Lease's leaseDurationSeconds.
	DurationSeconds = 60
	// Interval is how often a Lease is renewed.
	Interval = 30 * time.Second
)

// Lease identifies one Connection's heartbeat Lease.
type Lease struct {
	Namespace       string
	Name            string
	Connection      string
	LocalClusterUID string
	// Isolation is the Connection's: it marks the Lease namespace when
	// kbind creates it (the zero value: no isolation).
	Isolation isolation.Mapping
	// Info is written on the Lease with each renewal (no request of its
	// own): who renews it and with what credential.
	Info Info
	// Nonce is the konnector process's (NewNonce), written on the Lease
	// with each renewal (core.kbind.io/konnector-nonce): another value
	// found there after this process's own write is another konnector's
	// renewal (Renewer.Foreign, Judge).
	Nonce string
}

// NewNonce returns a random nonce for one konnector process (one engine):
// drawn once when it starts, so a restart, a leader failover or an
// upgrade changes the nonce on the Lease once. Not a secret.
func NewNonce() string { return rand.Text() }

// Info is what a Lease says about the konnector renewing it
// (docs/connections.md#the-heartbeat-lease); never a credential.
type Info struct {
	// KonnectorVersion and APIVersion (the core.kbind.io version served).
	KonnectorVersion, APIVersion string
	// User is the user the credential authenticates as, "" if unknown.
	User string
	// CredentialKind is a kbindv1alpha1.CredentialKind.
	CredentialKind string
	// CredentialExpiry is RFC 3339, "" when the credential does not
	// expire; Renews is true when the konnector renews it.
	CredentialExpiry string
	Renews           bool
}

// stamp writes the info's annotations, removing those without a value.
func (i Info) stamp(annotations map[string]string) {
	set := func(key, value string) {
		if value == "" {
			delete(annotations, key)
			return
		}
		annotations[key] = value
	}
	set(kbindv1alpha1.KonnectorVersionAnnotation, i.KonnectorVersion)
	set(kbindv1alpha1.APIVersionAnnotation, i.APIVersion)
	set(kbindv1alpha1.ProviderUserAnnotation, i.User)
	set(kbindv1alpha1.CredentialKindAnnotation, i.CredentialKind)
	set(kbindv1alpha1.CredentialExpiryAnnotation, i.CredentialExpiry)
	set(kbindv1alpha1.CredentialRenewsAnnotation, map[bool]string{true: "true"}[i.Renews])
}

// For returns the Lease of a Connection: name
// "<connection>-<first 10 chars of localClusterUID>" in namespace ns (the
// Connection's isolation decides it: isolation.Mapping.LeaseNamespace).
func For(connection, localClusterUID, ns string) Lease {
	uid := localClusterUID
	if len(uid) > 10 {
		uid = uid[:10]
	}
	return Lease{Namespace: ns, Name: connection + "-" + uid, Connection: connection, LocalClusterUID: localClusterUID}
}

// Error is a failed renewal, naming the refused request.
type Error struct {
	Verb, Resource string
	Err            error
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s: %v", e.Verb, e.Resource, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// HeldByAnother is a Lease of this Connection's name that exists and is
// held by someone else (its spec.holderIdentity is not this consumer
// cluster's UID): another consumer's whose name collides, or a Lease taken
// over. kbind never overwrites or deletes it.
type HeldByAnother struct {
	Namespace, Name string
	// Holder is the holderIdentity found ("" when unset); Consumer is this
	// consumer cluster's UID.
	Holder, Consumer string
}

func (e *HeldByAnother) Error() string {
	return fmt.Sprintf("the Lease exists and is held by %q, not by this consumer cluster (%s); kbind leaves it untouched", e.Holder, e.Consumer)
}

// Renewer renews one Lease. It remembers the Lease it wrote last, so a
// renewal is one update and no read (PERF: an idle Connection costs the
// provider one write per interval); it reads only when that update is
// refused as stale or the Lease is gone — someone else wrote or deleted it
// — and then checks the holder again before writing.
type Renewer struct {
	c     client.Client
	lease Lease
	last  *coordinationv1.Lease
	// reread is set when the last renewal found the Lease it wrote before
	// changed or gone and had to read it again.
	reread bool
	// foreign is set when the Lease read again carried another nonce than
	// this Renewer's (absent included): another konnector renewed it
	// after this Renewer's own write.
	foreign bool
}

// Foreign reports whether the last Renew found, on the Lease it had
// written before, another konnector's renewal: a nonce not its own
// (absent included: a konnector that writes none). The first renewal of a
// Renewer never does — what it finds was written before it started (a
// restart's, a failover's or an upgrade's predecessor) — so only a write
// that came after this process's own counts (Judge).
func (r *Renewer) Foreign() bool { return r.foreign }

// Reread reports whether the last Renew found the Lease it had written
// changed or gone: someone else wrote or deleted it — or the provider is
// not the cluster it was (a new cluster at the same address has no such
// Lease), which is why the Connection then checks the provider's identity
// again.
func (r *Renewer) Reread() bool { return r.reread }

// NewRenewer returns a Renewer of l through c.
func NewRenewer(c client.Client, l Lease) *Renewer {
	return &Renewer{c: c, lease: l}
}

// Renew creates or renews the Lease on the provider, creating its namespace
// (marked as kbind's) when it is missing.
func (r *Renewer) Renew(ctx context.Context, now time.Time) error {
	l := r.lease
	r.reread, r.foreign = false, false
	wrote := r.last != nil
	if r.last != nil {
		lease := r.last.DeepCopy()
		l.stamp(lease, now)
		err := r.c.Update(ctx, lease)
		switch {
		case err == nil:
			r.last = lease
			return nil
		case !apierrors.IsConflict(err) && !apierrors.IsNotFound(err):
			// Not stale: a transport or server error; retry the same write.
			return &Error{Verb: "update", Resource: "leases.coordination.k8s.io " + l.Namespace + "/" + l.Name, Err: err}
		}
		r.last, r.reread = nil, true
	}
	lease := &coordinationv1.Lease{}
	err := r.c.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name}}
		l.stamp(lease, now)
		err = r.c.Create(ctx, lease)
		if apierrors.IsNotFound(err) {
			if err := ensureNamespace(ctx, r.c, l); err != nil {
				return err
			}
			err = r.c.Create(ctx, lease)
		}
		if err != nil {
			return &Error{Verb: "create", Resource: "leases.coordination.k8s.io in namespace " + l.Namespace, Err: err}
		}
		r.last = lease
		return nil
	case err != nil:
		return &Error{Verb: "get", Resource: "leases.coordination.k8s.io " + l.Namespace + "/" + l.Name, Err: err}
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != l.LocalClusterUID {
		// Not this consumer's Lease (another consumer's whose name
		// collides, or someone else's object): never overwrite it.
		return &Error{Verb: "renew", Resource: "leases.coordination.k8s.io " + l.Namespace + "/" + l.Name,
			Err: &HeldByAnother{Namespace: l.Namespace, Name: l.Name, Holder: holder, Consumer: l.LocalClusterUID}}
	}
	r.foreign = wrote && lease.Annotations[kbindv1alpha1.KonnectorNonceAnnotation] != l.Nonce
	l.stamp(lease, now)
	if err := r.c.Update(ctx, lease); err != nil {
		return &Error{Verb: "update", Resource: "leases.coordination.k8s.io " + l.Namespace + "/" + l.Name, Err: err}
	}
	r.last = lease
	return nil
}

// stamp writes the Lease's markers and renewal.
func (l Lease) stamp(lease *coordinationv1.Lease, now time.Time) {
	kbindv1alpha1.LeaseMarkers(l.LocalClusterUID, l.Connection).Stamp(lease)
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	l.Info.stamp(lease.Annotations)
	if l.Nonce != "" {
		lease.Annotations[kbindv1alpha1.KonnectorNonceAnnotation] = l.Nonce
	}
	lease.Spec.HolderIdentity = ptr.To(l.LocalClusterUID)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](DurationSeconds)
	renew := metav1.NewMicroTime(now)
	if lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &renew
	}
	lease.Spec.RenewTime = &renew
}

func ensureNamespace(ctx context.Context, c client.Client, l Lease) error {
	err := namespace.CreateMarked(ctx, c, l.Namespace, l.Isolation.LeaseNamespaceMarkers(l.LocalClusterUID))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return &Error{Verb: "create", Resource: "namespaces/" + l.Namespace, Err: err}
	}
	return nil
}

// Unanswered reports whether a failed renewal timed out: the provider did
// not answer within RenewTimeout (a network partition, a frozen API
// server). An API status is an answer; a refused or reset connection is
// the network's answer, which the identity read that follows settles at
// once either way — a single reset must not mark a working provider
// unreachable.
func Unanswered(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var timeout interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &timeout) && timeout.Timeout())
}

// RenewTimeout bounds one renewal (all its requests): a quarter of the
// interval, at least 5 s (a busy provider is not a silent one), at most
// the provider request timeout. A provider that stops answering (a
// network partition, a frozen API server) is then noticed within an
// interval and a quarter, however long the connection takes to be
// declared dead.
func RenewTimeout(interval, requestTimeout time.Duration) time.Duration {
	d := max(interval/4, 5*time.Second)
	if requestTimeout > 0 {
		d = min(d, requestTimeout)
	}
	return d
}

// Run renews the Lease at once and then every interval until ctx ends,
// each renewal bounded by timeout (none when 0), calling report with each
// outcome (nil on success), whether the renewal had to read the Lease
// again (Renewer.Reread) and whether it found another konnector's renewal
// there (Renewer.Foreign).
func Run(ctx context.Context, c client.Client, l Lease, interval, timeout time.Duration, report func(err error, reread, foreign bool)) {
	logger := log.FromContext(ctx).WithValues("lease", l.Namespace+"/"+l.Name)
	renewer := NewRenewer(c, l)
	for {
		err := renew(ctx, renewer, timeout)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			logger.V(2).Info("Heartbeat renewal failed", "error", err.Error())
		}
		report(err, renewer.Reread(), renewer.Foreign())
		select {
		case <-ctx.Done():
			return
		case <-time.After(Jittered(interval, mathrand.Float64())):
		}
	}
}

// JitterFactor spreads renewals: each wait is the interval give or take
// this fraction of it. Connections started together (a konnector's start,
// a provider restart that failed every renewal at once) would otherwise
// renew in the same second for as long as they run; with it a thousand
// Connections of a 30 s interval renew about 33 times a second rather
// than a thousand times every 30 s. The mean wait stays the interval, so
// an idle Connection's request rate does not change, and the longest wait
// (1.1 × 30 s) stays well inside DurationSeconds.
const JitterFactor = 0.1

// Jittered is the wait before the next renewal for r drawn uniformly from
// [0, 1): interval × (1 − JitterFactor + 2·JitterFactor·r).
func Jittered(interval time.Duration, r float64) time.Duration {
	return time.Duration(float64(interval) * (1 - JitterFactor + 2*JitterFactor*r))
}

func renew(ctx context.Context, r *Renewer, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return r.Renew(ctx, time.Now())
}

// Delete removes the Lease (a Connection deleted on purpose is not a stale
// consumer). A Lease already gone is not an error; one that is no longer
// ours (another holder) is left alone. It deletes exactly the Lease it
// read (UID and resourceVersion preconditions) and, when that changed
// meanwhile, reads it again and tries again (retry.DefaultRetry: 5 tries):
// the last renewal before the heartbeat stopped may land after the read —
// a renewal cancelled or timed out on the client may still be committed
// by the server (a write in doubt).
func Delete(ctx context.Context, c client.Client, l Lease) error {
	resource := "leases.coordination.k8s.io " + l.Namespace + "/" + l.Name
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return &Error{Verb: "get", Resource: resource, Err: err}
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.LocalClusterUID {
			return nil
		}
		err := c.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return &Error{Verb: "delete", Resource: resource, Err: err}
		}
		return nil
	})
}
