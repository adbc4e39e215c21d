package backend_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

func TestMain(m *testing.M) {
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintf(logs, "%s %s\n", prefix, args)
	}, funcr.Options{Verbosity: 1}))
	os.Exit(m.Run())
}

const (
	consumerA = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
	consumerB = "bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"
	window    = 3 * time.Second
)

// startBackend runs the backend's wiring in-process against env until the
// returned stop (also called at the end of the test).
func startBackend(t *testing.T, env *backendtest.Env, opts backend.Options) (stop func()) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := backend.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cacheOpts := cache.Options{}
	backend.ConfigureCache(&cacheOpts)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Cache: cacheOpts,
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
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), ctrl.Log.WithName(t.Name())))
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
func keepRenewing(t *testing.T, env *backendtest.Env, namespace, name string, interval time.Duration) (stop func()) {
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

func lease(t *testing.T, env *backendtest.Env, namespace, name string) (*coordinationv1.Lease, error) {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, l)
	return l, err
}

func staleSince(t *testing.T, env *backendtest.Env, namespace, name string) (string, bool) {
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
func events(t *testing.T, env *backendtest.Env, namespace, name, reason string) int {
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

func exists(t *testing.T, env *backendtest.Env, obj client.Object, namespace, name string) (found, terminating bool) {
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

func removeFinalizers(t *testing.T, env *backendtest.Env, kind, namespace, name string) {
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
// once; nothing is deleted.
func TestLivenessReportsStaleLeases(t *testing.T) {
	env := backendtest.Start(t)
	env.Namespace(t, "kbind", "")
	env.Lease(t, "kbind", "a-1", consumerA)
	env.Lease(t, "kbind", "b-1", consumerB)
	env.Lease(t, "kbind", "b-2", consumerB) // never renewed: stale, but b-1 keeps B live
	stopB := keepRenewing(t, env, "kbind", "b-1", 300*time.Millisecond)
	defer stopB()
	noUID := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "no-uid",
		Labels: map[string]string{kbindv1alpha1.ManagedLabel: "true"}}}
	env.Create(t, noUID)
	labelOnly := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "label-only",
		Labels: map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: "cccc"}}}
	env.Create(t, labelOnly)

	started := time.Now()
	startBackend(t, env, backend.Options{StaleAfter: window})

	backendtest.Eventually(t, 10*time.Second, "a-1 marked stale", func() error {
		if _, ok := staleSince(t, env, "kbind", "a-1"); !ok {
			return fmt.Errorf("no %s annotation", kbindv1alpha1.StaleSinceAnnotation)
		}
		return nil
	})
	took := time.Since(started)
	t.Logf("a-1 marked stale after %s (window %s)", took, window)
	if took < window {
		t.Errorf("marked stale after %s, before the %s window passed on the backend's clock", took, window)
	}
	v, _ := staleSince(t, env, "kbind", "a-1")
	ts, err := time.Parse(time.RFC3339, v)
	if err != nil || ts.Before(started.Add(window-time.Second)) || ts.After(time.Now()) {
		t.Errorf("stale-since %q (%v) is not the backend's time of the transition", v, err)
	}
	backendtest.Eventually(t, 5*time.Second, "b-2 marked stale", func() error {
		if _, ok := staleSince(t, env, "kbind", "b-2"); !ok {
			return fmt.Errorf("b-2 not marked")
		}
		return nil
	})
	if _, ok := staleSince(t, env, "kbind", "b-1"); ok {
		t.Error("the renewing Lease b-1 is marked stale")
	}
	for _, name := range []string{"no-uid", "label-only"} {
		if _, ok := staleSince(t, env, "kbind", name); ok {
			t.Errorf("Lease %s without a consumer is marked", name)
		}
	}
	backendtest.Eventually(t, 5*time.Second, "HeartbeatStale Event on a-1", func() error {
		if events(t, env, "kbind", "a-1", "HeartbeatStale") == 0 {
			return fmt.Errorf("no Event")
		}
		return nil
	})
	backendtest.Eventually(t, 5*time.Second, "consumer metrics", func() error {
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
		l, err := lease(t, env, "kbind", "no-uid")
		if err != nil {
			t.Fatal(err)
		}
		l.Labels["touch"] = fmt.Sprint(i)
		if err := env.Client.Update(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	backendtest.Eventually(t, 5*time.Second, "the bad Leases logged", func() error {
		for _, name := range []string{`"name"="no-uid"`, `"name"="label-only"`} {
			n := 0
			for _, line := range strings.Split(logs.String(), "\n") {
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
	env.Renew(t, "kbind", "a-1")
	backendtest.Eventually(t, 5*time.Second, "a-1 unmarked after renewing", func() error {
		if v, ok := staleSince(t, env, "kbind", "a-1"); ok {
			return fmt.Errorf("still marked %s", v)
		}
		if events(t, env, "kbind", "a-1", "HeartbeatRenewed") == 0 {
			return fmt.Errorf("no HeartbeatRenewed Event")
		}
		return nil
	})
	// Report only: nothing was deleted.
	for _, name := range []string{"a-1", "b-1", "b-2", "no-uid", "label-only"} {
		if _, err := lease(t, env, "kbind", name); err != nil {
			t.Errorf("Lease %s: %v", name, err)
		}
	}
}

// world writes two simulated consumers: A stops heartbeating, B keeps on.
// It returns the dry-run lines expected for A.
func world(t *testing.T, env *backendtest.Env) []string {
	t.Helper()
	env.Namespace(t, "team-a", consumerA) // created by kbind for A
	env.Namespace(t, "team-b", consumerB)
	env.Namespace(t, "shared", "")       // the provider's own
	env.Namespace(t, "kbind", consumerA) // A's heartbeat created it; B's Lease lives there too
	// What Kubernetes itself puts into every namespace does not keep it.
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "kube-root-ca.crt"}})

	env.Copy(t, "Widget", "team-a", "a-w1", consumerA)
	env.Copy(t, "Widget", "shared", "a-w2", consumerA, "example.org/cleanup") // a provider finalizer
	env.Copy(t, "Gadget", "", "a-g1", consumerA)
	env.Related(t, "ConfigMap", "team-a", "a-cm", consumerA)
	env.Related(t, "Secret", "team-a", "a-secret", consumerA)
	env.Lease(t, "kbind", "a-1", consumerA)
	env.Lease(t, "team-a", "a-2", consumerA)

	env.Copy(t, "Widget", "team-b", "b-w1", consumerB)
	env.Copy(t, "Widget", "shared", "b-w2", consumerB)
	env.Related(t, "ConfigMap", "shared", "b-cm", consumerB)
	env.Lease(t, "kbind", "b-1", consumerB)

	// Unmarked, partially marked and mixed objects are never touched.
	env.Copy(t, "Widget", "shared", "plain", "")
	partial := widget("Widget")
	partial.SetNamespace("shared")
	partial.SetName("partial")
	partial.SetLabels(map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumerA})
	env.Create(t, partial)
	mixed := widget("Widget")
	mixed.SetNamespace("shared")
	mixed.SetName("mixed")
	mixed.SetLabels(map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumerA})
	mixed.SetAnnotations(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: consumerB, kbindv1alpha1.ConsumerObjectUIDAnnotation: "x"})
	env.Create(t, mixed)
	marked := kbindv1alpha1.NamespaceMarkers(consumerA) // no related-binding annotation
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "user-secret", Labels: marked.Labels, Annotations: marked.Annotations}})

	return []string{
		"would delete gadgets.example.org a-g1 (consumer " + consumerA + ")",
		"would delete widgets.example.org shared/a-w2 (consumer " + consumerA + ")",
		"would delete widgets.example.org team-a/a-w1 (consumer " + consumerA + ")",
		"would delete configmaps team-a/a-cm (consumer " + consumerA + ")",
		"would delete secrets team-a/a-secret (consumer " + consumerA + ")",
		"would delete namespaces team-a (consumer " + consumerA + ")",
		"would delete leases.coordination.k8s.io kbind/a-1 (consumer " + consumerA + ")",
		"would delete leases.coordination.k8s.io team-a/a-2 (consumer " + consumerA + ")",
	}
}

// survivors are the objects reaping A must leave alone.
func checkSurvivors(t *testing.T, env *backendtest.Env) {
	t.Helper()
	for _, w := range []struct{ kind, ns, name string }{
		{"Widget", "team-b", "b-w1"}, {"Widget", "shared", "b-w2"}, {"Widget", "shared", "plain"},
		{"Widget", "shared", "partial"}, {"Widget", "shared", "mixed"},
	} {
		if found, terminating := exists(t, env, widget(w.kind), w.ns, w.name); !found || terminating {
			t.Errorf("%s %s/%s: found=%v terminating=%v, must be untouched", w.kind, w.ns, w.name, found, terminating)
		}
	}
	for _, o := range []struct {
		obj      client.Object
		ns, name string
	}{
		{&corev1.ConfigMap{}, "shared", "b-cm"}, {&corev1.Secret{}, "shared", "user-secret"},
		{&coordinationv1.Lease{}, "kbind", "b-1"},
		{&corev1.Namespace{}, "", "team-b"}, {&corev1.Namespace{}, "", "shared"}, {&corev1.Namespace{}, "", "kbind"},
	} {
		if found, terminating := exists(t, env, o.obj, o.ns, o.name); !found || terminating {
			t.Errorf("%T %s/%s: found=%v terminating=%v, must be untouched", o.obj, o.ns, o.name, found, terminating)
		}
	}
}

// TestDryRunThenReap: the dry run lists exactly A's objects and changes
// nothing; the reaper then deletes them in order — copies (waiting for a
// provider finalizer), related copies, the namespace kbind created for A,
// A's Leases — and leaves B's, unmarked and foreign objects alone.
func TestDryRunThenReap(t *testing.T) {
	env := backendtest.Start(t)
	want := world(t, env)
	stopB := keepRenewing(t, env, "kbind", "b-1", 300*time.Millisecond)
	defer stopB()

	var out bytes.Buffer
	started := time.Now()
	if err := backend.DryRun(log.IntoContext(context.Background(), ctrl.Log.WithName("dry-run")), env.Config, backend.Options{StaleAfter: window}, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("dry run took %s; output:\n%s", time.Since(started), out.String())
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dry run output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, ok := staleSince(t, env, "kbind", "a-1"); ok {
		t.Error("the dry run annotated a Lease")
	}
	if found, _ := exists(t, env, widget("Widget"), "team-a", "a-w1"); !found {
		t.Error("the dry run deleted something")
	}

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})
	backendtest.Eventually(t, 15*time.Second, "A's copies deleted, the finalized one terminating", func() error {
		if found, _ := exists(t, env, widget("Widget"), "team-a", "a-w1"); found {
			return fmt.Errorf("a-w1 still there")
		}
		if found, _ := exists(t, env, widget("Gadget"), "", "a-g1"); found {
			return fmt.Errorf("a-g1 still there")
		}
		if _, terminating := exists(t, env, widget("Widget"), "shared", "a-w2"); !terminating {
			return fmt.Errorf("a-w2 not terminating")
		}
		return nil
	})
	// The provider finalizer holds a-w2: the reaper waits and does not go on
	// to the related copies, nor strip the finalizer.
	backendtest.Consistently(t, time.Second, "reaping waits for the provider finalizer", func() error {
		if found, _ := exists(t, env, &corev1.ConfigMap{}, "team-a", "a-cm"); !found {
			return fmt.Errorf("a-cm deleted while a copy was still finalizing")
		}
		u := widget("Widget")
		if found, _ := exists(t, env, u, "shared", "a-w2"); !found || len(u.GetFinalizers()) != 1 {
			return fmt.Errorf("a-w2 found=%v finalizers=%v", found, u.GetFinalizers())
		}
		return nil
	})
	removeFinalizers(t, env, "Widget", "shared", "a-w2")
	backendtest.Eventually(t, 15*time.Second, "A reaped", func() error {
		for _, o := range []struct {
			obj      client.Object
			ns, name string
		}{
			{widget("Widget"), "shared", "a-w2"}, {&corev1.ConfigMap{}, "team-a", "a-cm"}, {&corev1.Secret{}, "team-a", "a-secret"},
			{&coordinationv1.Lease{}, "kbind", "a-1"}, {&coordinationv1.Lease{}, "team-a", "a-2"},
		} {
			if found, _ := exists(t, env, o.obj, o.ns, o.name); found {
				return fmt.Errorf("%s/%s still there", o.ns, o.name)
			}
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if _, terminating := exists(t, env, &corev1.Namespace{}, "", "team-a"); !terminating {
			return fmt.Errorf("namespace team-a not deleted")
		}
		return nil
	})
	checkSurvivors(t, env)
	// Events are asynchronous and best effort: one about an object in a
	// namespace that is being deleted may be refused by the API server, so
	// only those sent well before are required; none is ever sent twice.
	backendtest.Eventually(t, 10*time.Second, "one Reaped Event per deletion", func() error {
		for _, o := range [][2]string{{"shared", "a-w2"}, {"team-a", "a-w1"}, {"kbind", "a-1"}, {"default", "team-a"}} {
			if n := events(t, env, o[0], o[1], reaper.ReasonReaped); n != 1 {
				return fmt.Errorf("%d Reaped Events about %s/%s, want 1", n, o[0], o[1])
			}
		}
		return nil
	})
	for _, name := range []string{"a-cm", "a-secret", "a-2"} {
		if n := events(t, env, "team-a", name, reaper.ReasonReaped); n > 1 {
			t.Errorf("%d Reaped Events about team-a/%s", n, name)
		}
	}
	if v, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Widget.example.org", "result": "deleted"}); v < 2 {
		t.Errorf("kbind_backend_deletions_total{Widget.example.org,deleted} = %v, want ≥ 2", v)
	}
	if strings.Contains(logs.String(), "s3cr3t-never-logged") {
		t.Error("Secret data in the logs")
	}
}

// TestReapingStopsWhenTheConsumerRenews: a consumer that renews while its
// copies are being reaped keeps everything else.
func TestReapingStopsWhenTheConsumerRenews(t *testing.T) {
	env := backendtest.Start(t)
	env.Namespace(t, "kbind", "")
	env.Namespace(t, "team-a", consumerA)
	env.Copy(t, "Widget", "team-a", "held", consumerA, "example.org/cleanup")
	env.Related(t, "ConfigMap", "team-a", "a-cm", consumerA)
	env.Lease(t, "kbind", "a-1", consumerA)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	backendtest.Eventually(t, 15*time.Second, "the held copy terminating", func() error {
		if _, terminating := exists(t, env, widget("Widget"), "team-a", "held"); !terminating {
			return fmt.Errorf("not terminating")
		}
		return nil
	})
	keepRenewing(t, env, "kbind", "a-1", 300*time.Millisecond)
	backendtest.Eventually(t, 5*time.Second, "a-1 unmarked", func() error {
		if _, ok := staleSince(t, env, "kbind", "a-1"); ok {
			return fmt.Errorf("still marked")
		}
		return nil
	})
	removeFinalizers(t, env, "Widget", "team-a", "held")
	backendtest.Consistently(t, 2*window, "the returned consumer keeps its related copy, namespace and Lease", func() error {
		if found, _ := exists(t, env, &corev1.ConfigMap{}, "team-a", "a-cm"); !found {
			return fmt.Errorf("a-cm deleted")
		}
		if found, terminating := exists(t, env, &corev1.Namespace{}, "", "team-a"); !found || terminating {
			return fmt.Errorf("namespace team-a deleted")
		}
		if _, err := lease(t, env, "kbind", "a-1"); err != nil {
			return err
		}
		return nil
	})
}

// TestPassStopsBetweenDeletions: liveness is asked before every deletion and
// a renewal stops the pass at once.
func TestPassStopsBetweenDeletions(t *testing.T) {
	env := backendtest.Start(t)
	env.Namespace(t, "kbind", "")
	env.Namespace(t, "team-a", "")
	for i := range 5 {
		env.Copy(t, "Widget", "team-a", fmt.Sprintf("w%d", i), consumerA)
	}
	env.Lease(t, "kbind", "a-1", consumerA)
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
	if err := env.Client.List(context.Background(), &list, client.InNamespace("team-a")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("%d Widgets left, want 3 (two deleted before the renewal)", len(list.Items))
	}
	if _, err := lease(t, env, "kbind", "a-1"); err != nil {
		t.Errorf("the Lease: %v", err)
	}
}

// TestRestartMidReap: a backend stopped while a copy is finalizing leaves
// nothing to a fresh one but to wait and finish: nothing is deleted twice,
// nothing is missed, and the fresh clock does not reap early.
func TestRestartMidReap(t *testing.T) {
	env := backendtest.Start(t)
	env.Namespace(t, "kbind", "")
	env.Namespace(t, "team-a", consumerA)
	env.Copy(t, "Widget", "team-a", "held", consumerA, "example.org/cleanup")
	env.Copy(t, "Widget", "team-a", "w2", consumerA)
	env.Related(t, "ConfigMap", "team-a", "a-cm", consumerA)
	env.Lease(t, "kbind", "a-1", consumerA)

	stop := startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	backendtest.Eventually(t, 15*time.Second, "first backend mid-reap", func() error {
		if found, _ := exists(t, env, widget("Widget"), "team-a", "w2"); found {
			return fmt.Errorf("w2 still there")
		}
		if _, terminating := exists(t, env, widget("Widget"), "team-a", "held"); !terminating {
			return fmt.Errorf("held not terminating")
		}
		return nil
	})
	stop()
	restarted := time.Now()
	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	removeFinalizers(t, env, "Widget", "team-a", "held")
	backendtest.Eventually(t, 15*time.Second, "the second backend finishes", func() error {
		if found, _ := exists(t, env, &corev1.ConfigMap{}, "team-a", "a-cm"); found {
			return fmt.Errorf("a-cm still there")
		}
		if _, err := lease(t, env, "kbind", "a-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Lease a-1: %v", err)
		}
		return nil
	})
	if took := time.Since(restarted); took < window {
		t.Errorf("the restarted backend reaped after %s, before its own %s window", took, window)
	}
	// held and w2 were deleted by the first backend, long before their
	// namespace: exactly one Event each proves nothing was deleted twice.
	backendtest.Eventually(t, 10*time.Second, "one Reaped Event per deletion", func() error {
		for _, name := range []string{"held", "w2"} {
			if n := events(t, env, "team-a", name, reaper.ReasonReaped); n != 1 {
				return fmt.Errorf("%d Reaped Events about %s, want exactly 1", n, name)
			}
		}
		return nil
	})
	if n := events(t, env, "team-a", "a-cm", reaper.ReasonReaped); n > 1 {
		t.Errorf("%d Reaped Events about a-cm", n)
	}
}

// TestForbiddenKindIsReported: the reaper may not delete Gadgets; it says
// so, deletes everything else, and keeps the Lease so the consumer stays
// reported and retried.
func TestForbiddenKindIsReported(t *testing.T) {
	env := backendtest.Start(t)
	env.Namespace(t, "kbind", "")
	env.Namespace(t, "team-a", "")
	env.Copy(t, "Gadget", "", "g1", consumerA)
	env.Copy(t, "Widget", "team-a", "w1", consumerA)
	env.Related(t, "ConfigMap", "team-a", "a-cm", consumerA)
	env.Lease(t, "kbind", "a-1", consumerA)

	cfg := env.AddUser(t, "reaper")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reaper"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"list"}},
		{APIGroups: []string{"example.org"}, Resources: []string{"widgets"}, Verbs: []string{"get", "patch", "delete"}},
		// Related copies are marked and read again like copies.
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reaper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reaper"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "reaper"}}}
	for _, o := range []client.Object{role, binding} {
		env.Create(t, o)
	}
	r, err := backend.NewReaper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Grace = 500 * time.Millisecond
	before, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Gadget.example.org", "result": "forbidden"})
	var v reaper.Verdict
	backendtest.Eventually(t, 10*time.Second, "a blocked pass (RBAC takes a moment)", func() error {
		v, err = r.Pass(context.Background(), consumerA, func() bool { return true })
		if err != nil {
			return err
		}
		if v != reaper.Blocked {
			return fmt.Errorf("verdict %v", v)
		}
		return nil
	})
	if found, _ := exists(t, env, widget("Widget"), "team-a", "w1"); found {
		t.Error("w1 not deleted")
	}
	if found, _ := exists(t, env, &corev1.ConfigMap{}, "team-a", "a-cm"); found {
		t.Error("a-cm not deleted")
	}
	if found, _ := exists(t, env, widget("Gadget"), "", "g1"); !found {
		t.Error("g1 deleted without permission?")
	}
	if _, err := lease(t, env, "kbind", "a-1"); err != nil {
		t.Errorf("the Lease must stay while something could not be deleted: %v", err)
	}
	if after, _ := metricValue(t, "kbind_backend_deletions_total", map[string]string{"kind": "Gadget.example.org", "result": "forbidden"}); after <= before {
		t.Errorf("forbidden deletions of Gadgets not counted (%v → %v)", before, after)
	}
	// The Gadget may not even be marked (phase 1 of reaping): refused too.
	if !strings.Contains(logs.String(), "Marking a copy of a stale consumer failed") {
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
// API is gone from discovery, reaping finishes.
func TestUndiscoverableGroupKeepsNamespacesAndLeases(t *testing.T) {
	env := backendtest.Start(t)
	ctx := context.Background()
	env.Namespace(t, "kbind", "")
	env.Namespace(t, "team-a", consumerA)
	env.Copy(t, "Widget", "team-a", "a-w1", consumerA)
	env.Lease(t, "kbind", "a-1", consumerA)

	broken := apiService()
	env.Create(t, broken)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 30*time.Second, "discovery reports broken.example.org/v1 failed", func() error {
		_, err := dc.ServerPreferredResources()
		groups, ok := discovery.GroupDiscoveryFailedErrorGroups(err)
		if _, failed := groups[schema.GroupVersion{Group: "broken.example.org", Version: "v1"}]; !ok || !failed {
			return fmt.Errorf("discovery error %v", err)
		}
		return nil
	})

	var out bytes.Buffer
	if err := backend.DryRun(log.IntoContext(ctx, ctrl.Log.WithName(t.Name()+"-dry-run")), env.Config, backend.Options{StaleAfter: window}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "would delete widgets.example.org team-a/a-w1 (consumer "+consumerA+")"; got != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", got, want)
	}
	for _, want := range [][]string{
		{`"msg"="Would keep a namespace created for the consumer"`, `"namespace"="team-a"`},
		{`"msg"="Would keep the consumer's Leases: reaping cannot finish yet"`},
	} {
		if !logged(append(want, "broken.example.org/v1")...) {
			t.Errorf("the dry run must log %v naming the undiscoverable group", want)
		}
	}

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})
	backendtest.Eventually(t, 20*time.Second, "what can be seen reaped", func() error {
		if found, _ := exists(t, env, widget("Widget"), "team-a", "a-w1"); found {
			return fmt.Errorf("a-w1 still there")
		}
		return nil
	})
	// Passes every 200ms: ten of them keep both.
	backendtest.Consistently(t, 2*time.Second, "team-a and the Lease stay while the group cannot be discovered", func() error {
		if found, terminating := exists(t, env, &corev1.Namespace{}, "", "team-a"); !found || terminating {
			return fmt.Errorf("namespace team-a deleted")
		}
		if _, err := lease(t, env, "kbind", "a-1"); err != nil {
			return fmt.Errorf("Lease a-1: %w", err)
		}
		return nil
	})
	if !logged(`"msg"="Keeping a namespace created for the consumer for now"`, `"namespace"="team-a"`, "broken.example.org/v1") {
		t.Error("no log line keeping team-a for the undiscoverable group")
	}

	if err := env.Client.Delete(ctx, broken); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 30*time.Second, "reaping finishes once discovery is complete", func() error {
		if _, err := lease(t, env, "kbind", "a-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Lease a-1: %v", err)
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if _, terminating := exists(t, env, &corev1.Namespace{}, "", "team-a"); !terminating {
			return fmt.Errorf("namespace team-a not deleted")
		}
		return nil
	})
}

// logged reports whether some log line holds every fragment.
func logged(fragments ...string) bool {
next:
	for _, l := range strings.Split(logs.String(), "\n") {
		for _, f := range fragments {
			if !strings.Contains(l, f) {
				continue next
			}
		}
		return true
	}
	return false
}

// TestConsumerInfoMetric: the backend exports, per heartbeat Lease, the
// konnector version and API version its konnector wrote on it; a new
// version replaces the series, and the series goes with the Lease.
func TestConsumerInfoMetric(t *testing.T) {
	env := backendtest.Start(t)
	env.Namespace(t, "info", "")
	env.Lease(t, "info", "a-1", consumerA)
	annotate := func(version string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:"core.kbind.io/v1alpha1"}}}`, kbindv1alpha1.KonnectorVersionAnnotation, version, kbindv1alpha1.APIVersionAnnotation)
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "info", Name: "a-1"}}
		if err := env.Client.Patch(context.Background(), l, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	annotate("0.3.0")
	startBackend(t, env, backend.Options{StaleAfter: time.Minute})
	series := func(version string) bool {
		_, ok := metricValue(t, "kbind_backend_consumer_info", map[string]string{"namespace": "info", "lease": "a-1",
			"consumer_cluster_uid": consumerA, "konnector_version": version, "api_version": "core.kbind.io/v1alpha1"})
		return ok
	}
	backendtest.Eventually(t, 10*time.Second, "the info of a-1 with 0.3.0", func() error {
		if !series("0.3.0") {
			return fmt.Errorf("no series")
		}
		return nil
	})
	annotate("0.4.0")
	backendtest.Eventually(t, 10*time.Second, "the info of a-1 with 0.4.0 only", func() error {
		if !series("0.4.0") || series("0.3.0") {
			return fmt.Errorf("0.4.0: %v, 0.3.0: %v", series("0.4.0"), series("0.3.0"))
		}
		return nil
	})
	if err := env.Client.Delete(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "info", Name: "a-1"}}); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 10*time.Second, "no info once a-1 is gone", func() error {
		if _, ok := metricValue(t, "kbind_backend_consumer_info", map[string]string{"lease": "a-1", "namespace": "info"}); ok {
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
	const consumerC = "cccccccc-3333-4333-8333-cccccccccccc"
	candidates := func() (float64, bool) {
		return metricValue(t, "kbind_backend_reap_candidates", map[string]string{"consumer_cluster_uid": consumerC})
	}
	env := backendtest.Start(t)
	env.Namespace(t, "kbind", "")
	env.Namespace(t, "team-c", consumerC)
	env.Copy(t, "Widget", "team-c", "held", consumerC, "example.org/cleanup")
	env.Copy(t, "Widget", "team-c", "w2", consumerC)
	env.Related(t, "ConfigMap", "team-c", "c-cm", consumerC)
	env.Lease(t, "kbind", "c-1", consumerC)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 100 * time.Millisecond})
	// Copies and related copies are listed in one round: the held copy
	// and the related ConfigMap waiting for it.
	backendtest.Eventually(t, 15*time.Second, "the held copy and the related copy counted", func() error {
		if v, ok := candidates(); !ok || v != 2 {
			return fmt.Errorf("kbind_backend_reap_candidates = %v (present: %v), want 2", v, ok)
		}
		return nil
	})

	stop := keepRenewing(t, env, "kbind", "c-1", 300*time.Millisecond)
	backendtest.Eventually(t, 5*time.Second, "no series once the consumer renews", func() error {
		if v, ok := candidates(); ok {
			return fmt.Errorf("kbind_backend_reap_candidates = %v", v)
		}
		return nil
	})
	stop()
	backendtest.Eventually(t, 15*time.Second, "counted again once stale again", func() error {
		if v, ok := candidates(); !ok || v != 2 {
			return fmt.Errorf("kbind_backend_reap_candidates = %v (present: %v), want 2", v, ok)
		}
		return nil
	})
	removeFinalizers(t, env, "Widget", "team-c", "held")
	backendtest.Eventually(t, 15*time.Second, "reaped, and no series left", func() error {
		if _, err := lease(t, env, "kbind", "c-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Lease c-1: %v", err)
		}
		if v, ok := candidates(); ok {
			return fmt.Errorf("kbind_backend_reap_candidates = %v", v)
		}
		return nil
	})
}
