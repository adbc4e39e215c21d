package related

import (
	"context"
	"errors"
)

// errCopierStopped is returned by a pass that runs while the Copier stops
// (the manager is shutting down).
var errCopierStopped = errors.New("related: the copier has stopped")

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
	c.cancel()
	c.goroutines.CloseAndWait()
}

// NeedLeaderElection is true: the Copier writes copies on both clusters,
// and only the elected konnector's binding controllers use it.
func (c *Copier) NeedLeaderElection() bool { return true }
