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

// Package enginetest runs the engine in-process against a real local
// consumer/provider pair for integration tests, and holds the polling
// helpers those tests share. Tests assert on API state, never sleep.
package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/testenv"
)

// SecretNamespace is the allowed kubeconfig Secret namespace of Env.
const SecretNamespace = "kbind"

// PollTimeout bounds every wait.
const PollTimeout = 30 * time.Second

// Env is a running pair with the engine on the consumer.
type Env struct {
	Pair               *testenv.Pair
	Consumer, Provider client.Client
	Scheme             *runtime.Scheme
	// Logs holds everything the engine logged, at every verbosity.
	Logs *SyncBuffer
	// Engine is the running engine (StartEngine replaces it).
	Engine *engine.Engine

	engineOpts engine.Options
	userAgent  string
	cancel     context.CancelFunc
	done       chan struct{}
}

// Options configure Start.
type Options struct {
	ProviderCRDs []*apiextensionsv1.CustomResourceDefinition
	// Engine options; SecretNamespaces defaults to SecretNamespace and the
	// intervals to test-friendly values.
	Engine engine.Options
	// Pair adds API server and etcd flags to the pair (audit logging, for
	// instance); Dir and ProviderCRDs are set by Start.
	Pair testenv.PairOptions
	// UserAgent, when set, is the engine's consumer User-Agent, so that an
	// audit log tells its requests from the test's own.
	UserAgent string
}

// Start starts a pair and the engine; stop ends both. It is meant for
// TestMain.
func Start(opts Options) (env *Env, stop func(), err error) {
	dir, err := os.MkdirTemp("", "kbind-enginetest-")
	if err != nil {
		return nil, nil, err
	}
	pairOpts := opts.Pair
	pairOpts.Dir, pairOpts.ProviderCRDs = dir, opts.ProviderCRDs
	pair, err := testenv.StartPair(pairOpts)
	if err != nil {
		return nil, nil, err
	}
	env = &Env{Pair: pair, Scheme: runtime.NewScheme(), Logs: &SyncBuffer{}, engineOpts: opts.Engine, userAgent: opts.UserAgent}
	stop = func() {
		env.StopEngine()
		_ = pair.Stop()
		_ = os.RemoveAll(dir)
	}
	fail := func(err error) (*Env, func(), error) {
		stop()
		return nil, nil, err
	}
	if err := engine.AddToScheme(env.Scheme); err != nil {
		return fail(err)
	}
	if env.Consumer, err = client.New(pair.Consumer.Config, client.Options{Scheme: env.Scheme}); err != nil {
		return fail(err)
	}
	if env.Provider, err = client.New(pair.Provider.Config, client.Options{Scheme: env.Scheme}); err != nil {
		return fail(err)
	}
	if err := env.Consumer.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SecretNamespace}}); err != nil {
		return fail(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(env.Logs), zap.UseDevMode(true), zap.Level(zapcore.Level(-10))))
	if err := env.StartEngine(); err != nil {
		return fail(err)
	}
	return env, stop, nil
}

// StartEngine starts a new manager running the engine on the consumer (as
// a konnector process start would).
func (env *Env) StartEngine() error {
	cancel, done, eng, err := env.runEngineWith(env.Pair.Consumer.Config, env.engineOpts)
	if err != nil {
		return err
	}
	env.cancel, env.done, env.Engine = cancel, done, eng
	return nil
}

// Consumer is one more consumer cluster with its own engine, sharing Env's
// provider (many consumers on one provider).
type Consumer struct {
	Cluster *testenv.Cluster
	Client  client.Client
}

// StartConsumer starts another consumer cluster named name (with the
// core.kbind.io CRDs and the kubeconfig Secret namespace) and an engine on
// it, both stopped when the test ends.
func (env *Env) StartConsumer(t testing.TB, name string) *Consumer {
	t.Helper()
	return env.StartConsumerWith(t, name, nil)
}

// StartConsumerWith is StartConsumer with the engine's options changed by
// mutate (nil: Env's).
func (env *Env) StartConsumerWith(t testing.TB, name string, mutate func(*engine.Options)) *Consumer {
	t.Helper()
	cluster := testenv.StartClusterT(t, name, testenv.ClusterOptions{InstallKbindCRDs: true})
	c, err := client.New(cluster.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SecretNamespace}}); err != nil {
		t.Fatal(err)
	}
	eo := env.engineOpts
	if mutate != nil {
		mutate(&eo)
	}
	cancel, done, _, err := env.runEngineWith(cluster.Config, eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return &Consumer{Cluster: cluster, Client: c}
}

// StartEngineOn starts an engine (Env's options changed by mutate, nil:
// Env's) on the consumer cluster cfg points at — one the test started
// itself, such as a restored clone (testenv.Cluster.CloneT). stop ends it
// and waits until it has ended (as a konnector process that exits); it is
// called when the test ends too.
func (env *Env) StartEngineOn(t testing.TB, cfg *rest.Config, mutate func(*engine.Options)) (stop func()) {
	t.Helper()
	eo := env.engineOpts
	if mutate != nil {
		mutate(&eo)
	}
	cancel, done, _, err := env.runEngineWith(cfg, eo)
	if err != nil {
		t.Fatal(err)
	}
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// RunEngineOn is StartEngineOn that also returns the engine it started
// (its Sessions, say), for a test that restarts an engine of its own: call
// stop, then RunEngineOn again.
func (env *Env) RunEngineOn(t testing.TB, cfg *rest.Config, mutate func(*engine.Options)) (eng *engine.Engine, stop func()) {
	t.Helper()
	eo := env.engineOpts
	if mutate != nil {
		mutate(&eo)
	}
	cancel, done, eng, err := env.runEngineWith(cfg, eo)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return eng, stop
}

// runEngineWith starts a manager running the engine on the consumer cfg
// points at, with the engine options eo (test-friendly intervals where
// they are unset); cancel stops it, done is closed once it has.
func (env *Env) runEngineWith(consumer *rest.Config, eo engine.Options) (cancel context.CancelFunc, done chan struct{}, eng *engine.Engine, err error) {
	if len(eo.SecretNamespaces) == 0 {
		eo.SecretNamespaces = []string{SecretNamespace}
	}
	if eo.DiscoveryInterval == 0 {
		eo.DiscoveryInterval = 2 * time.Second
	}
	if eo.RecheckInterval == 0 {
		eo.RecheckInterval = eo.DiscoveryInterval
	}
	if eo.HeartbeatInterval == 0 {
		eo.HeartbeatInterval = time.Second
	}
	if eo.BindingResync == 0 {
		eo.BindingResync = 2 * time.Second
	}
	if eo.ProviderTimeout == 0 {
		eo.ProviderTimeout = 5 * time.Second
	}
	cfg := rest.CopyConfig(consumer)
	if env.userAgent != "" {
		cfg.UserAgent = env.userAgent
	}
	cacheOpts := cache.Options{}
	if err := engine.ConfigureCache(eo, cfg, &cacheOpts); err != nil {
		return nil, nil, nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"},
		// Several managers run one after another in one process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Setup's context never ends: cancelling the manager's must stop the
	// whole engine on its own (engine.TestShutdownLeavesNoGoroutine).
	if eng, err = engine.Setup(context.Background(), mgr, eo); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return cancel, done, eng, nil
}

// StopEngine stops the running engine and waits until it has stopped.
func (env *Env) StopEngine() {
	if env.cancel == nil {
		return
	}
	env.cancel()
	<-env.done
	env.cancel, env.done = nil, nil
}

// SyncBuffer is a goroutine-safe log sink.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Eventually polls check until it returns nil, failing the test after
// PollTimeout with the last error.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	EventuallyWithin(t, PollTimeout, what, check)
}

// EventuallyWithin is Eventually with its own timeout.
func EventuallyWithin(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
}

func conditionsOf(obj client.Object) []metav1.Condition {
	switch o := obj.(type) {
	case *kbindv1alpha1.Connection:
		return o.Status.Conditions
	case kbindv1alpha1.BindingObject:
		return o.BindingStatus().Conditions
	}
	panic(fmt.Sprintf("enginetest: no conditions on %T", obj))
}

// WaitCondition waits until obj (re-read from c by its key) has the
// condition with status and reason, a message containing every fragment,
// and observedGeneration equal to its generation. obj holds the last read.
func WaitCondition(t testing.TB, c client.Client, obj client.Object, typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus, reason kbindv1alpha1.Reason, fragments ...string) {
	t.Helper()
	WaitConditionWithin(t, PollTimeout, c, obj, typ, status, reason, fragments...)
}

// WaitConditionWithin is WaitCondition with its own timeout, for a
// condition that waits on something slower than PollTimeout allows for.
func WaitConditionWithin(t testing.TB, timeout time.Duration, c client.Client, obj client.Object, typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus,
	reason kbindv1alpha1.Reason, fragments ...string) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	EventuallyWithin(t, timeout, fmt.Sprintf("%s %s=%s/%s %q", key, typ, status, reason, fragments), func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(conditionsOf(obj), string(typ))
		if cond == nil {
			return fmt.Errorf("no %s condition; conditions %+v", typ, conditionsOf(obj))
		}
		if cond.Status != status || cond.Reason != string(reason) {
			return fmt.Errorf("%s=%s/%s: %s", typ, cond.Status, cond.Reason, cond.Message)
		}
		for _, f := range fragments {
			if !strings.Contains(cond.Message, f) {
				return fmt.Errorf("%s message %q lacks %q", typ, cond.Message, f)
			}
		}
		if cond.ObservedGeneration != obj.GetGeneration() {
			return fmt.Errorf("%s observedGeneration %d, generation %d", typ, cond.ObservedGeneration, obj.GetGeneration())
		}
		return nil
	})
}

// CRD returns a simple CRD for tests: plural.group, kind given, a spec and
// a status that keep unknown fields, the status subresource, and the export
// label when exported.
func CRD(plural, singular, kind, group string, scope apiextensionsv1.ResourceScope, exported bool) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: &preserve},
						"status": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	if exported {
		crd.Labels = map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}
	}
	return crd
}

// AdmitAllNamespaces is a Connection's spec.namespacedBindings that admits
// the Bindings of every namespace (the default admits none: BIND-3).
func AdmitAllNamespaces() *kbindv1alpha1.NamespacedBindings {
	return &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}
}

// ConnectionManifest is the YAML of a kubeconfig Secret (namespace "kbind",
// named after the Connection) holding kubeconfig, and of the Connection
// using it — what an operator applies, ready for more documents after it.
func ConnectionManifest(connection string, kubeconfig []byte) string {
	return ConnectionManifestWith(connection, connection, kubeconfig, "")
}

// ConnectionManifestWith is ConnectionManifest with the Secret's name and
// extra YAML under the Connection's spec (indented two spaces, may be
// empty).
func ConnectionManifestWith(connection, secret string, kubeconfig []byte, spec string) string {
	indented := strings.ReplaceAll(strings.TrimSpace(string(kubeconfig)), "\n", "\n    ")
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[2]s, namespace: kbind}
stringData:
  kubeconfig: |
    %[3]s
---
apiVersion: core.kbind.io/v1alpha1
kind: Connection
metadata: {name: %[1]s}
spec:
  kubeconfigSecretRef: {namespace: kbind, name: %[2]s}
%[4]s`, connection, secret, indented, spec)
}

// Grant creates a ClusterRole "kbind-test-<name>" with rules on the cluster
// c talks to and binds it to user; revoke deletes both.
func Grant(t testing.TB, c client.Client, name, user string, rules ...rbacv1.PolicyRule) (revoke func()) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kbind-test-" + name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kbind-test-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, obj := range []client.Object{binding, role} {
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
}
