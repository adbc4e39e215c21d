package related

import (
	"context"
	"errors"
	"sync"
)

// errCopierStopped is returned by a pass that runs while the Copier stops
// (the manager is shutting down).
var errCopierStopped = errors.New("related: the copier has stopped")

// goroutines are the goroutines a Copier started (its informers and the
// watchers of provider sessions), so that stopping it can wait for them.
// Once stopped it starts none: a pass racing the shutdown cannot leave one
// behind.
type goroutines struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// Go runs fn on a new goroutine, or reports false once stopped.
func (g *goroutines) Go(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.wg.Go(fn)
	return true
}

// stop refuses new goroutines from now on.
func (g *goroutines) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
}

// Start runs the Copier as a manager.Runnable: it blocks until ctx ends,
// then stops every informer (consumer and provider side) and waits until
// their goroutines have returned. Passes (Sync, Cleanup) may run before
// Start; after it they start no informer.
func (c *Copier) Start(ctx context.Context) error {
	<-ctx.Done()
	c.stop()
	return nil
}

// stop stops the Copier's informers and waits for its goroutines.
func (c *Copier) stop() {
	c.goroutines.stop()
	c.cancel()
	c.goroutines.wg.Wait()
}

// NeedLeaderElection is true: the Copier writes copies on both clusters,
// and only the elected konnector's binding controllers use it.
func (c *Copier) NeedLeaderElection() bool { return true }
