package session

import (
	"context"
	"sync"
)

// Lifecycle: the Manager is a controller-runtime manager.Runnable. Start
// blocks until its context ends (or the base context NewManager was given
// does), then stops every heartbeat, exported-CRD watch, session cache and
// candidate, and returns only once every goroutine the Manager started
// for them has exited. Sessions, heartbeats and watches may be started
// before Start is called (the controllers that start them run alongside
// it); after Start has returned nothing new starts: a session built then
// is stopped from birth.
//
// NeedLeaderElection is true: the heartbeat writes a Lease on each
// provider and sessions hold the provider's watches, and only the elected
// konnector does either — as before the Manager was a Runnable, when only
// the (leader-elected) Connection and binding controllers started them.

// Start implements manager.Runnable (see Lifecycle above).
func (m *Manager) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-m.ctx.Done():
	}
	m.cancel()
	m.goroutines.closeAndWait()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: true, the
// Manager writes heartbeat Leases on the providers (see Lifecycle above).
func (m *Manager) NeedLeaderElection() bool { return true }

// goroutines are the goroutines a Manager started, so that it can wait
// for all of them once it stops.
type goroutines struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs fn in a tracked goroutine and reports whether it did: once
// closeAndWait has been called nothing starts any more.
func (g *goroutines) Go(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// closeAndWait refuses new goroutines and waits for the running ones.
func (g *goroutines) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
