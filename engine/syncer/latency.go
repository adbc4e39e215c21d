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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kbind/kbind/engine/metrics"
)

// observations remember, per consumer key, when the Syncer first observed
// a change of one side it has not handled yet (the informer event that
// queued the key), for kbind_sync_latency_seconds. Only the earliest
// unhandled observation counts: the latency is that of the oldest change a
// write delivers. An entry lives while its key is queued or being synced:
// every observation queues its key, the worker takes the entry when it
// starts the sync and puts it back only when the sync is retried, so the
// map holds at most the keys waiting in the queue.
type observations struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

// observe records a change of key seen at; an earlier unhandled one wins.
func (o *observations) observe(key types.NamespacedName, at time.Time) {
	if at.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since == nil {
		o.since = map[types.NamespacedName]time.Time{}
	}
	if t, ok := o.since[key]; !ok || at.Before(t) {
		o.since[key] = at
	}
}

// take removes and returns the earliest unhandled observation of key (zero
// when none): the sync starting now handles every change seen before it.
func (o *observations) take(key types.NamespacedName) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.since[key]
	delete(o.since, key)
	return t
}

// len is how many keys have an unhandled observation.
func (o *observations) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.since)
}

// changes are when the changes one sync of a key handles were first
// observed on each side; zero when that side had no unhandled change.
type changes struct {
	up   time.Time // the consumer object's
	down time.Time // the provider object's
}

// acknowledged observes the end-to-end latency of a direction whose write
// the other side has just acknowledged, once: the change is delivered, a
// later write in the same retry chain is not its latency again.
func (c *changes) acknowledged(connection, direction string, now time.Time) {
	at := &c.up
	if direction == metrics.DirectionDown {
		at = &c.down
	}
	if at.IsZero() {
		return
	}
	metrics.SyncLatency.WithLabelValues(connection, direction).Observe(now.Sub(*at).Seconds())
	*at = time.Time{}
}
