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

package wake

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// recorder records deliveries and when, on the fake clock, they ran.
type recorder struct {
	clk  *clocktesting.FakeClock
	mu   sync.Mutex
	keys []string
	at   []time.Time
}

func (r *recorder) deliver(_ context.Context, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	r.at = append(r.at, r.clk.Now())
}

// delivered returns the keys delivered so far, sorted.
func (r *recorder) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.keys)
	slices.Sort(out)
	return out
}

// firstAt is when the first delivery ran.
func (r *recorder) firstAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[0]
}

// advanceUntil moves the fake clock on in small steps until check holds,
// failing after a few seconds of real time. (The queue reads the clock
// before it sets its timer: one big step could fall between the two.)
func advanceUntil(t *testing.T, clk *clocktesting.FakeClock, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		clk.Step(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
}

// poll waits, without moving the clock, until check holds.
func poll(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// newTest returns a Coalescer with a one-second interval on a fake clock.
func newTest() (*Coalescer, *clocktesting.FakeClock, *recorder) {
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &recorder{clk: clk}
	return newCoalescer(time.Second, clk, rec.deliver), clk, rec
}

// start runs a Coalescer on a fake clock until the test ends.
func start(t *testing.T) (*Coalescer, *clocktesting.FakeClock, *recorder) {
	t.Helper()
	c, clk, rec := newTest()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return c, clk, rec
}

// TestCoalescerOncePerInterval: a burst of wake-ups for one Connection is
// one delivery, an interval after the first; each Connection has its own.
func TestCoalescerOncePerInterval(t *testing.T) {
	c, clk, rec := start(t)
	woken := clk.Now()
	for i := 0; i < 100; i++ {
		c.Wake("a")
	}
	c.Wake("b")
	advanceUntil(t, clk, "a and b delivered", func() bool { return len(rec.delivered()) >= 2 })
	if at := rec.firstAt(); at.Sub(woken) < time.Second {
		t.Errorf("first delivery %s after the wake-up, want at least the interval", at.Sub(woken))
	}
	clk.Step(10 * time.Second) // nothing more is due
	if got := rec.delivered(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("delivered %v, want a and b once each", got)
	}
}

// TestCoalescerWakeAfterDelivery: a wake-up after a delivery is delivered
// again, an interval later — merged, never lost.
func TestCoalescerWakeAfterDelivery(t *testing.T) {
	c, clk, rec := start(t)
	c.Wake("a")
	advanceUntil(t, clk, "the first delivery", func() bool { return len(rec.delivered()) == 1 })
	c.Wake("a")
	c.Wake("a")
	advanceUntil(t, clk, "the second delivery", func() bool { return len(rec.delivered()) == 2 })
	clk.Step(10 * time.Second)
	if got := rec.delivered(); !slices.Equal(got, []string{"a", "a"}) {
		t.Fatalf("delivered %v, want a twice", got)
	}
}

// TestCoalescerWaitsForStart: wake-ups before Start are delivered once it
// runs; after it returns, wake-ups are dropped.
func TestCoalescerWaitsForStart(t *testing.T) {
	c, clk, rec := newTest()
	c.Wake("a")
	poll(t, "the wake-up to wait for the clock", clk.HasWaiters)
	clk.Step(10 * time.Second)
	if got := rec.delivered(); len(got) != 0 {
		t.Fatalf("delivered %v before Start", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	advanceUntil(t, clk, "the delivery once started", func() bool { return len(rec.delivered()) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Wake("b") // must not block or panic
	clk.Step(10 * time.Second)
	if got := rec.delivered(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("delivered %v, want a", got)
	}
}
