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

// Package liveness judges whether kbind heartbeat Leases are stale by the
// backend's own clock (BE-1). A Lease is live while the backend keeps
// seeing its renewTime change; the timestamps the holder writes are never
// compared with the backend's clock, so a holder with a skewed or
// far-future clock cannot keep itself alive, and a restarted backend starts
// every clock afresh, so a restart never reaps early.
//
// Requirement ids in comments (such as BE-1) refer to docs/requirements.md.
package liveness

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Tracker remembers, per Lease, when the backend last saw its renewTime
// change. It is safe for concurrent use.
type Tracker struct {
	clock      clock.PassiveClock
	staleAfter time.Duration

	mu   sync.Mutex
	seen map[string]observation
}

type observation struct {
	renewTime string    // the holder's value, compared only for equality
	changedAt time.Time // backend clock when renewTime last changed
	renewed   bool      // renewTime changed at least once since first seen
}

// NewTracker returns a Tracker that calls a Lease stale once its renewTime
// has not changed for staleAfter on clk.
func NewTracker(clk clock.PassiveClock, staleAfter time.Duration) *Tracker {
	return &Tracker{clock: clk, staleAfter: staleAfter, seen: map[string]observation{}}
}

// Observe records the renewTime the backend currently sees on the Lease
// identified by key (its namespace/name). renewTime is the holder's
// serialized value, "" when unset.
func (t *Tracker) Observe(key, renewTime string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.seen[key]
	if ok && o.renewTime == renewTime {
		return
	}
	t.seen[key] = observation{renewTime: renewTime, changedAt: t.clock.Now(), renewed: ok}
}

// Seen returns the renewTime the backend last observed on the Lease key,
// ok false for a Lease it has not observed.
func (t *Tracker) Seen(key string) (renewTime string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.seen[key]
	return o.renewTime, ok
}

// Forget drops a Lease that no longer exists.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, key)
}

// State is the liveness verdict for one Lease.
type State struct {
	// Known is false for a Lease the tracker has never observed.
	Known bool
	// Stale is true once renewTime has not changed for the stale window.
	Stale bool
	// LastChange is when the backend last saw renewTime change.
	LastChange time.Time
	// StaleSince is when the Lease became (or will become) stale.
	StaleSince time.Time
	// Age is how long ago the backend last saw renewTime change.
	Age time.Duration
	// Renewed is true once the backend has seen renewTime change at least
	// once since it first saw the Lease: proof of a live holder, as opposed
	// to a Lease that merely looks fresh to a restarted backend.
	Renewed bool
}

// State returns the verdict for key now.
func (t *Tracker) State(key string) State {
	t.mu.Lock()
	o, ok := t.seen[key]
	t.mu.Unlock()
	if !ok {
		return State{}
	}
	now := t.clock.Now()
	since := o.changedAt.Add(t.staleAfter)
	return State{
		Known:      true,
		Stale:      !now.Before(since),
		LastChange: o.changedAt,
		StaleSince: since,
		Age:        now.Sub(o.changedAt),
		Renewed:    o.renewed,
	}
}

// NextTransition is how long until key turns stale (zero when it already
// is or is unknown), so callers can requeue exactly then instead of polling.
func (t *Tracker) NextTransition(key string) time.Duration {
	s := t.State(key)
	if !s.Known || s.Stale {
		return 0
	}
	return s.StaleSince.Sub(t.clock.Now())
}

// ConsumerLive reports whether any of a consumer's Leases is live: a
// consumer with one stale and one live Lease is live.
func (t *Tracker) ConsumerLive(keys []string) bool {
	for _, k := range keys {
		if s := t.State(k); !s.Known || !s.Stale {
			return true
		}
	}
	return false
}
