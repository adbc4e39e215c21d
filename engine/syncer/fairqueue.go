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
	"k8s.io/client-go/util/workqueue"
)

// newWorkqueue is a Syncer's queue: client-go's rate-limited workqueue
// (failures retried after 100 ms, doubling up to 2 minutes), named name
// for its workqueue_* series as before, on a fairQueue, which Done tells
// when a sync ends. Each layer gets the name, as client-go's default
// construction gives it.
func newWorkqueue(name string) workqueue.TypedRateLimitingInterface[types.NamespacedName] {
	lanes := newFairQueue()
	return fairWorkqueue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 2*time.Minute),
			),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: name,
				DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{Name: name,
					Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: name, Queue: lanes}),
				}),
			},
		),
		lanes: lanes,
	}
}

// fairWorkqueue is the workqueue whose Done also tells its fairQueue that
// the item's sync ended.
type fairWorkqueue struct {
	workqueue.TypedRateLimitingInterface[types.NamespacedName]
	lanes *fairQueue
}

// Done implements workqueue.TypedInterface.
func (q fairWorkqueue) Done(item types.NamespacedName) {
	q.lanes.done(item)
	q.TypedRateLimitingInterface.Done(item)
}

// fairQueue orders a Syncer's workqueue: one FIFO lane per consumer
// namespace (cluster-scoped objects share the lane of ""). Pop serves the
// lanes with the fewest syncs in flight, round robin among them. A
// namespace with thousands of queued objects gets one turn in as many as
// there are namespaces waiting; one whose objects are slow to sync (large
// objects, mutation rules its user wrote) holds workers while they run, so
// the next free worker goes to another namespace's object as long as one
// waits: each namespace waiting gets about as much worker time as another,
// not as many turns. (Turns alone were measured to starve a namespace of
// quick objects next to one of slow ones: every worker freed did one quick
// sync and then took a slow one, and the quick namespace fell behind —
// worse than first come, first served, docs/bench.md.) Lanes are per
// namespace rather than per binding: a Binding covers one namespace, and
// under a ClusterBinding a namespace's user still controls what its
// objects contain, which drives their cost.
//
// It implements workqueue.Queue, the storage under client-go's workqueue,
// which keeps everything else: an item is pushed only when it is not
// queued already (the dirty set) and not being processed, Touch is called
// for an item added again while it waits, and Pop only when Len is above
// zero — those come with the workqueue's lock held; done comes from
// fairWorkqueue.Done without it, hence mu. An empty lane is dropped at
// once, and so is a namespace's count of syncs in flight at zero: memory
// is bounded by the items queued and processed, whatever namespaces came
// and went.
type fairQueue struct {
	mu sync.Mutex
	// lanes holds each namespace's waiting items; a namespace with none
	// has no lane.
	lanes map[string]*fifo[types.NamespacedName]
	// turns holds the namespaces of the lanes in the order they are
	// served: Pop serves the first with the fewest syncs in flight and,
	// while it has items left, moves it to the back.
	turns fifo[string]
	// inFlight counts each namespace's items popped and not yet done; at
	// most one per worker.
	inFlight map[string]int
	// n is the number of items in every lane.
	n int
}

var _ workqueue.Queue[types.NamespacedName] = (*fairQueue)(nil)

func newFairQueue() *fairQueue {
	return &fairQueue{lanes: map[string]*fifo[types.NamespacedName]{}, inFlight: map[string]int{}}
}

// Push adds an item at the back of its namespace's lane; a new lane takes
// its turn after those already waiting.
func (q *fairQueue) Push(item types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l, ok := q.lanes[item.Namespace]
	if !ok {
		l = &fifo[types.NamespacedName]{}
		q.lanes[item.Namespace] = l
		q.turns.push(item.Namespace)
	}
	l.push(item)
	q.n++
}

// Touch keeps an item added again where it waits: it was queued already,
// and its turn comes as it would have.
func (q *fairQueue) Touch(types.NamespacedName) {}

// Len is the number of items in every lane.
func (q *fairQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Pop takes the first item of the lane whose turn it is among those with
// the fewest syncs in flight, and counts it in flight. The workqueue calls
// it only when Len is above zero.
func (q *fairQueue) Pop() types.NamespacedName {
	q.mu.Lock()
	defer q.mu.Unlock()
	ns := q.turns.removeAt(q.next())
	l := q.lanes[ns]
	item := l.pop()
	q.n--
	q.inFlight[ns]++
	if l.len() == 0 {
		delete(q.lanes, ns)
	} else {
		q.turns.push(ns)
	}
	return item
}

// next is the index in turns of the lane to serve: the first with the
// fewest syncs in flight. Only lanes with syncs in flight are passed over,
// at most one per worker, so it looks at a few lanes whatever their
// number.
func (q *fairQueue) next() int {
	best, fewest := 0, -1
	for i := range q.turns.len() {
		n := q.inFlight[q.turns.at(i)]
		if fewest < 0 || n < fewest {
			best, fewest = i, n
		}
		if n == 0 {
			break
		}
	}
	return best
}

// done ends a sync of item: its namespace has one fewer in flight.
func (q *fairQueue) done(item types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch n := q.inFlight[item.Namespace]; {
	case n > 1:
		q.inFlight[item.Namespace] = n - 1
	case n == 1:
		delete(q.inFlight, item.Namespace)
	}
}

// fifo is a first-in first-out queue on a slice whose popped head is
// released: the items left are moved down once half of the slice is
// popped, and a backing array four times larger than they need is given
// back, so it holds a few times the items waiting at most, not the most
// that ever waited.
type fifo[T any] struct {
	items []T
	head  int
}

// keptCapacity is the capacity a fifo keeps however few items it holds.
const keptCapacity = 64

func (f *fifo[T]) push(v T) { f.items = append(f.items, v) }

func (f *fifo[T]) len() int { return len(f.items) - f.head }

// at is the i-th item from the front.
func (f *fifo[T]) at(i int) T { return f.items[f.head+i] }

// removeAt removes and returns the i-th item from the front, moving the
// ones before it back by one: O(i).
func (f *fifo[T]) removeAt(i int) T {
	v := f.items[f.head+i]
	copy(f.items[f.head+1:f.head+i+1], f.items[f.head:f.head+i])
	f.items[f.head] = v
	return f.pop()
}

// pop removes and returns the first item; f must not be empty.
func (f *fifo[T]) pop() T {
	var zero T
	v := f.items[f.head]
	f.items[f.head] = zero // no reference kept for the garbage collector to see
	f.head++
	if f.head > len(f.items)/2 {
		f.compact()
	}
	return v
}

// compact moves the waiting items to the front, into a smaller array
// when the current one is four times larger than they need.
func (f *fifo[T]) compact() {
	waiting := f.items[f.head:]
	if cap(f.items) > keptCapacity && len(waiting)*4 < cap(f.items) {
		f.items = append(make([]T, 0, max(keptCapacity, 2*len(waiting))), waiting...)
	} else {
		n := copy(f.items, waiting)
		clear(f.items[n:])
		f.items = f.items[:n]
	}
	f.head = 0
}
