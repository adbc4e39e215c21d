package syncer

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// newWorkqueue is a Syncer's queue: client-go's rate-limited workqueue
// (failures retried after 100 ms, doubling up to 2 minutes), named name
// for its workqueue_* series as before, on a fairQueue. Each layer gets the
// name, as client-go's default construction gives it.
func newWorkqueue(name string) workqueue.TypedRateLimitingInterface[types.NamespacedName] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 2*time.Minute),
		),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: name,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{Name: name,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: name, Queue: newFairQueue()}),
			}),
		},
	)
}

// fairQueue orders a Syncer's workqueue: one FIFO lane per consumer
// namespace (cluster-scoped objects share the lane of ""), served round
// robin. A namespace with thousands of queued objects, or objects that are
// slow to sync (mutation rules its user wrote, large objects), gets one
// turn in as many as there are namespaces waiting, so it cannot starve the
// others on the same Connection and API. Lanes are per namespace rather
// than per binding: a Binding covers one namespace, and under a
// ClusterBinding a namespace's user still controls what its objects
// contain, which drives their cost.
//
// It implements workqueue.Queue, the storage under client-go's workqueue,
// which keeps everything else: an item is pushed only when it is not
// queued already (the dirty set) and not being processed, Touch is called
// for an item added again while it waits, and Pop only when Len is above
// zero. Every call comes with the workqueue's lock held, so fairQueue has
// none. An empty lane is dropped at once: memory is bounded by the items
// queued, whatever namespaces came and went.
type fairQueue struct {
	// lanes holds each namespace's waiting items; a namespace with none
	// has no lane.
	lanes map[string]*fifo[types.NamespacedName]
	// turns holds the namespaces of the lanes in the order they are
	// served: Pop serves the first and, while it has items left, moves
	// it to the back.
	turns fifo[string]
	// n is the number of items in every lane.
	n int
}

var _ workqueue.Queue[types.NamespacedName] = (*fairQueue)(nil)

func newFairQueue() *fairQueue {
	return &fairQueue{lanes: map[string]*fifo[types.NamespacedName]{}}
}

// Push adds an item at the back of its namespace's lane; a new lane takes
// its turn after those already waiting.
func (q *fairQueue) Push(item types.NamespacedName) {
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
func (q *fairQueue) Len() int { return q.n }

// Pop takes the first item of the lane whose turn it is. The workqueue
// calls it only when Len is above zero.
func (q *fairQueue) Pop() types.NamespacedName {
	ns := q.turns.pop()
	l := q.lanes[ns]
	item := l.pop()
	q.n--
	if l.len() == 0 {
		delete(q.lanes, ns)
	} else {
		q.turns.push(ns)
	}
	return item
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
