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

package providerevents

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// Limits bound the consumer Event writes a storm of provider Events can
// cause (docs/sync.md#provider-events).
type Limits struct {
	// PerObjectBurst writes for one consumer object at once, then one
	// every PerObjectEvery.
	PerObjectBurst int
	PerObjectEvery time.Duration
	// TotalPerSecond writes for every consumer object together (of the
	// whole konnector), with TotalBurst at once.
	TotalPerSecond float64
	TotalBurst     int
}

// DefaultLimits are 25 Events for one object at once, then one every 10 s
// (like the API server's own Event spam filter, a little more generous);
// at most 10 writes a second, 50 at once, for the whole konnector, so
// that a storm never takes the consumer client's request budget from
// syncing.
var DefaultLimits = Limits{PerObjectBurst: 25, PerObjectEvery: 10 * time.Second, TotalPerSecond: 10, TotalBurst: 50}

// maxIdleLimiters is how many per-object limiters are kept before the
// idle (full again) ones are dropped.
const maxIdleLimiters = 1024

// Limiter applies Limits; it is safe for concurrent use and shared by
// every forwarder of a konnector.
type Limiter struct {
	limits  Limits
	total   *rate.Limiter
	mu      sync.Mutex
	objects map[types.UID]*rate.Limiter
}

// NewLimiter returns a Limiter with the limits l.
func NewLimiter(l Limits) *Limiter {
	return &Limiter{limits: l, total: rate.NewLimiter(rate.Limit(l.TotalPerSecond), l.TotalBurst), objects: map[types.UID]*rate.Limiter{}}
}

// Reserve takes one write for the consumer object uid at now if both
// limits allow it and returns 0; otherwise it takes nothing and returns
// how long until they may.
func (l *Limiter) Reserve(uid types.UID, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	obj, ok := l.objects[uid]
	if !ok {
		if len(l.objects) >= maxIdleLimiters {
			l.pruneLocked(now)
		}
		obj = rate.NewLimiter(rate.Every(l.limits.PerObjectEvery), l.limits.PerObjectBurst)
		l.objects[uid] = obj
	}
	r := obj.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	t := l.total.ReserveN(now, 1)
	if d := t.DelayFrom(now); d > 0 {
		t.CancelAt(now)
		r.CancelAt(now)
		return d
	}
	return 0
}

// pruneLocked drops the limiters of objects that are idle again (their
// burst is back): a new one behaves the same.
func (l *Limiter) pruneLocked(now time.Time) {
	for uid, obj := range l.objects {
		if obj.TokensAt(now) >= float64(l.limits.PerObjectBurst) {
			delete(l.objects, uid)
		}
	}
}
