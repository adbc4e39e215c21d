package syncer

import (
	"fmt"
	"slices"
	"sync"
	"testing"

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
func TestFairWorkqueueMetrics(t *testing.T) {
	q := newWorkqueue("fairqueue-test/Widget.example.org")
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
					if f.GetName() == name && l.GetName() == "name" && l.GetValue() == "fairqueue-test/Widget.example.org" {
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
