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
