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

package hostile_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// spreadNamespaces is how many consumer namespaces hold one Spread each.
const spreadNamespaces = 10000

// spreadWorkers bounds the test's own parallel writes.
const spreadWorkers = 12

var spread = schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1alpha1", Kind: "Spread"}

func spreadNamespace(i int) string { return fmt.Sprintf("spread-%05d", i) }

// bulkClient is a client for the test's own bulk writes, with an explicit
// rate limit of its own (not the engine's).
func (env *tenant) bulkClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parallel runs fn for 0..n-1 on spreadWorkers workers and fails the test
// with the first error.
func parallel(t *testing.T, what string, n int, fn func(i int) error) time.Duration {
	t.Helper()
	start := time.Now()
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < spreadWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, fmt.Errorf("%s %d: %w", what, i, err))
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// pollEvery is EventuallyWithin for checks that list thousands of objects:
// it looks every interval, not every 100 ms.
func pollEvery(t *testing.T, timeout, interval time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		select {
		case <-time.After(interval):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// countSpreads counts the Spreads on c (metadata only), and those whose
// status phase is phase when phase is not "" (full objects).
func countSpreads(ctx context.Context, c client.Client, phase string) (int, error) {
	if phase == "" {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(spread.GroupVersion().WithKind("SpreadList"))
		if err := c.List(ctx, list); err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(spread.GroupVersion().WithKind("SpreadList"))
	if err := c.List(ctx, list); err != nil {
		return 0, err
	}
	n := 0
	for _, u := range list.Items {
		if p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); p == phase {
			n++
		}
	}
	return n, nil
}

// One object in each of 10000 consumer namespaces: every one gets its
// provider copy (in a provider namespace kbind creates) and its status
// back, the binding stays Ready and Synced with every object counted,
// another binding keeps syncing meanwhile, and deleting them all deletes
// every provider copy and releases every finalizer. Namespaces are not
// deleted: without kube-controller-manager they never finish.
func TestTenThousandNamespaces(t *testing.T) {
	// Minutes for one property (the scale): make test-long runs it. Not
	// parallel: it loads both API servers as no other test may meanwhile.
	testenv.Long(t)
	env := newTenant(t)
	ctx := context.Background()
	start := time.Now()
	env.ready(t, "spreads")
	enginetest.WaitCondition(t, env.Consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "spreads"}},
		kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	consumer, provider := env.bulkClient(t, env.Pair.Consumer.Config), env.bulkClient(t, env.Pair.Provider.Config)
	n := spreadNamespaces
	phases := []string{}
	phase := func(name string, d time.Duration) {
		phases = append(phases, fmt.Sprintf("%-40s %8s", name, d.Round(100*time.Millisecond)))
		t.Logf("%s: %s", name, d.Round(100*time.Millisecond))
	}

	stopWatching := env.watchBinding(ctx, "spreads")
	before := env.providerRequests(t)

	phase("create the consumer namespaces", parallel(t, "namespace", n, func(i int) error {
		return consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spreadNamespace(i)}})
	}))
	created := time.Now()
	phase("create one Spread in each", parallel(t, "spread", n, func(i int) error {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"index": int64(i)}}}
		u.SetGroupVersionKind(spread)
		u.SetNamespace(spreadNamespace(i))
		u.SetName("s")
		return consumer.Create(ctx, u)
	}))

	// Another binding syncs while the Spreads are still on their way.
	other := time.Now()
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}, "beside-spreads", map[string]any{"size": int64(4)}))
	phase("a Widget round trip meanwhile", time.Since(other))

	phase("every provider copy exists", pollEvery(t, 4*time.Minute, 2*time.Second, "every provider copy", func() error {
		got, err := countSpreads(ctx, provider, "")
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("%d of %d provider copies", got, n)
		}
		return nil
	}))
	phase("  (from the first consumer create)", time.Since(created))
	// Each copy in its own namespace, with its own object's spec.
	copies := &unstructured.UnstructuredList{}
	copies.SetGroupVersionKind(spread.GroupVersion().WithKind("SpreadList"))
	if err := provider.List(ctx, copies); err != nil {
		t.Fatal(err)
	}
	for _, c := range copies.Items {
		index, _, _ := unstructured.NestedInt64(c.Object, "spec", "index")
		if c.GetNamespace() != spreadNamespace(int(index)) || c.GetName() != "s" {
			t.Errorf("the provider copy %s/%s has the spec of %s/s", c.GetNamespace(), c.GetName(), spreadNamespace(int(index)))
		}
	}

	var namespaces corev1.NamespaceList
	if err := provider.List(ctx, &namespaces, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		t.Fatal(err)
	}
	if len(namespaces.Items) < n {
		t.Errorf("kbind created %d provider namespaces, want at least %d", len(namespaces.Items), n)
	}

	// A merge patch of the status alone: one request per object.
	readyStatus := client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Ready"}}`))
	phase("set every provider status", parallel(t, "status", n, func(i int) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(spread)
		u.SetNamespace(spreadNamespace(i))
		u.SetName("s")
		return provider.Status().Patch(ctx, u, readyStatus)
	}))
	phase("every status down", pollEvery(t, 4*time.Minute, 2*time.Second, "every status down", func() error {
		got, err := countSpreads(ctx, consumer, "Ready")
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("%d of %d consumer objects have their status", got, n)
		}
		return nil
	}))

	phase("the binding counts every object", pollEvery(t, time.Minute, time.Second, "the binding's counts", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "spreads"}, cb); err != nil {
			return err
		}
		for _, typ := range []kbindv1alpha1.ConditionType{kbindv1alpha1.ConditionReady, kbindv1alpha1.ConditionSynced} {
			if c := meta.FindStatusCondition(cb.Status.Conditions, string(typ)); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s: %+v", typ, c)
			}
		}
		if len(cb.Status.BoundAPIs) != 1 || cb.Status.BoundAPIs[0].Instances == nil {
			return fmt.Errorf("bound APIs %+v", cb.Status.BoundAPIs)
		}
		if c := *cb.Status.BoundAPIs[0].Instances; c != (kbindv1alpha1.InstanceCounts{Total: int32(n), Synced: int32(n)}) {
			return fmt.Errorf("instances %+v", c)
		}
		return nil
	}))

	deleting := time.Now()
	phase("delete every Spread", parallel(t, "delete", n, func(i int) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(spread)
		u.SetNamespace(spreadNamespace(i))
		u.SetName("s")
		return consumer.Delete(ctx, u)
	}))
	phase("every provider copy gone", pollEvery(t, 4*time.Minute, 2*time.Second, "every provider copy gone", func() error {
		got, err := countSpreads(ctx, provider, "")
		if err != nil {
			return err
		}
		if got != 0 {
			return fmt.Errorf("%d provider copies left", got)
		}
		return nil
	}))
	phase("every consumer object gone", pollEvery(t, 3*time.Minute, 2*time.Second, "every consumer object gone", func() error {
		got, err := countSpreads(ctx, consumer, "")
		if err != nil {
			return err
		}
		if got != 0 {
			return fmt.Errorf("%d consumer objects left (finalizers not released)", got)
		}
		return nil
	}))
	phase("  (from the first delete)", time.Since(deleting))
	// What kbind asked of the provider: one namespace, one apply and one
	// delete per object, and (nearly) no GET confirming a deletion the
	// provider informer reported already.
	after := env.providerRequests(t)
	delta := map[string]int{}
	for k, v := range after {
		delta[k] = v - before[k]
	}
	t.Logf("provider requests for %d objects: namespaces POST %d, spreads APPLY %d, DELETE %d, GET %d",
		n, delta["namespaces POST"], delta["spreads APPLY"], delta["spreads DELETE"], delta["spreads GET"])
	if delta["spreads APPLY"] > n+n/20 || delta["spreads DELETE"] > n+n/20 || delta["spreads GET"] > n/20 {
		t.Errorf("more provider requests than one apply and one delete per object: %v", delta)
	}
	if lapses := stopWatching(); len(lapses) > 0 {
		t.Errorf("the binding was not Ready and Synced throughout: %d lapse(s), the first: %s", len(lapses), lapses[0])
	}
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}, "after-spreads", map[string]any{"size": int64(5)}))
	phase("total", time.Since(start))
	t.Logf("phases:\n%s", joinLines(phases))
}

// providerRequests counts the provider API server's requests on spreads
// and namespaces (no subresource) by "<resource> <verb>", from its
// apiserver_request_total metric.
func (env *tenant) providerRequests(t *testing.T) map[string]int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Pair.Provider.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the provider's metrics: %v", err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `subresource=""`) {
			continue
		}
		for _, resource := range []string{"spreads", "namespaces"} {
			if !strings.Contains(line, fmt.Sprintf("resource=%q", resource)) {
				continue
			}
			_, rest, _ := strings.Cut(line, `verb="`)
			verb, _, _ := strings.Cut(rest, `"`)
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			out[resource+" "+verb] += int(v)
		}
	}
	return out
}

// watchBinding reads the ClusterBinding name every second until stop is
// called, and stop returns every reading where it was not Ready=True and
// Synced=True.
func (env *tenant) watchBinding(ctx context.Context, name string) (stop func() []string) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []string)
	go func() {
		var lapses []string
		defer func() { done <- lapses }()
		for {
			cb := &kbindv1alpha1.ClusterBinding{}
			if err := env.Consumer.Get(ctx, client.ObjectKey{Name: name}, cb); err == nil {
				for _, typ := range []kbindv1alpha1.ConditionType{kbindv1alpha1.ConditionReady, kbindv1alpha1.ConditionSynced} {
					if c := meta.FindStatusCondition(cb.Status.Conditions, string(typ)); c == nil || c.Status != metav1.ConditionTrue {
						lapses = append(lapses, fmt.Sprintf("%s %s: %+v", time.Now().Format(time.TimeOnly), typ, c))
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() []string {
		cancel()
		return <-done
	}
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}
