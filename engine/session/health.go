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

package session

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

// Connection health (cluster-api's ClusterCache is the model): the
// Manager owns what is known of each Connection's provider between
// reconciles — the last identity probe and discovery pass, the heartbeat
// that renews its Lease and that heartbeat's last result, the watch of the
// exported CRDs and when it last announced a change. The Connection
// reconciler reads it (Health), records the probes it makes (RecordProbe),
// starts and stops the heartbeat and the watch through the Manager, and is
// woken through one channel (HealthChanges) when something it reads
// changed; it keeps none of this itself.

// Health is a read-only snapshot of one Connection's provider-side state.
type Health struct {
	// Probe is the last identity read and discovery pass (RecordProbe);
	// the zero Probe when none was made.
	Probe Probe
	// Heartbeat is the Lease renewal; Running is false when none runs.
	Heartbeat Heartbeat
	// ExportsChangedAt is when the watch of the exported CRDs last
	// announced a change (zero: never): a discovery pass older than it is
	// stale.
	ExportsChangedAt time.Time
}

// Probe is the outcome of the last identity read (At) and discovery pass
// (DiscoveredAt) of a Connection, remembered so that reconciles triggered
// by unrelated events do not hit the provider.
type Probe struct {
	// Hash identifies the kubeconfig the identity was read with.
	Hash string
	// At is when the identity was read (or the heartbeat's silence was
	// taken for its answer: Unanswered).
	At time.Time
	// RemoteUID is the provider's cluster identity, IdentityErr why it
	// could not be read.
	RemoteUID   string
	IdentityErr error
	// Unanswered: IdentityErr is the heartbeat's renewal that got no
	// answer, not an identity read.
	Unanswered bool
	// DiscoveredAt is when the exports were last discovered, Discovery and
	// DiscoveryErr that pass's outcome.
	DiscoveredAt time.Time
	Discovery    *kbindschema.Result
	DiscoveryErr error
}

// Heartbeat is the state of one Connection's Lease renewal.
type Heartbeat struct {
	// Running: a renewal loop runs (RunHeartbeat until StopHeartbeat).
	Running bool
	// Lease is the Lease renewed, every Interval.
	Lease    heartbeat.Lease
	Interval time.Duration
	// Known is false before the first renewal reported; Err is the last
	// renewal's error, nil on success.
	Known bool
	Err   error
	// LastRenewal is when a renewal last succeeded (zero: never).
	LastRenewal time.Time
	// Started is when the renewal loop started (kept when it moves).
	Started time.Time
	// RecheckAt is when the heartbeat last failed anew or found its Lease
	// changed or gone: the provider's identity is read again after it.
	RecheckAt time.Time
	// UnansweredAt is when a renewal last timed out (heartbeat.Unanswered).
	UnansweredAt time.Time
	// Sightings are the last two times renewals found another konnector's
	// renewal on the Lease (heartbeat.Renewer.Foreign), the later last;
	// zero: none. Judge needs no more. Verdict is heartbeat.Judge of them
	// at the last renewal.
	Sightings [2]time.Time
	Verdict   heartbeat.Verdict
}

// VerdictAt is heartbeat.Judge of the heartbeat's sightings at now: it
// decays with time, between renewals too.
func (h Heartbeat) VerdictAt(now time.Time) heartbeat.Verdict {
	var sightings []time.Time
	for _, s := range h.Sightings {
		if !s.IsZero() {
			sightings = append(sightings, s)
		}
	}
	return heartbeat.Judge(sightings, now, h.Interval)
}

// record folds one renewal's outcome (err, whether it had to read the
// Lease again and whether it found another konnector's renewal there) at
// now into h, and reports whether the change is one the Connection must
// be woken for: the first result, a different error, a reason to read the
// provider's identity again, or a different verdict on duplicates.
func (h Heartbeat) record(err error, reread, foreign bool, now time.Time) (Heartbeat, bool) {
	changed := !h.Known || errString(h.Err) != errString(err)
	if foreign {
		h.Sightings = [2]time.Time{h.Sightings[1], now}
	}
	if v := h.VerdictAt(now); v != h.Verdict {
		h.Verdict, changed = v, true
	}
	h.Known, h.Err = true, err
	if err == nil {
		h.LastRenewal = now
	}
	if heartbeat.Unanswered(err) {
		h.UnansweredAt = now
	}
	if (err != nil && changed) || reread {
		// The provider may be gone, or not the cluster it was: its
		// identity is read again now rather than at the next recheck.
		h.RecheckAt, changed = now, true
	}
	return h, changed
}

// moved is the state of a heartbeat restarted on another session or for
// another Lease: the last result and renewal carry over (the Condition
// does not flap), and so do the sightings of other konnectors (a
// duplicate is not forgotten by a new session); the reasons to recheck
// the identity do not.
func (h Heartbeat) moved(lease heartbeat.Lease, interval time.Duration) Heartbeat {
	started := h.Started
	if started.IsZero() {
		started = time.Now()
	}
	return Heartbeat{Running: true, Lease: lease, Interval: interval, Known: h.Known, Err: h.Err, LastRenewal: h.LastRenewal, Started: started,
		Sightings: h.Sightings, Verdict: h.Verdict}
}

// renewedAt is what kbind_heartbeat_age_seconds counts from: the last
// successful renewal or, for a heartbeat that has failed since it
// started (renewals refused from the start, as after a konnector restart
// while they are), its start — so that KbindHeartbeatStale fires for a
// sustained refusal either way (issue #52). ok is false before the first
// result.
func (h Heartbeat) renewedAt() (time.Time, bool) {
	switch {
	case !h.Running:
		return time.Time{}, false
	case !h.LastRenewal.IsZero():
		return h.LastRenewal, true
	case h.Known && h.Err != nil && !h.Started.IsZero():
		return h.Started, true
	}
	return time.Time{}, false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// connRecord is what the Manager holds for one Connection besides its
// sessions.
type connRecord struct {
	health Health
	// beat is the session whose client renews the Lease, and the
	// cancellation of that renewal loop; nil when none runs. The heartbeat
	// outlives the session's watches: a Connection that is not Ready keeps
	// it.
	beat *beat
	// watched is the session whose exported-CRD watch announces changes.
	watched *Session
}

// beat is one running renewal loop.
type beat struct {
	session *Session
	cancel  context.CancelFunc
}

// healthChangesBuffer is how many wake-ups HealthChanges holds before it
// drops one (the Connection's periodic requeue covers a dropped one).
const healthChangesBuffer = 64

// HealthChanges is the one wake-up from the session layer to its reader,
// the Connection controller (a channel has one reader): an event names a
// Connection whose Health changed on its own — a heartbeat result that
// differs from the last, a Lease found changed or gone, an exported CRD
// added, changed or removed. Sends never block: when the buffer is full
// the event is dropped and the Connection's periodic requeue covers it.
func (m *Manager) HealthChanges() <-chan event.TypedGenericEvent[*kbindv1alpha1.Connection] {
	return m.changes
}

// wake sends a HealthChanges event for the Connection.
func (m *Manager) wake(connection string) {
	obj := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: connection}}
	select {
	case m.changes <- event.TypedGenericEvent[*kbindv1alpha1.Connection]{Object: obj}:
	default:
	}
}

// Health returns the Connection's provider-side state, false when nothing
// is known of it (no probe recorded, no heartbeat, no watch).
func (m *Manager) Health(connection string) (Health, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.records[connection]
	if !ok {
		return Health{}, false
	}
	return t.health, true
}

// RecordProbe records the Connection's latest identity read and discovery
// pass.
func (m *Manager) RecordProbe(connection string, p Probe) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recordOf(connection).health.Probe = p
}

// recordOf returns the Connection's record, made on first use; mu is held.
func (m *Manager) recordOf(connection string) *connRecord {
	t, ok := m.records[connection]
	if !ok {
		t = &connRecord{}
		m.records[connection] = t
	}
	return t
}

// LastRenewals implements metrics.HeartbeatSource: the last successful
// renewal of every Connection whose heartbeat runs (renewedAt: its start
// when none succeeded yet and it fails).
func (m *Manager) LastRenewals() map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]time.Time{}
	for name, t := range m.records {
		if at, ok := t.health.Heartbeat.renewedAt(); ok {
			out[name] = at
		}
	}
	return out
}

// RunHeartbeat renews lease every interval through the client of s (a
// verified session), starting the renewal loop — or moving it, when the
// session or the Lease changed. The loop runs until StopHeartbeat, not
// with the session's watches. Each renewal is bounded by
// heartbeat.RenewTimeout of interval and the request timeout
// (Options.Timeout). Each result is recorded in the Connection's Health;
// one that changes it wakes the Connection (HealthChanges).
func (m *Manager) RunHeartbeat(s *Session, lease heartbeat.Lease, interval time.Duration) {
	name := s.Connection
	lease.Nonce = m.nonce
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.recordOf(name)
	if t.beat != nil && t.beat.session == s && t.health.Heartbeat.Lease == lease {
		return
	}
	if t.beat != nil {
		t.beat.cancel()
	}
	ctx, cancel := context.WithCancel(log.IntoContext(m.ctx, log.Log.WithValues("connection", name)))
	b := &beat{session: s, cancel: cancel}
	t.beat, t.health.Heartbeat = b, t.health.Heartbeat.moved(lease, interval)
	timeout := heartbeat.RenewTimeout(interval, m.opts.Timeout)
	m.goroutines.Go(func() {
		heartbeat.Run(ctx, s.Client, lease, interval, timeout, func(err error, reread, foreign bool) {
			m.reportHeartbeat(name, b, err, reread, foreign)
		})
	})
}

// reportHeartbeat records one renewal of the loop b, unless b was stopped
// or replaced meanwhile.
func (m *Manager) reportHeartbeat(name string, b *beat, err error, reread, foreign bool) {
	m.mu.Lock()
	t, ok := m.records[name]
	if !ok || t.beat != b {
		m.mu.Unlock()
		return
	}
	var changed bool
	t.health.Heartbeat, changed = t.health.Heartbeat.record(err, reread, foreign, time.Now())
	m.mu.Unlock()
	if changed {
		m.wake(name)
	}
}

// Duplicate is the verdict, now, on the Connection's heartbeat Lease
// (heartbeat.Judge): Alone when no heartbeat runs. Provider deletes wait
// unless it is Alone (the releaser).
func (m *Manager) Duplicate(connection string) heartbeat.Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.records[connection]
	if !ok || !t.health.Heartbeat.Running {
		return heartbeat.Alone
	}
	return t.health.Heartbeat.VerdictAt(time.Now())
}

// StopHeartbeat ends the Connection's Lease renewal and forgets its
// result. It returns the session that renewed the Lease and the Lease,
// nil when none ran.
func (m *Manager) StopHeartbeat(connection string) (*Session, heartbeat.Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.records[connection]
	if !ok || t.beat == nil {
		return nil, heartbeat.Lease{}
	}
	b, lease := t.beat, t.health.Heartbeat.Lease
	b.cancel()
	t.beat, t.health.Heartbeat = nil, Heartbeat{}
	return b.session, lease
}

// leaseDeleteTimeout bounds the Lease deletion of a retired Connection.
const leaseDeleteTimeout = 10 * time.Second

// Retire ends everything the Manager runs for a Connection that is going
// away on purpose: its heartbeat stops, its sessions stop, and its Lease
// is deleted from the provider, so that the consumer does not look stale
// to the backend. A failed deletion (provider unreachable or refusing) is
// logged and never blocks the caller: the backend reaps that Lease once
// it is stale. A Lease another live konnector renews with this
// consumer's identity (Duplicate not Alone: a restored clone) is
// theirs too and is kept.
func (m *Manager) Retire(ctx context.Context, connection string) {
	verdict := m.Duplicate(connection)
	s, lease := m.StopHeartbeat(connection)
	m.Stop(connection)
	if s == nil {
		return
	}
	if verdict != heartbeat.Alone {
		log.FromContext(ctx).Info("Heartbeat Lease kept: another konnector renews it with this consumer cluster's identity",
			"lease", lease.Namespace+"/"+lease.Name, "verdict", verdict.String())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, leaseDeleteTimeout)
	defer cancel()
	logger := log.FromContext(ctx).WithValues("lease", lease.Namespace+"/"+lease.Name)
	if err := heartbeat.Delete(ctx, s.Client, lease); err != nil {
		logger.Info("Heartbeat Lease not deleted; the backend reaps it once stale", "error", err.Error())
		return
	}
	logger.V(1).Info("Deleted heartbeat Lease")
}

// Forget stops the Connection's heartbeat and sessions and drops
// everything known of it: the Connection is gone.
func (m *Manager) Forget(connection string) {
	m.StopHeartbeat(connection)
	m.Stop(connection)
	m.mu.Lock()
	delete(m.records, connection)
	m.mu.Unlock()
}

// WatchExports makes the watch of the exported CRDs of s (a verified
// session) record a change in the Connection's Health and wake it, so
// that a new or changed export is discovered at once, not at the next
// pass; recheck is how often the List of the exports is still read
// directly (ExportedCRDs.Recheck). Watching the same session again does
// nothing; a newer session's watch replaces an older one's.
func (m *Manager) WatchExports(s *Session, recheck time.Duration) {
	name := s.Connection
	m.mu.Lock()
	t := m.recordOf(name)
	if t.watched == s {
		m.mu.Unlock()
		return
	}
	t.watched = s
	m.mu.Unlock()
	s.CRDs.Recheck(recheck)
	s.CRDs.OnChange(func() { m.exportsChanged(name, s) })
}

// exportsChanged records an export change announced by the watch of s,
// unless another session's watch replaced it.
func (m *Manager) exportsChanged(name string, s *Session) {
	m.mu.Lock()
	t, ok := m.records[name]
	current := ok && t.watched == s
	if current {
		t.health.ExportsChangedAt = time.Now()
	}
	m.mu.Unlock()
	if current {
		m.wake(name)
	}
}
