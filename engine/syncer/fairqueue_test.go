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
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// keys are n items of namespace ns, named 0..n-1.
func keys(ns string, n int) []types.NamespacedName {
	out := make([]types.NamespacedName, n)
	for i := range out {
		out[i] = key(ns, fmt.Sprint(i))
	}
	return out
}

// drain pops every item of q.
func drain(q *fairQueue) []types.NamespacedName {
	var out []types.NamespacedName
	for q.Len() > 0 {
		out = append(out, q.Pop())
	}
	return out
}

// TestFairQueueOrder: lanes by namespace served round robin, each FIFO;
// a namespace's turn comes after those already waiting.
func TestFairQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		push []types.NamespacedName
		want []types.NamespacedName
	}{
		{"empty", nil, nil},
		{"one lane is FIFO", keys("a", 3), keys("a", 3)},
		{"two lanes alternate", []types.NamespacedName{key("a", "1"), key("a", "2"), key("a", "3"), key("b", "1"), key("b", "2")},
			[]types.NamespacedName{key("a", "1"), key("b", "1"), key("a", "2"), key("b", "2"), key("a", "3")}},
		{"cluster-scoped objects are one lane", []types.NamespacedName{key("", "x"), key("", "y"), key("a", "1")},
			[]types.NamespacedName{key("", "x"), key("a", "1"), key("", "y")}},
		{"lanes in order of arrival", []types.NamespacedName{key("c", "1"), key("a", "1"), key("b", "1"), key("a", "2")},
			[]types.NamespacedName{key("c", "1"), key("a", "1"), key("b", "1"), key("a", "2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newFairQueue()
			for _, k := range tc.push {
				q.Push(k)
			}
			if q.Len() != len(tc.push) {
				t.Errorf("Len %d after %d pushes", q.Len(), len(tc.push))
			}
			if got := drain(q); !slices.Equal(got, tc.want) {
				t.Errorf("popped %v, want %v", got, tc.want)
			}
			if len(q.lanes) != 0 || q.turns.len() != 0 {
				t.Errorf("lanes left after draining: %v, turns %d", q.lanes, q.turns.len())
			}
		})
	}
}

// A namespace with 1000 queued objects does not hold up one with one: the
// single item is popped within the first 2 pops, whichever came first.
func TestFairQueueOneInN(t *testing.T) {
	for _, noisyFirst := range []bool{true, false} {
		q := newFairQueue()
		if !noisyFirst {
			q.Push(key("quiet", "only"))
		}
		for _, k := range keys("noisy", 1000) {
			q.Push(k)
		}
		if noisyFirst {
			q.Push(key("quiet", "only"))
		}
		if got := []types.NamespacedName{q.Pop(), q.Pop()}; !slices.Contains(got, key("quiet", "only")) {
			t.Errorf("noisy first %v: the first two pops are %v", noisyFirst, got)
		}
		if q.Len() != 999 {
			t.Errorf("Len %d, want 999", q.Len())
		}
	}
	// Among many namespaces, each waits for one turn of every other.
	q := newFairQueue()
	for _, k := range keys("noisy", 1000) {
		q.Push(k)
	}
	for i := range 10 {
		q.Push(key(fmt.Sprint("quiet-", i), "only"))
	}
	popped := make([]types.NamespacedName, 0, 22)
	for range 22 {
		popped = append(popped, q.Pop())
	}
	for i := range 10 {
		if !slices.Contains(popped, key(fmt.Sprint("quiet-", i), "only")) {
			t.Errorf("quiet-%d not among the first 22 pops: %v", i, popped)
		}
	}
}

// Syncs in flight count: a namespace whose objects are being synced
// yields the next turns to namespaces with fewer in flight, and gets its
// turn back as they end.
func TestFairQueueInFlight(t *testing.T) {
	q := newFairQueue()
	for _, k := range keys("slow", 6) {
		q.Push(k)
	}
	// Three of slow's objects sync (three workers hold them).
	for i := range 3 {
		if got := q.Pop(); got != key("slow", fmt.Sprint(i)) {
			t.Fatalf("pop %d: %v", i, got)
		}
	}
	for _, k := range keys("quick", 4) {
		q.Push(k)
	}
	// quick has none in flight: it is served until it has as many as
	// slow, then they alternate (each pop here stays in flight).
	want := []types.NamespacedName{key("quick", "0"), key("quick", "1"), key("quick", "2"), key("slow", "3"), key("quick", "3"), key("slow", "4")}
	var got []types.NamespacedName
	for range want {
		got = append(got, q.Pop())
	}
	if !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v", got, want)
	}
	// One of quick's ends: quick (3 in flight, nothing waiting) is no
	// lane; slow's last item is next.
	q.done(key("quick", "0"))
	if got := q.Pop(); got != key("slow", "5") {
		t.Errorf("popped %v, want slow/5", got)
	}
	// Every sync ends: no count is kept.
	for _, k := range append(keys("slow", 6), keys("quick", 4)[1:]...) {
		q.done(k)
	}
	q.done(key("never", "popped")) // a Done without a Pop changes nothing
	if len(q.inFlight) != 0 || len(q.lanes) != 0 || q.Len() != 0 {
		t.Errorf("left: in flight %v, lanes %v, len %d", q.inFlight, q.lanes, q.Len())
	}
}

// The case turns alone lost, under client-go's workqueue with 4 workers: a
// namespace whose syncs block holds every worker, another's quick objects
// arrive; when one slow sync ends, the worker it frees syncs every quick
// object before it takes another slow one. (Served in turns, it took one
// quick object and then a slow one that blocked it; first come, first
// served, the quick objects waited behind every slow one queued.)
func TestFairWorkqueueSlowNamespace(t *testing.T) {
	q := newWorkqueue("")
	defer q.ShutDown()
	release := make(chan struct{})
	slowStarted := make(chan struct{}, 100)
	quickDone := make(chan types.NamespacedName, 10)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer q.ShutDown()
	defer close(release)
	for range 4 {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				if k.Namespace == "slow" {
					slowStarted <- struct{}{}
					<-release // a slow sync: held until the test lets one end
				} else {
					quickDone <- k
				}
				q.Done(k)
			}
		})
	}
	for _, k := range keys("slow", 100) {
		q.Add(k)
	}
	// Every worker holds a slow object: 96 wait.
	for i := range 4 {
		select {
		case <-slowStarted:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 4 workers took a slow object", i)
		}
	}
	if n := q.Len(); n != 96 {
		t.Fatalf("%d waiting, want 96", n)
	}
	for _, k := range keys("quick", 10) {
		q.Add(k)
	}
	release <- struct{}{} // one slow sync ends
	for i := range 10 {
		select {
		case <-quickDone:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 10 quick objects synced after one slow sync ended", i)
		}
	}
}

// Lanes and their arrays are released: after any history, the memory held
// follows the items waiting, not the most that ever waited.
func TestFairQueueReleasesLanes(t *testing.T) {
	q := newFairQueue()
	for round := range 3 {
		for i := range 500 {
			q.Push(key(fmt.Sprintf("ns-%d-%d", round, i), "x"))
		}
		for _, k := range keys("big", 10000) {
			q.Push(k)
		}
		if got := len(drain(q)); got != 10500 {
			t.Fatalf("round %d: drained %d", round, got)
		}
		if len(q.lanes) != 0 || q.turns.len() != 0 || cap(q.turns.items) > keptCapacity {
			t.Errorf("round %d: %d lanes, %d turns (capacity %d) left", round, len(q.lanes), q.turns.len(), cap(q.turns.items))
		}
	}
	// A lane that held many keeps an array of about what it holds.
	for _, k := range keys("big", 10000) {
		q.Push(k)
	}
	for range 9990 {
		q.Pop()
	}
	if c := cap(q.lanes["big"].items); c > 4*keptCapacity {
		t.Errorf("a lane with 10 items waiting holds an array of %d", c)
	}
	if got := drain(q); !slices.Equal(got, keys("big", 10000)[9990:]) {
		t.Errorf("the last items %v", got)
	}
}

// The fifo keeps order through its compactions.
func TestFIFO(t *testing.T) {
	var f fifo[int]
	next, want := 0, 0
	for round := range 200 {
		for range round%7 + 1 {
			f.push(next)
			next++
		}
		for range round % 5 {
			if f.len() == 0 {
				break
			}
			if got := f.pop(); got != want {
				t.Fatalf("popped %d, want %d", got, want)
			}
			want++
		}
	}
	for f.len() > 0 {
		if got := f.pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Errorf("popped %d of %d", want, next)
	}
}

// Under client-go's workqueue, as the Syncer builds it: an item added
// while queued is queued once (Touch), one added while processed is
// queued again when Done, Len counts the items waiting, and the order is
// fair. Run with -race: workers get and finish items concurrently.
func TestFairWorkqueueSemantics(t *testing.T) {
	q := newWorkqueue("")
	defer q.ShutDown()
	for _, k := range keys("noisy", 100) {
		q.Add(k)
	}
	q.Add(key("noisy", "0")) // queued already: Touch, not a second item
	q.Add(key("quiet", "a"))
	if q.Len() != 101 {
		t.Fatalf("Len %d, want 101", q.Len())
	}
	first, _ := q.Get()
	second, _ := q.Get()
	if first != key("noisy", "0") || second != key("quiet", "a") {
		t.Errorf("first gets %v %v, want noisy/0 then quiet/a", first, second)
	}
	// Added while processing: queued again once it is done, not before.
	q.Add(first)
	if q.Len() != 99 {
		t.Errorf("Len %d while noisy/0 is processed and dirty, want 99", q.Len())
	}
	q.Done(first)
	q.Done(second)
	if q.Len() != 100 {
		t.Errorf("Len %d after Done, want 100", q.Len())
	}

	// Concurrent workers see each item once per Add.
	var mu sync.Mutex
	seen := map[types.NamespacedName]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				seen[k]++
				mu.Unlock()
				q.Done(k)
			}
		})
	}
	for i := range 50 {
		q.Add(key(fmt.Sprint("more-", i%5), fmt.Sprint(i)))
	}
	q.ShutDownWithDrain()
	wg.Wait()
	if len(seen) != 150 {
		t.Errorf("%d distinct items processed, want 150", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%v processed %d times", k, n)
		}
	}
}

// The queue keeps its name's workqueue_* series (controller-runtime's
// registry, as the konnector serves them): adds and depth count as before.
//
// The series are process-global: each run (-count) has a queue name of its
// own, so that its counts start at 0.
func TestFairWorkqueueMetrics(t *testing.T) {
	queue := fmt.Sprintf("fairqueue-test-%d/Widget.example.org", metricRuns.Add(1))
	q := newWorkqueue(queue)
	defer q.ShutDown()
	for _, k := range append(keys("a", 3), keys("b", 2)...) {
		q.Add(k)
	}
	q.Add(key("a", "0")) // queued already: not counted again
	series := func(name string) float64 {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if f.GetName() == name && l.GetName() == "name" && l.GetValue() == queue {
						return m.GetCounter().GetValue() + m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("no %s series for the queue", name)
		return 0
	}
	if adds, depth := series("workqueue_adds_total"), series("workqueue_depth"); adds != 5 || depth != 5 {
		t.Errorf("workqueue_adds_total %v, workqueue_depth %v; want 5 and 5", adds, depth)
	}
}

var _ workqueue.Queue[types.NamespacedName] = newFairQueue()

// metricRuns numbers the runs of the tests that assert process-global
// metric series, for label values of their own.
var metricRuns atomic.Int64
