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

// Package backendtest starts a real provider API server (etcd and
// kube-apiserver from KUBEBUILDER_ASSETS, else the kbind control plane
// cache that tools/controlplane/build.sh fills) for the backend's
// integration tests, and writes the objects a konnector would: heartbeat
// Leases, provider copies, related copies and namespaces, with kbind's
// markers. The backend module must not import the engine, so this is its
// own small harness.
//
// Requirement ids in comments (such as HB-1) refer to docs/requirements.md.
package backendtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// KubernetesVersion is the version tools/controlplane/build.sh builds.
const KubernetesVersion = "v1.37.2"

// Env is a running provider API server.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	// users serialises AddUser: envtest's certificate authority is not
	// safe for concurrent use, and tests sharing an Env run in parallel.
	users sync.Mutex
}

func assetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "kbind", "k8s", KubernetesVersion)
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control plane binary %s missing in %s; run `make controlplane` or set KUBEBUILDER_ASSETS: %w", b, dir, err)
		}
	}
	return dir, nil
}

// startTimeout is how long each control plane component may take to
// start: KUBEBUILDER_CONTROLPLANE_START_TIMEOUT when set, else 2 minutes.
func startTimeout() time.Duration {
	if v := os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return 2 * time.Minute
}

// Scheme holds the kinds the tests write.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, apiextensionsv1.AddToScheme, eventsv1.AddToScheme, rbacv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// start starts a provider API server with the test CRDs (Widgets,
// namespaced, and Gadgets, cluster-scoped, in example.org) and returns it
// with the function that stops it.
func start() (*Env, func() error, error) {
	assets, err := assetsDir()
	if err != nil {
		return nil, nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// envtest gives each component 20 s to start, which a machine busy
		// with other suites overran; a package starts one API server now,
		// so it may take its time (KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
		// still overrides).
		ControlPlaneStartTimeout: startTimeout(),
		CRDs: []*apiextensionsv1.CustomResourceDefinition{
			CRD("widgets", "Widget", apiextensionsv1.NamespaceScoped),
			CRD("gadgets", "Gadget", apiextensionsv1.ClusterScoped),
		},
	}
	cfg, err := e.Start()
	if err != nil {
		_ = e.Stop()
		return nil, nil, fmt.Errorf("starting the provider API server: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		_ = e.Stop()
		return nil, nil, err
	}
	stop := func() error {
		if err := e.Stop(); err != nil {
			return fmt.Errorf("stopping the provider API server: %w", err)
		}
		return nil
	}
	return &Env{Config: cfg, Client: c, env: e}, stop, nil
}

// Start starts a provider API server of the test's own and stops it when
// the test ends. Tests share one (NewShared) unless they need a cluster
// of their own.
func Start(t testing.TB) *Env {
	t.Helper()
	e, stop, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// Shared is the provider API server a package's tests share: started by
// the first test that asks for it (Get), so a test that never asks never
// waits for one, and stopped by the package's TestMain (Main). A start
// that fails is not retried: every later Get fails the same way. It is
// engine/test/testenv.Shared for a module that must not import the engine.
type Shared struct {
	mu      sync.Mutex
	started bool
	env     *Env
	stop    func() error
	err     error
}

// NewShared returns a Shared provider API server, not started yet.
func NewShared() *Shared { return &Shared{} }

// Get returns the shared provider API server, starting it when no test has
// yet, and fails the test when it cannot be started.
func (s *Shared) Get(t testing.TB) *Env {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.env, s.stop, s.err = start()
	}
	if s.err != nil {
		t.Fatalf("starting the package's shared provider API server: %v", s.err)
	}
	return s.env
}

// Stop stops the shared provider API server if a test started it.
func (s *Shared) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.err != nil || s.stop == nil {
		return nil
	}
	stop := s.stop
	s.stop = nil
	return stop()
}

// Main runs a package's tests, then stops the shared provider API servers
// they started, and exits with the tests' code (1 when a stop failed after
// passing tests). Use it as the end of a TestMain.
func Main(m *testing.M, shared ...*Shared) {
	code := m.Run()
	for _, s := range shared {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// AddUser provisions a user with no permissions beyond its groups.
func (e *Env) AddUser(t testing.TB, name string) *rest.Config {
	t.Helper()
	e.users.Lock()
	defer e.users.Unlock()
	u, err := e.env.AddUser(envtest.User{Name: name}, &rest.Config{QPS: 200, Burst: 400})
	if err != nil {
		t.Fatal(err)
	}
	return u.Config()
}

// CRD is an example.org CRD that preserves unknown fields.
func CRD(plural, kind string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.org",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// Namespace creates a namespace; a non-empty consumer marks it as created by
// kbind for that consumer.
func (e *Env) Namespace(t testing.TB, name, consumer string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if consumer != "" {
		kbindv1alpha1.NamespaceMarkers(consumer).Stamp(ns)
	}
	e.create(t, ns)
}

// Lease creates a heartbeat Lease the way the konnector does (HB-1) and
// returns a function that renews it.
func (e *Env) Lease(t testing.TB, namespace, name, consumer string) (renew func()) {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	kbindv1alpha1.LeaseMarkers(consumer, "provider").Stamp(l)
	now := metav1.NewMicroTime(time.Now())
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(consumer), LeaseDurationSeconds: ptr.To[int32](60), AcquireTime: &now, RenewTime: &now}
	e.create(t, l)
	return func() { e.Renew(t, namespace, name) }
}

// Renew renews a Lease now, as the konnector does: read, stamp, update.
func (e *Env) Renew(t testing.TB, namespace, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
			return false, err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		if err := e.Client.Update(ctx, l); apierrors.IsConflict(err) {
			return false, nil // the backend annotated it meanwhile: read again
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("renewing Lease %s/%s: %v", namespace, name, err)
	}
}

// Copy creates a provider copy of kind (Widget or Gadget) for consumer with
// both ownership markers; an empty consumer makes an unmarked object.
func (e *Env) Copy(t testing.TB, kind, namespace, name, consumer string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.org/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	if consumer != "" {
		kbindv1alpha1.CopyMarkers(consumer, "consumer-object-"+name).Stamp(u)
	}
	u.SetFinalizers(finalizers)
	u.Object["spec"] = map[string]any{"size": int64(1)}
	e.create(t, u)
	return u
}

// Related creates a related ConfigMap or Secret copy for consumer.
func (e *Env) Related(t testing.TB, kind, namespace, name, consumer string) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	kbindv1alpha1.RelatedCopyMarkers(consumer, "binding-uid/0").Stamp(&meta)
	switch kind {
	case "Secret":
		e.create(t, &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"password": "s3cr3t-never-logged"}})
	default:
		e.create(t, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"color": "blue"}})
	}
}

// Create creates any object.
func (e *Env) Create(t testing.TB, obj client.Object) { t.Helper(); e.create(t, obj) }

func (e *Env) create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// Eventually polls check until it returns nil or the timeout passes, and
// logs how long that took: the timeout is a generous bound for a busy
// machine, the logged duration is the measurement.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	began := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, last)
	}
	t.Logf("%s: after %s", what, time.Since(began).Round(time.Millisecond))
}

// Consistently polls check for the whole duration and fails on the first
// error.
func Consistently(t testing.TB, duration time.Duration, what string, check func() error) {
	t.Helper()
	ConsistentlyUntil(t, time.Now().Add(duration), what, check)
}

// ConsistentlyUntil polls check until deadline and fails on the first error
// seen by a check that ended before the deadline: a state that may
// legitimately change at the deadline (a grace period ending) is only
// reported when it was observed changed earlier, however late a busy
// machine runs the checks.
func ConsistentlyUntil(t testing.TB, deadline time.Time, what string, check func() error) {
	t.Helper()
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Until(deadline)+time.Second, true, func(context.Context) (bool, error) {
		err := check()
		ended := time.Now()
		if ended.After(deadline) {
			return true, nil // observed at or after the deadline: proves nothing
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return false, nil
	})
}
