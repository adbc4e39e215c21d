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

package backend_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/backendtest"
	"github.com/kbind/kbind/backend/reaper"
)

// logs collects every log line of the in-process backends.
var logs = &syncBuffer{}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// provider is the package's one provider API server, started by the
// first test that needs it and stopped by TestMain. Each test works in
// namespaces, with consumer cluster UIDs and cluster-scoped names of its
// own (newEnv), and its backend watches only its own namespaces
// (startBackend), so tests share it and run in parallel.
var provider = backendtest.NewShared()

// parallel is how many of the package's parallel tests run at once unless
// -test.parallel says otherwise. They spend their time waiting for the
// configured intervals (window, reap grace) on the backend's clock, not
// computing, so more of them than GOMAXPROCS (the default, 2 on a small
// CI machine) overlap their waits; each adds one in-process backend and a
// few polls to the shared API server.
const parallel = 16

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic(err)
		}
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintf(logs, "%s %s\n", prefix, args)
	}, funcr.Options{Verbosity: 1}))
	backendtest.Main(m, provider)
}

// window is the stale window of the tests' backends.
const window = 3 * time.Second

// settle is what an eventual-consistency poll waits on top of the
// configured intervals the awaited state depends on (window, reap
// interval, grace): API round trips, watch delivery and reconciles on a
// busy machine. Generous on purpose: a poll returns as soon as its state
// holds and logs how long that took, so a passing test never waits for it.
const settle = 30 * time.Second

// tests numbers the tests that take a share of the provider.
var tests atomic.Int64

// testEnv is one test's share of the package's provider API server: the
// namespaces it creates are prefixed with its id, its consumer cluster UIDs
// carry its number, its cluster-scoped objects its id, and its backends and
// dry runs log under its id.
type testEnv struct {
	*backendtest.Env
	id string // "t7": the prefix of its namespaces and names
	n  int64

	mu         sync.Mutex
	namespaces []string // created so far; what its backends watch
}

// newEnv hands the test its share of the provider, starting the provider
// when it is the first.
func newEnv(t *testing.T) *testEnv {
	t.Helper()
	n := tests.Add(1)
	env := &testEnv{Env: provider.Get(t), id: fmt.Sprintf("t%d", n), n: n}
	t.Logf("this test's namespaces and names start with %s-, its consumer cluster UIDs have %04x in the second group, its log lines %s", env.id, n, env.id)
	return env
}

// name is the test's own name for a namespace or cluster-scoped object.
func (e *testEnv) name(base string) string { return e.id + "-" + base }

// consumer is the test's consumer cluster UID for letter ("a", "b"...),
// e.g. aaaaaaaa-0007-4111-8111-aaaaaaaaaaaa for the seventh test.
func (e *testEnv) consumer(letter string) string {
	return fmt.Sprintf("%s-%04x-4111-8111-%s", strings.Repeat(letter, 8), e.n, strings.Repeat(letter, 12))
}

// Namespace creates the namespace name (from e.name) and records it for
// the test's backends to watch.
func (e *testEnv) Namespace(t testing.TB, name, consumer string) {
	t.Helper()
	e.watch(name)
	e.Env.Namespace(t, name, consumer)
}

// Create creates obj; a Namespace is recorded for the test's backends to
// watch.
func (e *testEnv) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if _, ok := obj.(*corev1.Namespace); ok {
		e.watch(obj.GetName())
	}
	e.Env.Create(t, obj)
}

func (e *testEnv) watch(namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.namespaces = append(e.namespaces, namespace)
}

// watched are the namespaces the test's backends watch.
func (e *testEnv) watched() map[string]cache.Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]cache.Config{}
	for _, ns := range e.namespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// logger is the logger of the test's backends, dry runs and reapers: its
// lines start with the test's id.
func (e *testEnv) logger(name ...string) logr.Logger {
	l := ctrl.Log.WithName(e.id)
	for _, n := range name {
		l = l.WithName(n)
	}
	return l
}

// logLines are the log lines of the test's backends, dry runs and
// reapers: those under its id, and those under no name (controller-runtime
// hands the Lease event handlers a context without the manager's logger)
// about one of its namespaces — a backend watches only its test's.
func (e *testEnv) logLines() []string {
	e.mu.Lock()
	namespaces := append([]string(nil), e.namespaces...)
	e.mu.Unlock()
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case line == e.id || strings.HasPrefix(line, e.id+" ") || strings.HasPrefix(line, e.id+"/"):
			out = append(out, line)
		case strings.HasPrefix(line, " "):
			for _, ns := range namespaces {
				if strings.Contains(line, `"namespace"="`+ns+`"`) {
					out = append(out, line)
					break
				}
			}
		}
	}
	return out
}

// logged reports whether some log line of the test's holds every fragment.
func (e *testEnv) logged(fragments ...string) bool {
next:
	for _, l := range e.logLines() {
		for _, f := range fragments {
			if !strings.Contains(l, f) {
				continue next
			}
		}
		return true
	}
	return false
}

// ownLines keeps the dry-run output lines about the test's consumers: the
// dry run judges every Lease of the shared provider, other tests' stale
// consumers too.
func (e *testEnv) ownLines(out string, consumers ...string) []string {
	var own []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, c := range consumers {
			if strings.HasSuffix(line, "(consumer "+c+")") {
				own = append(own, line)
				break
			}
		}
	}
	return own
}

// startBackend runs the backend's wiring in-process against env until the
// returned stop (also called at the end of the test). Its manager's cache
// watches only the test's namespaces (controller-runtime's
// DefaultNamespaces, set here on the test's manager; backend.Setup and
// ConfigureCache are the binary's): the binary judges every heartbeat Lease
// of its cluster, and a backend that saw other tests' Leases would judge
// and reap their consumers. Everything else — what a judged consumer's
// reaping lists and deletes — is cluster-wide, as in the binary; the
// consumer UIDs are the test's own.
func startBackend(t *testing.T, env *testEnv, opts backend.Options) (stop func()) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := backend.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	watched := env.watched()
	if len(watched) == 0 {
		t.Fatal("the test created no namespace: its backend would watch every namespace of the shared provider")
	}
	cacheOpts := cache.Options{DefaultNamespaces: watched}
	backend.ConfigureCache(&cacheOpts)
	logger := env.logger()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Cache: cacheOpts, Logger: logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Reap && opts.ReapGrace == 0 {
		// The grace period's own tests are in twophase_test.go.
		opts.ReapGrace = 500 * time.Millisecond
	}
	if _, err := backend.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), logger))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("backend: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// keepRenewing renews a Lease every interval until stopped, as a live
// konnector would.
func keepRenewing(t *testing.T, env *testEnv, namespace, name string, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				env.Renew(t, namespace, name)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func lease(t *testing.T, env *testEnv, namespace, name string) (*coordinationv1.Lease, error) {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, l)
	return l, err
}

func staleSince(t *testing.T, env *testEnv, namespace, name string) (string, bool) {
	t.Helper()
	l, err := lease(t, env, namespace, name)
	if err != nil {
		t.Fatalf("reading Lease %s/%s: %v", namespace, name, err)
	}
	v, ok := l.Annotations[kbindv1alpha1.StaleSinceAnnotation]
	return v, ok
}

// events returns the Events (events.k8s.io) about the named object with the
// reason.
func events(t *testing.T, env *testEnv, namespace, name, reason string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n++
		}
	}
	return n
}

// metricValue reads one sample from the controller-runtime registry.
func metricValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

func exists(t *testing.T, env *testEnv, obj client.Object, namespace, name string) (found, terminating bool) {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, false
	}
	if err != nil {
		t.Fatalf("reading %s/%s: %v", namespace, name, err)
	}
	return true, obj.GetDeletionTimestamp() != nil
}

func widget(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.org/v1alpha1")
	u.SetKind(kind)
	return u
}

func removeFinalizers(t *testing.T, env *testEnv, kind, namespace, name string) {
	t.Helper()
	u := widget(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	if err := env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
}

// TestLivenessReportsStaleLeases: report only. A stale Lease is marked and
// reported, the mark goes when it renews; a consumer with one stale and one
// live Lease is live; Leases that name no consumer are ignored and logged
// once; nothing is deleted. Not parallel: it asserts the absolute values of
// kbind_backend_consumers, a gauge every running backend of the process
// sets from the consumers it sees.
func TestLivenessReportsStaleLeases(t *testing.T) {
	env := newEnv(t)
	consumerA, consumerB := env.consumer("a"), env.consumer("b")
	kbind := env.name("kbind")
	env.Namespace(t, kbind, "")
	env.Lease(t, kbind, "a-1", consumerA)
	env.Lease(t, kbind, "b-1", consumerB)
	env.Lease(t, kbind, "b-2", consumerB) // never renewed: stale, but b-1 keeps B live
	stopB := keepRenewing(t, env, kbind, "b-1", 300*time.Millisecond)
	defer stopB()
	noUID := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: kbind, Name: "no-uid",
		Labels: map[string]string{kbindv1alpha1.ManagedLabel: "true"}}}
	env.Create(t, noUID)
	labelOnly := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: kbind, Name: "label-only",
		Labels: map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: env.consumer("c")}}}
	env.Create(t, labelOnly)

	started := time.Now()
	startBackend(t, env, backend.Options{StaleAfter: window})

	// Marked once the window passed on the backend's clock: window + settle.
	backendtest.Eventually(t, window+settle, "a-1 marked stale", func() error {
		if _, ok := staleSince(t, env, kbind, "a-1"); !ok {
			return fmt.Errorf("no %s annotation", kbindv1alpha1.StaleSinceAnnotation)
		}
		return nil
	})
	took := time.Since(started)
	t.Logf("a-1 marked stale after %s (window %s)", took, window)
	if took < window {
		t.Errorf("marked stale after %s, before the %s window passed on the backend's clock", took, window)
	}
	v, _ := staleSince(t, env, kbind, "a-1")
	ts, err := time.Parse(time.RFC3339, v)
	// The backend started after started, so the transition is at least a
	// window later; the annotation has whole seconds (1 s slack).
	if err != nil || ts.Before(started.Add(window-time.Second)) || ts.After(time.Now()) {
		t.Errorf("stale-since %q (%v) is not the backend's time of the transition", v, err)
	}
	backendtest.Eventually(t, settle, "b-2 marked stale", func() error {
		if _, ok := staleSince(t, env, kbind, "b-2"); !ok {
			return fmt.Errorf("b-2 not marked")
		}
		return nil
	})
	if _, ok := staleSince(t, env, kbind, "b-1"); ok {
		t.Error("the renewing Lease b-1 is marked stale")
	}
	for _, name := range []string{"no-uid", "label-only"} {
		if _, ok := staleSince(t, env, kbind, name); ok {
			t.Errorf("Lease %s without a consumer is marked", name)
		}
	}
	backendtest.Eventually(t, settle, "HeartbeatStale Event on a-1", func() error {
		if events(t, env, kbind, "a-1", "HeartbeatStale") == 0 {
			return fmt.Errorf("no Event")
		}
		return nil
	})
	backendtest.Eventually(t, settle, "consumer metrics", func() error {
		live, _ := metricValue(t, "kbind_backend_consumers", map[string]string{"state": "live"})
		stale, _ := metricValue(t, "kbind_backend_consumers", map[string]string{"state": "stale"})
		if live != 1 || stale != 1 {
			return fmt.Errorf("live=%v stale=%v, want 1 and 1 (B has one live Lease)", live, stale)
		}
		age, ok := metricValue(t, "kbind_backend_consumer_renewal_age_seconds", map[string]string{"consumer_cluster_uid": consumerA})
		if !ok || age < window.Seconds() {
			return fmt.Errorf("renewal age of A %v (%v)", age, ok)
		}
		return nil
	})

	// Touching the bad Leases does not repeat the log line (no hot loop).
	for i := range 3 {
		l, err := lease(t, env, kbind, "no-uid")
		if err != nil {
			t.Fatal(err)
		}
		l.Labels["touch"] = fmt.Sprint(i)
		if err := env.Client.Update(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	backendtest.Eventually(t, settle, "the bad Leases logged", func() error {
		for _, name := range []string{`"name"="no-uid"`, `"name"="label-only"`} {
			n := 0
			for _, line := range env.logLines() {
				if strings.Contains(line, "Ignoring a managed Lease that names no consumer cluster") && strings.Contains(line, name) {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("%s logged %d times, want once", name, n)
			}
		}
		return nil
	})

	// A renews: the mark goes, with an Event.
	env.Renew(t, kbind, "a-1")
	backendtest.Eventually(t, settle, "a-1 unmarked after renewing", func() error {
		if v, ok := staleSince(t, env, kbind, "a-1"); ok {
			return fmt.Errorf("still marked %s", v)
		}
		if events(t, env, kbind, "a-1", "HeartbeatRenewed") == 0 {
			return fmt.Errorf("no HeartbeatRenewed Event")
		}
		return nil
	})
	// Report only: nothing was deleted.
	for _, name := range []string{"a-1", "b-1", "b-2", "no-uid", "label-only"} {
		if _, err := lease(t, env, kbind, name); err != nil {
			t.Errorf("Lease %s: %v", name, err)
		}
	}
}

// worldOf names what world writes for one test: the consumers and the
// namespaces and the cluster-scoped Gadget, all the test's own.
type worldOf struct {
	consumerA, consumerB                string
	teamA, teamB, shared, kbind, gadget string
}

// world writes two simulated consumers: A stops heartbeating, B keeps on.
// It returns their names and the dry-run lines expected for A.
func world(t *testing.T, env *testEnv) (worldOf, []string) {
	t.Helper()
	w := worldOf{consumerA: env.consumer("a"), consumerB: env.consumer("b"),
		teamA: env.name("team-a"), teamB: env.name("team-b"), shared: env.name("shared"), kbind: env.name("kbind"), gadget: env.name("a-g1")}
	consumerA, consumerB := w.consumerA, w.consumerB
	env.Namespace(t, w.teamA, consumerA) // created by kbind for A
	env.Namespace(t, w.teamB, consumerB)
	env.Namespace(t, w.shared, "")       // the provider's own
	env.Namespace(t, w.kbind, consumerA) // A's heartbeat created it; B's Lease lives there too
	// What Kubernetes itself puts into every namespace does not keep it.
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.teamA, Name: "kube-root-ca.crt"}})

	env.Copy(t, "Widget", w.teamA, "a-w1", consumerA)
	env.Copy(t, "Widget", w.shared, "a-w2", consumerA, "example.org/cleanup") // a provider finalizer
	env.Copy(t, "Gadget", "", w.gadget, consumerA)
	env.Related(t, "ConfigMap", w.teamA, "a-cm", consumerA)
	env.Related(t, "Secret", w.teamA, "a-secret", consumerA)
	env.Lease(t, w.kbind, "a-1", consumerA)
	env.Lease(t, w.teamA, "a-2", consumerA)

	env.Copy(t, "Widget", w.teamB, "b-w1", consumerB)
	env.Copy(t, "Widget", w.shared, "b-w2", consumerB)
	env.Related(t, "ConfigMap", w.shared, "b-cm", consumerB)
	env.Lease(t, w.kbind, "b-1", consumerB)

	// Unmarked, partially marked and mixed objects are never touched.
	env.Copy(t, "Widget", w.shared, "plain", "")
	partial := widget("Widget")
	partial.SetNamespace(w.shared)
	partial.SetName("partial")
	partial.SetLabels(map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumerA})
	env.Create(t, partial)
	mixed := widget("Widget")
	mixed.SetNamespace(w.shared)
	mixed.SetName("mixed")
	mixed.SetLabels(map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumerA})
	mixed.SetAnnotations(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: consumerB, kbindv1alpha1.ConsumerObjectUIDAnnotation: "x"})
	env.Create(t, mixed)
	marked := kbindv1alpha1.NamespaceMarkers(consumerA) // no related-binding annotation
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.shared, Name: "user-secret", Labels: marked.Labels, Annotations: marked.Annotations}})

	return w, []string{
		"would delete gadgets.example.org " + w.gadget + " (consumer " + consumerA + ")",
		"would delete widgets.example.org " + w.shared + "/a-w2 (consumer " + consumerA + ")",
		"would delete widgets.example.org " + w.teamA + "/a-w1 (consumer " + consumerA + ")",
		"would delete configmaps " + w.teamA + "/a-cm (consumer " + consumerA + ")",
		"would delete secrets " + w.teamA + "/a-secret (consumer " + consumerA + ")",
		"would delete namespaces " + w.teamA + " (consumer " + consumerA + ")",
		"would delete leases.coordination.k8s.io " + w.kbind + "/a-1 (consumer " + consumerA + ")",
		"would delete leases.coordination.k8s.io " + w.teamA + "/a-2 (consumer " + consumerA + ")",
	}
}

// survivors are the objects reaping A must leave alone.
func checkSurvivors(t *testing.T, env *testEnv, w worldOf) {
	t.Helper()
	for _, o := range []struct{ kind, ns, name string }{
		{"Widget", w.teamB, "b-w1"}, {"Widget", w.shared, "b-w2"}, {"Widget", w.shared, "plain"},
		{"Widget", w.shared, "partial"}, {"Widget", w.shared, "mixed"},
	} {
		if found, terminating := exists(t, env, widget(o.kind), o.ns, o.name); !found || terminating {
			t.Errorf("%s %s/%s: found=%v terminating=%v, must be untouched", o.kind, o.ns, o.name, found, terminating)
		}
	}
	for _, o := range []struct {
		obj      client.Object
		ns, name string
	}{
		{&corev1.ConfigMap{}, w.shared, "b-cm"}, {&corev1.Secret{}, w.shared, "user-secret"},
		{&coordinationv1.Lease{}, w.kbind, "b-1"},
		{&corev1.Namespace{}, "", w.teamB}, {&corev1.Namespace{}, "", w.shared}, {&corev1.Namespace{}, "", w.kbind},
	} {
		if found, terminating := exists(t, env, o.obj, o.ns, o.name); !found || terminating {
			t.Errorf("%T %s/%s: found=%v terminating=%v, must be untouched", o.obj, o.ns, o.name, found, terminating)
		}
	}
}

// TestDryRunThenReap: the dry run lists exactly A's objects and changes
// nothing; the reaper then deletes them in order — copies (waiting for a
// provider finalizer), related copies, the namespace kbind created for A,
// A's Leases — and leaves B's, unmarked and foreign objects alone. Not
// parallel: it counts the Widget deletions of kbind_backend_deletions_total,
// whose labels (kind, result) every reaping test's deletions share.
func TestDryRunThenReap(t *testing.T) {
	env := newEnv(t)
	w, want := world(t, env)
	stopB := keepRenewing(t, env, w.kbind, "b-1", 300*time.Millisecond)
	defer stopB()

	var out bytes.Buffer
	started := time.Now()
	if err := backend.DryRun(log.IntoContext(context.Background(), env.logger("dry-run")), env.Config, backend.Options{StaleAfter: window}, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("dry run took %s; output:\n%s", time.Since(started), out.String())
	// The shared provider holds other tests' stale consumers too: exactly
	// A's lines, and none of B's, among the lines about this test's.
	if got := env.ownLines(out.String(), w.consumerA, w.consumerB); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dry run output about A and B:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, ok := staleSince(t, env, w.kbind, "a-1"); ok {
		t.Error("the dry run annotated a Lease")
	}
	if found, _ := exists(t, env, widget("Widget"), w.teamA, "a-w1"); !found {
		t.Error("the dry run deleted something")
	}

	deletedBefore, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Widget.example.org", "result": "deleted"})
	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})
	// A turns stale a window after the backend started, its copies are
	// marked and deleted a reap grace (500ms, startBackend) later:
	// window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "A's copies deleted, the finalized one terminating", func() error {
		if found, _ := exists(t, env, widget("Widget"), w.teamA, "a-w1"); found {
			return fmt.Errorf("a-w1 still there")
		}
		if found, _ := exists(t, env, widget("Gadget"), "", w.gadget); found {
			return fmt.Errorf("%s still there", w.gadget)
		}
		if _, terminating := exists(t, env, widget("Widget"), w.shared, "a-w2"); !terminating {
			return fmt.Errorf("a-w2 not terminating")
		}
		return nil
	})
	// The provider finalizer holds a-w2: the reaper waits and does not go on
	// to the related copies, nor strip the finalizer.
	backendtest.Consistently(t, time.Second, "reaping waits for the provider finalizer", func() error {
		if found, _ := exists(t, env, &corev1.ConfigMap{}, w.teamA, "a-cm"); !found {
			return fmt.Errorf("a-cm deleted while a copy was still finalizing")
		}
		u := widget("Widget")
		if found, _ := exists(t, env, u, w.shared, "a-w2"); !found || len(u.GetFinalizers()) != 1 {
			return fmt.Errorf("a-w2 found=%v finalizers=%v", found, u.GetFinalizers())
		}
		return nil
	})
	removeFinalizers(t, env, "Widget", w.shared, "a-w2")
	// The next pass, a reap interval later, goes on: settle.
	backendtest.Eventually(t, settle, "A reaped", func() error {
		for _, o := range []struct {
			obj      client.Object
			ns, name string
		}{
			{widget("Widget"), w.shared, "a-w2"}, {&corev1.ConfigMap{}, w.teamA, "a-cm"}, {&corev1.Secret{}, w.teamA, "a-secret"},
			{&coordinationv1.Lease{}, w.kbind, "a-1"}, {&coordinationv1.Lease{}, w.teamA, "a-2"},
		} {
			if found, _ := exists(t, env, o.obj, o.ns, o.name); found {
				return fmt.Errorf("%s/%s still there", o.ns, o.name)
			}
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if _, terminating := exists(t, env, &corev1.Namespace{}, "", w.teamA); !terminating {
			return fmt.Errorf("namespace %s not deleted", w.teamA)
		}
		return nil
	})
	checkSurvivors(t, env, w)
	// Events are asynchronous and best effort: one about an object in a
	// namespace that is being deleted may be refused by the API server, so
	// only those sent well before are required; none is ever sent twice.
	backendtest.Eventually(t, settle, "one Reaped Event per deletion", func() error {
		for _, o := range [][2]string{{w.shared, "a-w2"}, {w.teamA, "a-w1"}, {w.kbind, "a-1"}, {"default", w.teamA}} {
			if n := events(t, env, o[0], o[1], reaper.ReasonReaped); n != 1 {
				return fmt.Errorf("%d Reaped Events about %s/%s, want 1", n, o[0], o[1])
			}
		}
		return nil
	})
	for _, name := range []string{"a-cm", "a-secret", "a-2"} {
		if n := events(t, env, w.teamA, name, reaper.ReasonReaped); n > 1 {
			t.Errorf("%d Reaped Events about %s/%s", n, w.teamA, name)
		}
	}
	if v, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Widget.example.org", "result": "deleted"}); v-deletedBefore < 2 {
		t.Errorf("kbind_backend_deletions_total{Widget.example.org,deleted} went from %v to %v, want ≥ 2 more", deletedBefore, v)
	}
	if strings.Contains(logs.String(), "s3cr3t-never-logged") {
		t.Error("Secret data in the logs")
	}
}

// TestReapingStopsWhenTheConsumerRenews: a consumer that renews while its
// copies are being reaped keeps everything else.
func TestReapingStopsWhenTheConsumerRenews(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Copy(t, "Widget", teamA, "held", consumerA, "example.org/cleanup")
	env.Related(t, "ConfigMap", teamA, "a-cm", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	// Stale a window after the start, deleted a reap grace (500ms,
	// startBackend) after being marked: window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "the held copy terminating", func() error {
		if _, terminating := exists(t, env, widget("Widget"), teamA, "held"); !terminating {
			return fmt.Errorf("not terminating")
		}
		return nil
	})
	keepRenewing(t, env, kbind, "a-1", 300*time.Millisecond)
	backendtest.Eventually(t, settle, "a-1 unmarked", func() error {
		if _, ok := staleSince(t, env, kbind, "a-1"); ok {
			return fmt.Errorf("still marked")
		}
		return nil
	})
	removeFinalizers(t, env, "Widget", teamA, "held")
	backendtest.Consistently(t, 2*window, "the returned consumer keeps its related copy, namespace and Lease", func() error {
		if found, _ := exists(t, env, &corev1.ConfigMap{}, teamA, "a-cm"); !found {
			return fmt.Errorf("a-cm deleted")
		}
		if found, terminating := exists(t, env, &corev1.Namespace{}, "", teamA); !found || terminating {
			return fmt.Errorf("namespace %s deleted", teamA)
		}
		if _, err := lease(t, env, kbind, "a-1"); err != nil {
			return err
		}
		return nil
	})
}

// TestPassStopsBetweenDeletions: liveness is asked before every deletion and
// a renewal stops the pass at once.
func TestPassStopsBetweenDeletions(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	consumerA := env.consumer("a")
	kbind, teamA := env.name("kbind"), env.name("team-a")
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamA, "")
	for i := range 5 {
		env.Copy(t, "Widget", teamA, fmt.Sprintf("w%d", i), consumerA)
	}
	env.Lease(t, kbind, "a-1", consumerA)
	r, err := backend.NewReaper(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r.Grace, r.Clock = time.Minute, clk
	if v, err := r.Pass(context.Background(), consumerA, func() bool { return true }); err != nil || v != reaper.Waiting {
		t.Fatalf("first pass: %v %v, want waiting (marked)", v, err)
	}
	clk.SetTime(clk.Now().Add(r.Grace)) // the marks survived the grace period
	calls := 0
	v, err := r.Pass(context.Background(), consumerA, func() bool { calls++; return calls <= 2 })
	if err != nil || v != reaper.Stopped {
		t.Fatalf("pass: %v %v, want stopped", v, err)
	}
	var list unstructured.UnstructuredList
	list.SetAPIVersion("example.org/v1alpha1")
	list.SetKind("WidgetList")
	if err := env.Client.List(context.Background(), &list, client.InNamespace(teamA)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("%d Widgets left, want 3 (two deleted before the renewal)", len(list.Items))
	}
	if _, err := lease(t, env, kbind, "a-1"); err != nil {
		t.Errorf("the Lease: %v", err)
	}
}

// TestRestartMidReap: a backend stopped while a copy is finalizing leaves
// nothing to a fresh one but to wait and finish: nothing is deleted twice,
// nothing is missed, and the fresh clock does not reap early.
func TestRestartMidReap(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Copy(t, "Widget", teamA, "held", consumerA, "example.org/cleanup")
	env.Copy(t, "Widget", teamA, "w2", consumerA)
	env.Related(t, "ConfigMap", teamA, "a-cm", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	stop := startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	// Stale a window after the start, the copies deleted a reap grace
	// (500ms, startBackend) after being marked: window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "first backend mid-reap", func() error {
		if found, _ := exists(t, env, widget("Widget"), teamA, "w2"); found {
			return fmt.Errorf("w2 still there")
		}
		if _, terminating := exists(t, env, widget("Widget"), teamA, "held"); !terminating {
			return fmt.Errorf("held not terminating")
		}
		return nil
	})
	stop()
	restarted := time.Now()
	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	removeFinalizers(t, env, "Widget", teamA, "held")
	// The fresh backend's own window, then its passes: window + grace +
	// settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "the second backend finishes", func() error {
		if found, _ := exists(t, env, &corev1.ConfigMap{}, teamA, "a-cm"); found {
			return fmt.Errorf("a-cm still there")
		}
		if _, err := lease(t, env, kbind, "a-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Lease a-1: %v", err)
		}
		return nil
	})
	if took := time.Since(restarted); took < window {
		t.Errorf("the restarted backend reaped after %s, before its own %s window", took, window)
	}
	// held and w2 were deleted by the first backend, long before their
	// namespace: exactly one Event each proves nothing was deleted twice.
	backendtest.Eventually(t, settle, "one Reaped Event per deletion", func() error {
		for _, name := range []string{"held", "w2"} {
			if n := events(t, env, teamA, name, reaper.ReasonReaped); n != 1 {
				return fmt.Errorf("%d Reaped Events about %s, want exactly 1", n, name)
			}
		}
		return nil
	})
	if n := events(t, env, teamA, "a-cm", reaper.ReasonReaped); n > 1 {
		t.Errorf("%d Reaped Events about a-cm", n)
	}
}

// TestForbiddenKindIsReported: the reaper may not delete Gadgets; it says
// so, deletes everything else, and keeps the Lease so the consumer stays
// reported and retried.
func TestForbiddenKindIsReported(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	consumerA := env.consumer("a")
	kbind, teamA := env.name("kbind"), env.name("team-a")
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamA, "")
	g1 := env.name("g1") // cluster-scoped
	env.Copy(t, "Gadget", "", g1, consumerA)
	env.Copy(t, "Widget", teamA, "w1", consumerA)
	env.Related(t, "ConfigMap", teamA, "a-cm", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	// The user, its ClusterRole and binding are the test's own: RBAC
	// grants add up, another test's grants to the same user would leak.
	user := env.name("reaper")
	cfg := env.AddUser(t, user)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"list"}},
		{APIGroups: []string{"example.org"}, Resources: []string{"widgets"}, Verbs: []string{"get", "patch", "delete"}},
		// Related copies are marked and read again like copies.
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		env.Create(t, o)
	}
	r, err := backend.NewReaper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Grace = 500 * time.Millisecond
	// Only this test's reaper may not delete Gadgets: the forbidden
	// Gadget deletions counted meanwhile are its own.
	before, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Gadget.example.org", "result": "forbidden"})
	ctx := log.IntoContext(context.Background(), env.logger())
	var v reaper.Verdict
	// RBAC takes a moment, then the marks must survive the grace: grace +
	// settle.
	backendtest.Eventually(t, r.Grace+settle, "a blocked pass (RBAC takes a moment)", func() error {
		v, err = r.Pass(ctx, consumerA, func() bool { return true })
		if err != nil {
			return err
		}
		if v != reaper.Blocked {
			return fmt.Errorf("verdict %v", v)
		}
		return nil
	})
	if found, _ := exists(t, env, widget("Widget"), teamA, "w1"); found {
		t.Error("w1 not deleted")
	}
	if found, _ := exists(t, env, &corev1.ConfigMap{}, teamA, "a-cm"); found {
		t.Error("a-cm not deleted")
	}
	if found, _ := exists(t, env, widget("Gadget"), "", g1); !found {
		t.Error("g1 deleted without permission?")
	}
	if _, err := lease(t, env, kbind, "a-1"); err != nil {
		t.Errorf("the Lease must stay while something could not be deleted: %v", err)
	}
	if after, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Gadget.example.org", "result": "forbidden"}); after <= before {
		t.Errorf("forbidden deletions of Gadgets not counted (%v → %v)", before, after)
	}
	// The Gadget may not even be marked (phase 1 of reaping): refused too.
	if !env.logged("Marking a copy of a stale consumer failed") {
		t.Error("the refusal was not logged")
	}
}

// apiService registers the aggregated API broken.example.org/v1, served by
// a Service that does not exist: the aggregator reports the group version
// stale in discovery, and client-go's ServerPreferredResources returns an
// ErrGroupDiscoveryFailed naming it, as with a real aggregated API that is
// down.
func apiService() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.broken.example.org"},
		"spec": map[string]any{
			"group": "broken.example.org", "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": "default", "name": "nothing-serves-this", "port": int64(443)},
		},
	}}
}

// TestUndiscoverableGroupKeepsNamespacesAndLeases: while an aggregated API
// is down, its objects cannot be listed, so a namespace kbind created for a
// stale consumer cannot be proven empty (deleting it would let the namespace
// controller delete whatever that API holds there) and the consumer's
// copies of that API are unknown. The reaper reaps what it can see, keeps
// the namespace and the Lease, and the dry run says so and why; once the
// API is gone from discovery, reaping finishes. Not parallel: while the
// broken APIService exists, discovery fails for every reaper and dry run
// on the shared provider.
func TestUndiscoverableGroupKeepsNamespacesAndLeases(t *testing.T) {
	env := newEnv(t)
	consumerA := env.consumer("a")
	kbind, teamA := env.name("kbind"), env.name("team-a")
	ctx := context.Background()
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamA, consumerA)
	env.Copy(t, "Widget", teamA, "a-w1", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	broken := apiService()
	env.Create(t, broken)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, settle, "discovery reports broken.example.org/v1 failed", func() error {
		_, err := dc.ServerPreferredResources()
		groups, ok := discovery.GroupDiscoveryFailedErrorGroups(err)
		if _, failed := groups[schema.GroupVersion{Group: "broken.example.org", Version: "v1"}]; !ok || !failed {
			return fmt.Errorf("discovery error %v", err)
		}
		return nil
	})

	var out bytes.Buffer
	if err := backend.DryRun(log.IntoContext(ctx, env.logger("dry-run")), env.Config, backend.Options{StaleAfter: window}, &out); err != nil {
		t.Fatal(err)
	}
	// The shared provider holds other tests' stale consumers too: exactly
	// this line about A.
	if got, want := strings.Join(env.ownLines(out.String(), consumerA), "\n"), "would delete widgets.example.org "+teamA+"/a-w1 (consumer "+consumerA+")"; got != want {
		t.Errorf("dry run printed about A:\n%s\nwant:\n%s", got, want)
	}
	for _, want := range [][]string{
		{`"msg"="Would keep a namespace created for the consumer"`, `"namespace"="` + teamA + `"`},
		{`"msg"="Would keep the consumer's Leases: reaping cannot finish yet"`},
	} {
		if !env.logged(append(want, "broken.example.org/v1")...) {
			t.Errorf("the dry run must log %v naming the undiscoverable group", want)
		}
	}

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})
	// Stale a window after the start, deleted a reap grace (500ms,
	// startBackend) after being marked: window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "what can be seen reaped", func() error {
		if found, _ := exists(t, env, widget("Widget"), teamA, "a-w1"); found {
			return fmt.Errorf("a-w1 still there")
		}
		return nil
	})
	// Passes every 200ms: ten of them keep both.
	backendtest.Consistently(t, 2*time.Second, "team-a and the Lease stay while the group cannot be discovered", func() error {
		if found, terminating := exists(t, env, &corev1.Namespace{}, "", teamA); !found || terminating {
			return fmt.Errorf("namespace %s deleted", teamA)
		}
		if _, err := lease(t, env, kbind, "a-1"); err != nil {
			return fmt.Errorf("Lease a-1: %w", err)
		}
		return nil
	})
	if !env.logged(`"msg"="Keeping a namespace created for the consumer for now"`, `"namespace"="`+teamA+`"`, "broken.example.org/v1") {
		t.Error("no log line keeping team-a for the undiscoverable group")
	}

	if err := env.Client.Delete(ctx, broken); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, settle, "reaping finishes once discovery is complete", func() error {
		if _, err := lease(t, env, kbind, "a-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Lease a-1: %v", err)
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if _, terminating := exists(t, env, &corev1.Namespace{}, "", teamA); !terminating {
			return fmt.Errorf("namespace %s not deleted", teamA)
		}
		return nil
	})
}

// TestConsumerInfoMetric: the backend exports, per heartbeat Lease, the
// konnector version and API version its konnector wrote on it; a new
// version replaces the series, and the series goes with the Lease.
func TestConsumerInfoMetric(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	consumerA := env.consumer("a")
	info := env.name("info")
	env.Namespace(t, info, "")
	env.Lease(t, info, "a-1", consumerA)
	annotate := func(version string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:"core.kbind.io/v1alpha1"}}}`, kbindv1alpha1.KonnectorVersionAnnotation, version, kbindv1alpha1.APIVersionAnnotation)
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: info, Name: "a-1"}}
		if err := env.Client.Patch(context.Background(), l, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	annotate("0.3.0")
	startBackend(t, env, backend.Options{StaleAfter: time.Minute})
	series := func(version string) bool {
		_, ok := metricValue(t, "kbind_backend_consumer_info", map[string]string{"namespace": info, "lease": "a-1",
			"consumer_cluster_uid": consumerA, "konnector_version": version, "api_version": "core.kbind.io/v1alpha1"})
		return ok
	}
	backendtest.Eventually(t, settle, "the info of a-1 with 0.3.0", func() error {
		if !series("0.3.0") {
			return fmt.Errorf("no series")
		}
		return nil
	})
	annotate("0.4.0")
	backendtest.Eventually(t, settle, "the info of a-1 with 0.4.0 only", func() error {
		if !series("0.4.0") || series("0.3.0") {
			return fmt.Errorf("0.4.0: %v, 0.3.0: %v", series("0.4.0"), series("0.3.0"))
		}
		return nil
	})
	if err := env.Client.Delete(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: info, Name: "a-1"}}); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, settle, "no info once a-1 is gone", func() error {
		if _, ok := metricValue(t, "kbind_backend_consumer_info", map[string]string{"lease": "a-1", "namespace": info}); ok {
			return fmt.Errorf("still exported")
		}
		return nil
	})
}

// TestReapCandidatesMetric: while a stale consumer is being reaped,
// kbind_backend_reap_candidates says how many of its objects the latest pass
// found (here the copy a provider finalizer holds); the series goes when
// the consumer renews, and when reaping finishes.
func TestReapCandidatesMetric(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	consumerC := env.consumer("c")
	candidates := func() (float64, bool) {
		return metricValue(t, "kbind_backend_reap_candidates", map[string]string{"consumer_cluster_uid": consumerC})
	}
	kbind, teamC := env.name("kbind"), env.name("team-c")
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamC, consumerC)
	env.Copy(t, "Widget", teamC, "held", consumerC, "example.org/cleanup")
	env.Copy(t, "Widget", teamC, "w2", consumerC)
	env.Related(t, "ConfigMap", teamC, "c-cm", consumerC)
	env.Lease(t, kbind, "c-1", consumerC)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	// Copies and related copies are listed in one round: the held copy
	// and the related ConfigMap waiting for it. Stale a window after the
	// start, w2 deleted a reap grace (500ms, startBackend) after being
	// marked: window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "the held copy and the related copy counted", func() error {
		if v, ok := candidates(); !ok || v != 2 {
			return fmt.Errorf("kbind_backend_reap_candidates = %v (present: %v), want 2", v, ok)
		}
		return nil
	})

	stop := keepRenewing(t, env, kbind, "c-1", 300*time.Millisecond)
	backendtest.Eventually(t, settle, "no series once the consumer renews", func() error {
		if v, ok := candidates(); ok {
			return fmt.Errorf("kbind_backend_reap_candidates = %v", v)
		}
		return nil
	})
	stop()
	// Stale again a window after the last renewal: window + settle.
	backendtest.Eventually(t, window+settle, "counted again once stale again", func() error {
		if v, ok := candidates(); !ok || v != 2 {
			return fmt.Errorf("kbind_backend_reap_candidates = %v (present: %v), want 2", v, ok)
		}
		return nil
	})
	removeFinalizers(t, env, "Widget", teamC, "held")
	// The related copy's mark is older than the grace by now; the next
	// passes finish: settle.
	backendtest.Eventually(t, settle, "reaped, and no series left", func() error {
		if _, err := lease(t, env, kbind, "c-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Lease c-1: %v", err)
		}
		if v, ok := candidates(); ok {
			return fmt.Errorf("kbind_backend_reap_candidates = %v", v)
		}
		return nil
	})
}

// newConsumerA is the start of most reaping tests: the package's cluster,
// the test's consumer "a", its kbind namespace (where its Leases live) and
// its team-a namespace, labelled as consumer a's.
func newConsumerA(t *testing.T) (env *testEnv, consumerA, kbind, teamA string) {
	t.Helper()
	env = newEnv(t)
	consumerA = env.consumer("a")
	kbind, teamA = env.name("kbind"), env.name("team-a")
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamA, consumerA)
	return env, consumerA, kbind, teamA
}
