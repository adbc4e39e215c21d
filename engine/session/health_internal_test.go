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
	"errors"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kbind/kbind/engine/heartbeat"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestHeartbeatRecord(t *testing.T) {
	refused := errors.New("update leases: forbidden")
	silent := fmt.Errorf("update leases: %w", context.DeadlineExceeded)
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		name   string
		before Heartbeat
		err    error
		reread bool
		want   Heartbeat
		wake   bool
	}{
		{"the first success wakes", Heartbeat{Running: true},
			nil, false, Heartbeat{Running: true, Known: true, LastRenewal: now}, true},
		{"another success does not", Heartbeat{Running: true, Known: true, LastRenewal: t0},
			nil, false, Heartbeat{Running: true, Known: true, LastRenewal: now}, false},
		{"a new failure wakes and asks for an identity read", Heartbeat{Known: true, LastRenewal: t0},
			refused, false, Heartbeat{Known: true, Err: refused, LastRenewal: t0, RecheckAt: now}, true},
		{"the same failure again does neither", Heartbeat{Known: true, Err: refused, LastRenewal: t0, RecheckAt: t0},
			refused, false, Heartbeat{Known: true, Err: refused, LastRenewal: t0, RecheckAt: t0}, false},
		{"a Lease read again asks for an identity read", Heartbeat{Known: true, LastRenewal: t0},
			nil, true, Heartbeat{Known: true, LastRenewal: now, RecheckAt: now}, true},
		{"no answer is recorded as such", Heartbeat{Known: true, LastRenewal: t0},
			silent, false, Heartbeat{Known: true, Err: silent, LastRenewal: t0, RecheckAt: now, UnansweredAt: now}, true},
		{"the first result a failure", Heartbeat{},
			refused, false, Heartbeat{Known: true, Err: refused, RecheckAt: now}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, wake := tc.before.record(tc.err, tc.reread, false, now)
			if got != tc.want || wake != tc.wake {
				t.Errorf("record = %+v, %v; want %+v, %v", got, wake, tc.want, tc.wake)
			}
		})
	}
}

// Renewals that find another konnector's renewal on the Lease are
// remembered (the last two) and judged: one is a predecessor's (Suspect),
// two within the window a duplicate, which wakes the Connection; a window
// without one clears it, and a moved heartbeat keeps them.
func TestHeartbeatRecordSightings(t *testing.T) {
	h := Heartbeat{Running: true, Interval: time.Second, Known: true}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var wake bool
	for _, step := range []struct {
		at      int
		foreign bool
		want    heartbeat.Verdict
		wake    bool
	}{
		{1, false, heartbeat.Alone, false},
		{2, true, heartbeat.Suspect, true},
		{3, false, heartbeat.Suspect, false},
		{4, true, heartbeat.Duplicate, true},
		{5, true, heartbeat.Duplicate, false},
		{8, false, heartbeat.Duplicate, false},
		{9, false, heartbeat.Alone, true},
	} {
		h, wake = h.record(nil, false, step.foreign, at(step.at))
		if h.Verdict != step.want || wake != step.wake {
			t.Errorf("at %ds (foreign %t): verdict %s, wake %t; want %s, %t", step.at, step.foreign, h.Verdict, wake, step.want, step.wake)
		}
	}
	h.Sightings = [2]time.Time{at(1), at(2)}
	if got := h.moved(heartbeat.Lease{Name: "new"}, time.Second); got.Sightings != h.Sightings || got.VerdictAt(at(3)) != heartbeat.Duplicate {
		t.Errorf("moved = %+v: the sightings did not carry over", got)
	}
}

func withNonce(l heartbeat.Lease, nonce string) heartbeat.Lease {
	l.Nonce = nonce
	return l
}

func TestHeartbeatMoved(t *testing.T) {
	refused := errors.New("forbidden")
	before := Heartbeat{Running: true, Lease: heartbeat.Lease{Name: "old"}, Interval: time.Second, Known: true, Err: refused,
		LastRenewal: t0, Started: t0, RecheckAt: t0, UnansweredAt: t0}
	lease := heartbeat.Lease{Name: "new"}
	want := Heartbeat{Running: true, Lease: lease, Interval: time.Minute, Known: true, Err: refused, LastRenewal: t0, Started: t0}
	if got := before.moved(lease, time.Minute); got != want {
		t.Errorf("moved = %+v, want %+v", got, want)
	}
}

// fakeSession is a session whose client is an in-memory fake.
func fakeSession(m *Manager, connection string) *Session {
	ctx, cancel := context.WithCancel(m.ctx)
	return &Session{Connection: connection, Client: fake.NewClientBuilder().Build(), spawn: m.goroutines.Go,
		shutdown: m.ctx.Done(), ctx: ctx, cancel: cancel, stopped: make(chan struct{})}
}

// The Manager runs the heartbeat, records its results in the
// Connection's Health, wakes the Connection through HealthChanges, and
// when its Start ends returns only once the heartbeat has stopped.
func TestManagerRunsHeartbeats(t *testing.T) {
	m := NewManager(context.Background(), Options{Timeout: 5 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Start(ctx) }()

	s := fakeSession(m, "c")
	lease := heartbeat.For("c", "consumer-uid", "kbind")
	m.RunHeartbeat(s, lease, time.Hour)
	select {
	case e := <-m.HealthChanges():
		if e.Object.Name != "c" {
			t.Errorf("woken for %q, want c", e.Object.Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after the first renewal")
	}
	h, ok := m.Health("c")
	if !ok || !h.Heartbeat.Running || !h.Heartbeat.Known || h.Heartbeat.Err != nil || h.Heartbeat.LastRenewal.IsZero() || h.Heartbeat.Lease != withNonce(lease, m.nonce) {
		t.Fatalf("Health = %+v, %v; want a running heartbeat that renewed", h, ok)
	}
	if _, ok := m.LastRenewals()["c"]; !ok {
		t.Error("LastRenewals lacks c")
	}
	// Running it again on the same session and Lease keeps the loop.
	m.RunHeartbeat(s, lease, time.Hour)
	if got, _ := m.Health("c"); got.Heartbeat != h.Heartbeat {
		t.Errorf("Health after the same RunHeartbeat = %+v, want %+v", got.Heartbeat, h.Heartbeat)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if m.goroutines.Go(func() {}) {
		t.Error("a goroutine started after Start returned")
	}
	if !NewManager(context.Background(), Options{}).NeedLeaderElection() {
		t.Error("NeedLeaderElection = false; the heartbeat writes Leases")
	}
}

// A stopped heartbeat is forgotten, and a report of a loop that was
// stopped or replaced meanwhile changes nothing.
func TestStaleReportsAreIgnored(t *testing.T) {
	m := NewManager(context.Background(), Options{})
	old, current := &beat{cancel: func() {}}, &beat{cancel: func() {}}
	m.recordOf("c").beat = current
	m.reportHeartbeat("c", old, errors.New("stale"), true, false)
	if h, _ := m.Health("c"); h.Heartbeat != (Heartbeat{}) {
		t.Errorf("a replaced loop's report was recorded: %+v", h.Heartbeat)
	}
	m.reportHeartbeat("c", current, nil, false, false)
	if h, _ := m.Health("c"); !h.Heartbeat.Known {
		t.Error("the current loop's report was not recorded")
	}
	if s, _ := m.StopHeartbeat("c"); s != nil {
		t.Errorf("StopHeartbeat returned session %v of a loop without one", s)
	}
	if h, _ := m.Health("c"); h.Heartbeat != (Heartbeat{}) {
		t.Errorf("a stopped heartbeat is still reported: %+v", h.Heartbeat)
	}

	watched, replaced := &Session{}, &Session{}
	m.recordOf("c").watched = watched
	m.exportsChanged("c", replaced)
	if h, _ := m.Health("c"); !h.ExportsChangedAt.IsZero() {
		t.Error("a replaced watch's change was recorded")
	}
	m.exportsChanged("c", watched)
	if h, _ := m.Health("c"); h.ExportsChangedAt.IsZero() {
		t.Error("the current watch's change was not recorded")
	}
	m.Forget("c")
	if _, ok := m.Health("c"); ok {
		t.Error("a forgotten Connection still has Health")
	}
	// Only the current loop's first result and the current watch's
	// change woke the Connection (sends never block: nobody reads here).
	if n := len(m.HealthChanges()); n != 2 {
		t.Errorf("%d wake-ups queued, want 2", n)
	}
}
