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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// noisyOptions are the --noisy-neighbour flags.
type noisyOptions struct {
	konnector string
	qps       float32
	burst     int
	workers   int
	fsync     bool
	keep      string
	jsonOut   string
	profiles  string
	// items is the length of each attacker object's list; objects the
	// attacker objects; changes per second its writes; victims the
	// victim objects created one by one, every victimEvery, in each
	// window, each waited for at most victimWait.
	items, objects int
	// rules is the attacker Binding's up rules of noisyRule (32; 0 shows
	// what its objects cost without them).
	rules       int
	changes     float64
	victims     int
	victimEvery time.Duration
	victimWait  time.Duration
}

// NoisyRun is the --noisy-neighbour result.
type NoisyRun struct {
	Items   int `json:"items"`
	Objects int `json:"attacker_objects"`
	Rules   int `json:"rules"`
	// Idle and Attack are the victim's latencies, create accepted →
	// provider ADDED, without and with the attack.
	IdleP50Ms   float64 `json:"idle_p50_ms"`
	IdleMaxMs   float64 `json:"idle_max_ms"`
	AttackP50Ms float64 `json:"attack_p50_ms"`
	AttackMaxMs float64 `json:"attack_max_ms"`
	// AttackTimedOut are victim objects not on the provider within
	// victimWait under attack.
	AttackTimedOut int `json:"attack_timed_out"`
	// Changes are the attacker's object changes during the attack window,
	// and CPUSecondsPerChange the konnector's CPU over the window per
	// change.
	Changes             int     `json:"attacker_changes"`
	CPUSecondsPerChange float64 `json:"cpu_seconds_per_change"`
	// Failed are attacker objects with a MutationFailed Event, Copied
	// those with a copy on the provider, at the end.
	Failed int `json:"attacker_objects_failed"`
	Copied int `json:"attacker_objects_copied"`
}

// noisyRule is the attacker's rule, 32 times: a comprehension nested in
// one over a constant list, estimated at 8.4 million (the static limit is
// 10 million), the costliest kind a rule may be (engine/mutation
// worstRules).
const noisyRule = `[1, 2].all(y, object.spec.items.exists(x, x == -y))`

// maxItems is how many items of "1," fit an object etcd accepts (1.5 MiB
// with room for its metadata).
const maxItems = 700_000

// runNoisy is the --noisy-neighbour mode: one Connection admitting
// namespaced Bindings, a victim namespace whose Binding binds the API
// plainly, and an attacker namespace whose Binding carries 32 up rules of
// noisyRule over objects of items items it keeps changing. Measured: the
// victim's spec-up latency idle and under attack, and the konnector's CPU
// per attacker change.
func runNoisy(o noisyOptions) error {
	ctx := context.Background()
	dir, err := o.keep, os.MkdirAll(o.keep, 0o755)
	if o.keep == "" {
		dir, err = os.MkdirTemp("", "kbind-bench-noisy-")
		defer func() { _ = os.RemoveAll(dir) }()
	}
	if err != nil {
		return err
	}
	g := gvrs[0]
	kind := strings.ToUpper(g.Resource[:1]) + strings.TrimSuffix(g.Resource[1:], "s")
	opts := testenv.PairOptions{Dir: dir, ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD(g.Resource, strings.TrimSuffix(g.Resource, "s"), kind, g.Group, apiextensionsv1.NamespaceScoped, true)}}
	if !o.fsync {
		opts.EtcdArgs = map[string][]string{"unsafe-no-fsync": {"true"}}
	}
	pair, err := testenv.StartPair(opts)
	if err != nil {
		return err
	}
	defer pair.Stop()
	fast := func(c *rest.Config) dynamic.Interface {
		c = rest.CopyConfig(c)
		c.QPS, c.Burst = 2000, 4000
		return dynamic.NewForConfigOrDie(c)
	}
	b := &bench{pair: pair, konnectorBin: o.konnector, qps: o.qps, burst: o.burst, workers: o.workers,
		consumer: fast(pair.Consumer.Config), provider: fast(pair.Provider.Config)}
	if b.log, err = os.Create(filepath.Join(dir, "konnector.log")); err != nil {
		return err
	}
	// Killed, not stopped: a konnector whose workers evaluate the
	// attacker's rules under the API server's limits would finish them
	// first.
	defer b.stopKonnector(syscall.SIGKILL)
	if err := b.noisySetup(ctx, dir, o.rules); err != nil {
		return err
	}
	r := NoisyRun{Items: o.items, Objects: o.objects, Rules: o.rules}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The victim's namespace only: the attacker's objects (1.4 MiB each
	// when they reach the provider) would delay this watch, and the
	// measurement with it.
	up := newRecorder()
	if err := watchNamespace(wctx, up, b.provider, "noisy-victim"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: noisy neighbour: %d victim objects idle ...\n", o.victims)
	idle, _ := b.victimLatencies(ctx, up, "idle", o)
	r.IdleP50Ms, r.IdleMaxMs = median(idle), slices.Max(append(idle, 0))

	fmt.Fprintf(os.Stderr, "bench: noisy neighbour: %d attacker objects of %d items ...\n", o.objects, o.items)
	attacker := newAttacker(b.consumer, o)
	if err := attacker.create(ctx); err != nil {
		return err
	}
	cpuBefore, err := scrapeGauge(b.metricsAddr, "process_cpu_seconds_total")
	if err != nil {
		return err
	}
	requestsBefore, err := scrapeRequests(b.metricsAddr)
	if err != nil {
		return err
	}
	stopProfile := cpuProfile(b.pprofAddr, o.profiles, "noisy", 10*time.Second)
	defer stopProfile()
	stop := attacker.keepChanging(ctx)
	fmt.Fprintf(os.Stderr, "bench: noisy neighbour: %d victim objects under attack ...\n", o.victims)
	attack, timedOut := b.victimLatencies(ctx, up, "attack", o)
	r.Changes = stop()
	stopProfile()
	cpuAfter, err := scrapeGauge(b.metricsAddr, "process_cpu_seconds_total")
	if err != nil {
		return err
	}
	if verbose {
		if requestsAfter, err := scrapeRequests(b.metricsAddr); err == nil {
			fmt.Fprintf(os.Stderr, "bench: the konnector's requests during the attack (host method count): %s\n", requestsAfter.since(requestsBefore))
		}
		_ = scrapeMetrics(b.metricsAddr, func(line string) error {
			// The Syncer's queue since the konnector started: its syncs
			// and the time they took.
			queue := strings.Contains(line, `name="provider/`)
			kbind := strings.HasPrefix(line, "kbind_sync_duration_seconds_sum") || strings.HasPrefix(line, "kbind_sync_duration_seconds_count") || strings.HasPrefix(line, "kbind_syncs_total")
			if kbind || queue && (strings.HasPrefix(line, "workqueue_adds_total{") || strings.HasPrefix(line, "workqueue_work_duration_seconds_sum{") || strings.HasPrefix(line, "workqueue_work_duration_seconds_count{") || strings.HasPrefix(line, "workqueue_queue_duration_seconds_sum{")) {
				fmt.Fprintf(os.Stderr, "bench: since the konnector started: %s\n", line)
			}
			return nil
		})
	}
	r.AttackP50Ms, r.AttackMaxMs, r.AttackTimedOut = median(attack), slices.Max(append(attack, 0)), timedOut
	r.CPUSecondsPerChange = (cpuAfter - cpuBefore) / float64(max(r.Changes, 1))
	r.Failed, r.Copied = b.attackerOutcome(ctx, o)

	fmt.Printf("\nkbind bench --noisy-neighbour: %d workers, provider QPS %.0f; the attacker's Binding has %d up rules %s; %d objects of %d items, changed %.1f times a second\n",
		o.workers, o.qps, o.rules, noisyRule, o.objects, o.items, o.changes)
	fmt.Printf("victim spec-up latency (create accepted → provider ADDED, %d objects one every %s): idle p50 %.0f ms, max %.0f ms; under attack p50 %.0f ms, max %.0f ms (%d not on the provider within %s); ratio of p50 %.2f\n",
		o.victims, o.victimEvery, r.IdleP50Ms, r.IdleMaxMs, r.AttackP50Ms, r.AttackMaxMs, r.AttackTimedOut, o.victimWait, r.AttackP50Ms/max(r.IdleP50Ms, 1))
	fmt.Printf("konnector CPU during the attack: %.3f CPU-s per attacker object change (%d changes)\n", r.CPUSecondsPerChange, r.Changes)
	fmt.Printf("attacker objects: %d with a MutationFailed Event, %d copied to the provider\n", r.Failed, r.Copied)
	if o.jsonOut != "" {
		data, _ := json.MarshalIndent(map[string]any{"noisy_neighbour": r}, "", "  ")
		return os.WriteFile(o.jsonOut, data, 0o644)
	}
	return nil
}

// noisySetup creates the namespaces, the Connection (admitting every
// namespace's Bindings), the victim's and the attacker's Bindings, starts
// the konnector and waits until all are Ready.
func (b *bench) noisySetup(ctx context.Context, dir string, n int) error {
	cs := kubernetes.NewForConfigOrDie(b.pair.Consumer.Config)
	for _, ns := range []string{"kbind", "noisy-victim", "noisy-attacker"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	api := gvrs[0].Resource + "." + gvrs[0].Group
	rules := ""
	if n > 0 {
		var up strings.Builder
		for i := range n {
			fmt.Fprintf(&up, "      - {path: .spec.r%d, expression: '%s'}\n", i, noisyRule)
		}
		rules = "    mutations:\n      up:\n" + up.String()
	}
	manifest := enginetest.ConnectionManifestWith("provider", "provider", b.pair.Provider.Kubeconfig, "  namespacedBindings: {from: All}\n") + `---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: victim, namespace: noisy-victim}
spec:
  connectionRef: {name: provider}
  apis: [{name: ` + api + `}]
`
	if n >= 0 {
		manifest += `---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: attacker, namespace: noisy-attacker}
spec:
  connectionRef: {name: provider}
  apis:
  - name: ` + api + `
` + rules
	}
	file := filepath.Join(dir, "setup.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		return err
	}
	if out, err := testenv.Kubectl(ctx, b.pair.KubeconfigPath, "--context=consumer", "apply", "-f", file); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if err := b.startKonnector(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"--context=consumer", "wait", "--for=condition=Ready", "connection", "--all", "--timeout=300s"},
		{"--context=consumer", "wait", "--for=condition=Ready", "bindings.core.kbind.io", "--all", "--all-namespaces", "--timeout=300s"},
	} {
		if out, err := testenv.Kubectl(ctx, b.pair.KubeconfigPath, args...); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
	}
	return nil
}

// victimLatencies creates o.victims victim objects named <window>-<i>, one
// every o.victimEvery, and returns the latency of each that reached the
// provider within o.victimWait, and how many did not.
func (b *bench) victimLatencies(ctx context.Context, up *recorder, window string, o noisyOptions) (ms []float64, timedOut int) {
	g := gvrs[0]
	created := map[string]time.Time{}
	for i := range o.victims {
		name := fmt.Sprintf("%s-%d", window, i)
		if _, err := b.consumer.Resource(g).Namespace("noisy-victim").Create(ctx, object(g, "noisy-victim", name), metav1.CreateOptions{}); err != nil {
			fmt.Fprintf(os.Stderr, "bench: creating %s: %v\n", name, err)
			continue
		}
		created[g.Resource+"/noisy-victim/"+name] = time.Now()
		time.Sleep(o.victimEvery)
	}
	deadline := time.Now().Add(o.victimWait)
	_ = waitFor(time.Until(deadline), "the victim's objects on the provider", func() bool {
		seen := up.times()
		for k := range created {
			if _, ok := seen[k]; !ok {
				return false
			}
		}
		return true
	})
	seen := up.times()
	for k, t0 := range created {
		if t1, ok := seen[k]; ok {
			ms = append(ms, float64(t1.Sub(t0).Microseconds())/1000)
		} else {
			timedOut++
		}
	}
	if verbose {
		slices.Sort(ms)
		fmt.Fprintf(os.Stderr, "bench: %s latencies (ms): %v\n", window, ms)
	}
	return ms, timedOut
}

// watchNamespace records, from now on, when each object of the bench API
// in namespace ns is ADDED on c.
func watchNamespace(ctx context.Context, rec *recorder, c dynamic.Interface, ns string) error {
	g := gvrs[0]
	list, err := c.Resource(g).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	w, err := c.Resource(g).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return err
	}
	go rec.follow(w, func(t watch.EventType, _ *unstructured.Unstructured) bool { return t == watch.Added },
		func(u *unstructured.Unstructured) string {
			return g.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
		})
	return nil
}

// attackerOutcome counts the attacker's objects with a MutationFailed
// Event and those with a copy on the provider.
func (b *bench) attackerOutcome(ctx context.Context, o noisyOptions) (failed, copied int) {
	cs := kubernetes.NewForConfigOrDie(b.pair.Consumer.Config)
	events, err := cs.CoreV1().Events("noisy-attacker").List(ctx, metav1.ListOptions{FieldSelector: "reason=MutationFailed"})
	if err == nil {
		names := map[string]bool{}
		for _, e := range events.Items {
			names[e.InvolvedObject.Name] = true
		}
		failed = len(names)
	}
	for i := range o.objects {
		if _, err := b.provider.Resource(gvrs[0]).Namespace("noisy-attacker").Get(ctx, fmt.Sprint("attacker-", i), metav1.GetOptions{}); err == nil {
			copied++
		}
	}
	return failed, copied
}

// attacker writes the attacker's objects.
type attacker struct {
	c dynamic.Interface
	o noisyOptions
	// items is the objects' list, built once.
	items []any
}

func newAttacker(c dynamic.Interface, o noisyOptions) *attacker {
	items := make([]any, o.items)
	for i := range items {
		items[i] = int64(1)
	}
	return &attacker{c: c, o: o, items: items}
}

// create creates the attacker's objects.
func (a *attacker) create(ctx context.Context) error {
	g := gvrs[0]
	for i := range a.o.objects {
		u := object(g, "noisy-attacker", fmt.Sprint("attacker-", i))
		u.Object["spec"] = map[string]any{"generation": int64(0), "items": a.items}
		if _, err := a.c.Resource(g).Namespace("noisy-attacker").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the attacker's objects: %w", err)
		}
	}
	return nil
}

// keepChanging changes the attacker's objects in turn, o.changes times a
// second, until the returned stop is called; stop returns the changes
// made.
func (a *attacker) keepChanging(ctx context.Context) (stop func() int) {
	var changes atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / a.o.changes))
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			name := fmt.Sprint("attacker-", n%a.o.objects)
			patch := fmt.Appendf(nil, `{"spec":{"generation":%d}}`, n)
			if _, err := a.c.Resource(gvrs[0]).Namespace("noisy-attacker").Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				changes.Add(1)
			}
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		return int(changes.Load())
	}
}

// median of ms, 0 when empty.
func median(ms []float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return s[len(s)/2]
}
