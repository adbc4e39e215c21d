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
	m.goroutines.CloseAndWait()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: true, the
// Manager writes heartbeat Leases on the providers (see Lifecycle above).
func (m *Manager) NeedLeaderElection() bool { return true }
