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

// Package wake coalesces wake-ups: a producer says "look at key again"
// (the engine: "reconcile this Connection's bindings") as often as things
// happen, and the consumer hears of each key at most once per interval.
// The engine names its signals, and who produces and consumes each, in
// engine/wakeups.go; this package only delivers them.
package wake

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Coalescer delivers each key it is woken for once, interval after the
// first wake-up: the wake-ups of a key until then are one delivery. A key
// woken while its delivery runs is delivered again an interval later, so
// a wake-up is never lost, only merged.
//
// It is a manager.Runnable. Wake-ups before Start wait (one per key) and
// are delivered once it runs; Start returns when its context ends, after
// the delivery in progress, and wake-ups after that are dropped: their
// consumers are stopping too.
type Coalescer struct {
	interval time.Duration
	deliver  func(ctx context.Context, key string)
	// queue holds each woken key until it is due (its delaying half keeps
	// the earliest due time of a key, its queue half one entry per key).
	queue workqueue.TypedDelayingInterface[string]
}

// NewCoalescer returns a Coalescer that calls deliver with each key at
// most once per interval. deliver runs on one goroutine, one key at a
// time; it must return soon after ctx ends.
func NewCoalescer(interval time.Duration, deliver func(ctx context.Context, key string)) *Coalescer {
	return newCoalescer(interval, clock.RealClock{}, deliver)
}

// newCoalescer is NewCoalescer on clk (tests pass a fake clock).
func newCoalescer(interval time.Duration, clk clock.WithTicker, deliver func(ctx context.Context, key string)) *Coalescer {
	return &Coalescer{
		interval: interval, deliver: deliver,
		// Unnamed: no workqueue metrics (there were none before it either).
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Clock: clk}),
	}
}

// Wake asks for key to be delivered; it never blocks.
func (c *Coalescer) Wake(key string) { c.queue.AddAfter(key, c.interval) }

// Start delivers due keys until ctx ends, then stops the queue's timer
// goroutine and returns.
func (c *Coalescer) Start(ctx context.Context) error {
	stop := context.AfterFunc(ctx, c.queue.ShutDown)
	defer stop()
	defer c.queue.ShutDown()
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return nil
		}
		if ctx.Err() == nil {
			c.deliver(ctx, key)
		}
		c.queue.Done(key)
	}
}

// NeedLeaderElection is false: a Coalescer writes nothing, and runs
// wherever its consumers might.
func (c *Coalescer) NeedLeaderElection() bool { return false }
