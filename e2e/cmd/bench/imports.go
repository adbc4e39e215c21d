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
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// ImportRun is one --import run: n provider objects that exist before the
// konnector connects, imported (docs/import.md).
type ImportRun struct {
	N int `json:"n"`
	// ImportS is from starting the konnector until every object is on the
	// consumer; the rate is n over it.
	ImportS     float64 `json:"import_s"`
	ImportPerS  float64 `json:"import_per_s"`
	StartupS    float64 `json:"startup_s"`
	WritesPerOb float64 `json:"consumer_writes_per_object"`
	// ProviderWrites are writes on the provider while importing (0: import
	// reads the provider only).
	ProviderWrites int     `json:"provider_writes"`
	RestartWrites  int     `json:"restart_writes"`
	RestartSyncedS float64 `json:"restart_synced_s"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	CPUSecondsPerK float64 `json:"cpu_seconds_per_1000"`
}

// runImports is the --import mode: for each size, a fresh pair whose
// provider holds n Widgets (no status) in the Namespace isolation
// namespace at canonical names, spread over 10 consumer namespaces; the
// konnector connects with providerObjects: Import; measured: the time
// until all n are on the consumer, the consumer writes per object, the
// provider writes, and a restart's writes.
func runImports(sizes, jsonOut string, qps float32, burst int, bin string, fsync bool, keep string) error {
	var runs []ImportRun
	for _, s := range strings.Split(sizes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 {
			return fmt.Errorf("bad --import value %q", s)
		}
		fmt.Fprintf(os.Stderr, "bench: import N=%d ...\n", n)
		r, err := importRun(n, qps, burst, bin, fsync, keep)
		if err != nil {
			return fmt.Errorf("import run with N=%d: %w", n, err)
		}
		runs = append(runs, r)
	}
	fmt.Printf("\nImport of provider objects that exist at connect time (docs/import.md), Namespace isolation, provider QPS %.0f, etcd fsync %v\n", qps, fsync)
	fmt.Printf("%8s %10s %10s %10s %14s %14s %14s %12s %10s %12s\n", "N", "import s", "objects/s", "startup s", "writes/object", "provider wr.", "restart wr.", "restart s", "RSS MiB", "CPU s/1000")
	for _, r := range runs {
		fmt.Printf("%8d %10.1f %10.0f %10.1f %14.2f %14d %14d %12.1f %10.0f %12.2f\n", r.N, r.ImportS, r.ImportPerS, r.StartupS, r.WritesPerOb,
			r.ProviderWrites, r.RestartWrites, r.RestartSyncedS, r.PeakRSSMiB, r.CPUSecondsPerK)
	}
	if jsonOut != "" {
		data, _ := json.MarshalIndent(map[string]any{"imports": runs}, "", "  ")
		return os.WriteFile(jsonOut, data, 0o644)
	}
	return nil
}

func importRun(n int, qps float32, burst int, bin string, fsync bool, keep string) (ImportRun, error) {
	r := ImportRun{N: n}
	ctx := context.Background()
	dir := filepath.Join(keep, fmt.Sprintf("import-%d", n))
	if keep == "" {
		d, err := os.MkdirTemp("", "kbind-bench-import-")
		if err != nil {
			return r, err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	g := gvrs[0]
	kind := strings.ToUpper(g.Resource[:1]) + strings.TrimSuffix(g.Resource[1:], "s")
	opts := testenv.PairOptions{Dir: dir, ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD(g.Resource, strings.TrimSuffix(g.Resource, "s"), kind, g.Group, apiextensionsv1.NamespaceScoped, true)}}
	if !fsync {
		opts.EtcdArgs = map[string][]string{"unsafe-no-fsync": {"true"}}
	}
	pair, err := testenv.StartPair(opts)
	if err != nil {
		return r, err
	}
	defer pair.Stop()
	fast := func(c *rest.Config) dynamic.Interface {
		c = rest.CopyConfig(c)
		c.QPS, c.Burst = 2000, 4000
		return dynamic.NewForConfigOrDie(c)
	}
	b := &bench{pair: pair, konnectorBin: bin, qps: qps, burst: burst, workers: 4, consumer: fast(pair.Consumer.Config), provider: fast(pair.Provider.Config)}
	if b.log, err = os.Create(filepath.Join(dir, "konnector.log")); err != nil {
		return r, err
	}
	defer b.stopKonnector(syscall.SIGTERM)

	// The provider's objects, before anything connects.
	pcs := kubernetes.NewForConfigOrDie(pair.Provider.Config)
	if _, err := pcs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchTenant}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	keys := make([]key, 0, n)
	for i := 0; i < n; i++ {
		keys = append(keys, key{gvr: g, ns: benchTenant, name: fmt.Sprintf("imp-%d.obj-%d", i%namespaces, i)})
	}
	if _, err := createAll(ctx, b.provider, func(g schema.GroupVersionResource) schema.GroupVersionResource { return g }, keys, 0); err != nil {
		return r, fmt.Errorf("creating the provider's objects: %w", err)
	}
	if err := ensureNamespaces(ctx, pair.Consumer.Config, "imp"); err != nil {
		return r, err
	}
	cs := kubernetes.NewForConfigOrDie(pair.Consumer.Config)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kbind"}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	manifest := enginetest.ConnectionManifestWith("provider", "provider", pair.Provider.Kubeconfig, "  isolation: {mode: Namespace, namespace: "+benchTenant+"}\n") + `---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: bench}
spec:
  connectionRef: {name: provider}
  apis: [{name: ` + g.Resource + "." + g.Group + `, providerObjects: Import}]
`
	file := filepath.Join(dir, "setup.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		return r, err
	}
	if out, err := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "apply", "-f", file); err != nil {
		return r, fmt.Errorf("%w: %s", err, out)
	}

	// Every provider write from now on is counted.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	providerWrites := newRecorder()
	none := func(watch.EventType, *unstructured.Unstructured) bool { return false }
	if err := providerWrites.watch(wctx, b.provider, g, none); err != nil {
		return r, err
	}
	start := time.Now()
	if err := b.startKonnector(); err != nil {
		return r, err
	}
	// The consumer API exists once the konnector has made its CRD: every
	// consumer write of it is counted from its first object on.
	consumerWrites, err := watchFromTheStart(wctx, b.consumer, g)
	if err != nil {
		return r, err
	}
	if out, err := testenv.Kubectl(ctx, pair.KubeconfigPath, "--context=consumer", "wait", "--for=condition=Synced", "clusterbinding/bench", "--timeout=300s"); err != nil {
		return r, fmt.Errorf("%w: %s", err, out)
	}
	r.StartupS = time.Since(start).Seconds()
	if err := waitFor(10*time.Minute+time.Duration(n)*50*time.Millisecond, fmt.Sprintf("%d objects imported", n), func() bool {
		b.sampleRSS()
		return consumerWrites.count("/imp-") >= n
	}); err != nil {
		return r, fmt.Errorf("%w (%d imported)", err, consumerWrites.count("/imp-"))
	}
	r.ImportS = time.Since(start).Seconds()
	r.ImportPerS = float64(n) / r.ImportS
	cpu, err := scrapeGauge(b.metricsAddr, "process_cpu_seconds_total")
	if err != nil {
		return r, err
	}
	r.CPUSecondsPerK = cpu / float64(n) * 1000
	// Late writes (a second write per object) would show within seconds.
	time.Sleep(5 * time.Second)
	r.WritesPerOb = float64(consumerWrites.writeCount()) / float64(n)
	r.ProviderWrites = providerWrites.writeCount()

	// A restart writes nothing: every copy holds what the provider says.
	b.stopKonnector(syscall.SIGKILL)
	restart, err := b.countWritesOf(wctx, g)
	if err != nil {
		return r, err
	}
	restartStart := time.Now()
	if err := b.startKonnector(); err != nil {
		return r, err
	}
	r.RestartSyncedS = -1
	if err := waitFor(2*time.Minute, "the restarted konnector synced", func() bool {
		ready, depth, err := syncedState(b.metricsAddr, g.Group)
		return err == nil && ready == 1 && depth == 0
	}); err == nil {
		r.RestartSyncedS = time.Since(restartStart).Seconds()
	}
	time.Sleep(time.Until(restartStart.Add(30 * time.Second)))
	b.sampleRSS()
	r.RestartWrites = restart.writeCount()
	r.PeakRSSMiB = b.peakRSS
	return r, nil
}

// countWritesOf counts, from now on, every write of API g on both sides.
func (b *bench) countWritesOf(ctx context.Context, g schema.GroupVersionResource) (*recorder, error) {
	rec := newRecorder()
	none := func(watch.EventType, *unstructured.Unstructured) bool { return false }
	for _, c := range []dynamic.Interface{b.consumer, b.provider} {
		if err := rec.watch(ctx, c, g, none); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// watchFromTheStart waits until API g is served by c, then records every
// write of it: the objects that exist already when it is first listed count
// as one write each (their creation), and each watch event after as one.
// An object counts as seen (count) once it exists.
func watchFromTheStart(ctx context.Context, c dynamic.Interface, g schema.GroupVersionResource) (*recorder, error) {
	var list *unstructured.UnstructuredList
	if err := waitFor(5*time.Minute, g.Resource+" served on the consumer", func() bool {
		var err error
		list, err = c.Resource(g).List(ctx, metav1.ListOptions{})
		return err == nil
	}); err != nil {
		return nil, err
	}
	rec := newRecorder()
	keyOf := func(u *unstructured.Unstructured) string {
		return g.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	now := time.Now()
	for i := range list.Items {
		rec.seen[keyOf(&list.Items[i])] = now
	}
	rec.writes = len(list.Items)
	w, err := c.Resource(g).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return nil, err
	}
	go rec.follow(w, func(t watch.EventType, u *unstructured.Unstructured) bool {
		return t == watch.Added && u.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider
	}, keyOf)
	return rec, nil
}
