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

package binding_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// env is the package's engine on a consumer/provider pair: started by the
// first test that calls setup (pure tests never wait for it), shared by
// every test. A consumer's identity is its cluster's, and one engine
// reconciles every Connection of its cluster: each test owns what it
// touches by its names — the API group of its provider CRDs (group), its
// Connections, bindings and namespaces (unique).
var env *enginetest.Env

const (
	ns         = apiextensionsv1.NamespaceScoped
	clusterwid = apiextensionsv1.ClusterScoped
)

var shared = testenv.NewShared("engine on a consumer/provider pair", func() (*enginetest.Env, func() error, error) {
	e, stop, err := enginetest.Start(enginetest.Options{})
	if err != nil {
		return nil, nil, err
	}
	env = e
	return e, func() error { stop(); return nil }, nil
})

// providers hands out provider clusters of their own, for the tests with
// a pullPolicy All Connection (it installs every export of its provider:
// on the shared one, every other test's) and for those that route one
// API to two providers.
var providers = testenv.ClusterPool("provider", testenv.ClusterOptions{})

// engineLogs holds everything the engines of this process log. It is set
// as controller-runtime's logger before anything logs: set later (by
// enginetest.Start, after a pair that took over 30 s to start on a busy
// machine), controller-runtime has already made every logger a no-op,
// and the test reading a log line fails.
var engineLogs = &enginetest.SyncBuffer{}

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(engineLogs), zap.UseDevMode(true), zap.Level(zapcore.Level(-10))))
	startTimeout()
	testenv.Main(m, shared, providers)
}

// startTimeoutEnv is how long envtest lets each control plane component
// take to start. Its default, 20 s, is overrun on a loaded machine (a
// kube-apiserver took over 20 s at a load of 40 on two cores, and the
// package failed for it): give it three minutes unless the caller chose.
const startTimeoutEnv = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"

func startTimeout() {
	if os.Getenv(startTimeoutEnv) == "" {
		_ = os.Setenv(startTimeoutEnv, "3m")
	}
}

// setup gives a test the shared engine (env is set once it returns) and
// runs it in parallel with the package's other tests.
func setup(t *testing.T) {
	t.Helper()
	shared.Get(t)
	t.Parallel()
}

var seq atomic.Int64

// unique is base with a number no other test run of this process uses:
// parallel tests, and each run of -count=N, share one consumer.
func unique(base string) string { return testenv.UniqueName(base) }

// group is an API group of the test's own ("t<n>.example.org"): the
// consumer CRDs of its APIs are its own, whatever runs beside or before it.
func group() string { return fmt.Sprintf("t%d.example.org", seq.Add(1)) }

// installCRDs creates crds on the cluster c talks to (the shared provider,
// a provider of the test's own, the consumer) and waits until they are
// established.
func installCRDs(t *testing.T, c client.Client, crds ...*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	for _, crd := range crds {
		if err := c.Create(context.Background(), crd.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	for _, crd := range crds {
		enginetest.Eventually(t, "CRD "+crd.Name+" established", func() error {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(crd), got); err != nil {
				return err
			}
			if !kbindschema.Established(got) {
				return fmt.Errorf("not established")
			}
			return nil
		})
	}
}

// ownProvider takes a provider cluster of the test's own from the pool,
// with crds installed, and a client for it.
func ownProvider(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) (*testenv.Cluster, client.Client) {
	t.Helper()
	cluster := providers.Take(t)
	c, err := client.New(cluster.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	installCRDs(t, c, crds...)
	return cluster, c
}

// widgets is the provider CRD widgets.<group>: spec.size defaulted to 3
// with a minimum, and a printer column.
func widgets(group string) *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("widgets", "widget", "Widget", group, ns, true)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"size": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("3")}, Minimum: ptrFloat(1)},
		},
	}
	crd.Spec.Versions[0].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}}
	return crd
}

func ptrFloat(f float64) *float64 { return &f }

// huge is a provider CRD whose schema is about 1 MiB.
func huge(group string) *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("huges", "huge", "Huge", group, ns, true)
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	description := strings.Repeat("a long description of a field. ", 64) // ~2 KiB
	for i := 0; i < 500; i++ {
		props[fmt.Sprintf("field%03d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: description}
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	return crd
}

// multiVersion is a provider CRD with three versions; the tests give it
// webhook conversion (useConversionWebhook), after which only the storage
// version reaches the consumer.
func multiVersion(group string) *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("multis", "multi", "Multi", group, ns, true)
	base := crd.Spec.Versions[0]
	crd.Spec.Versions = nil
	for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
		version := *base.DeepCopy()
		version.Name, version.Storage = v, v == "v1"
		crd.Spec.Versions = append(crd.Spec.Versions, version)
	}
	return crd
}

// useConversionWebhook gives the provider CRD name webhook conversion (to
// a URL nothing serves: objects read and written at the storage version
// need no conversion). envtest's CRD installer drops a conversion webhook
// whose kind its scheme does not know, hence an update after the start.
func useConversionWebhook(t *testing.T, name string) {
	t.Helper()
	url := "https://127.0.0.1:1/convert"
	updateProviderCRD(t, env.Provider, name, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	})
	if crd := providerCRD(t, name); crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Fatalf("provider CRD %s conversion %+v", name, crd.Spec.Conversion)
	}
}

// connect creates a Secret and a Connection to the pair's provider (or the
// given kubeconfig), both named unique(name), and waits until it is Ready.
func connect(t *testing.T, name string, kubeconfig []byte, mutate ...func(*kbindv1alpha1.Connection)) *kbindv1alpha1.Connection {
	t.Helper()
	return connectAs(t, unique(name), kubeconfig, mutate...)
}

// connectAs is connect with the name as it is.
func connectAs(t *testing.T, name string, kubeconfig []byte, mutate ...func(*kbindv1alpha1.Connection)) *kbindv1alpha1.Connection {
	t.Helper()
	ctx := context.Background()
	if kubeconfig == nil {
		kubeconfig = env.Pair.Provider.Kubeconfig
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	if err := env.Consumer.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	conn := &kbindv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: name}},
	}
	for _, m := range mutate {
		m(conn)
	}
	if err := env.Consumer.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	waitConnectionReady(t, conn)
	return conn
}

// connectionReady bounds the wait for a new Connection to be Ready: the
// package's engine serves every test's Connections, and on a busy machine
// (a load of 60 on two cores, under -race) a new one waited over
// PollTimeout for its first status. A generous poll, its duration
// reported when it is long.
const connectionReady = 3 * enginetest.PollTimeout

func waitConnectionReady(t *testing.T, conn *kbindv1alpha1.Connection) {
	t.Helper()
	start := time.Now()
	enginetest.WaitConditionWithin(t, connectionReady, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if took := time.Since(start); took > enginetest.PollTimeout/2 {
		t.Logf("Connection %s was Ready after %s", conn.Name, took)
	}
}

// admitAll makes a Connection admit the Bindings of every namespace
// (BIND-3; the default admits none).
func admitAll(c *kbindv1alpha1.Connection) {
	c.Spec.NamespacedBindings = enginetest.AdmitAllNamespaces()
}

// clusterBinding creates a ClusterBinding named unique(name).
func clusterBinding(t *testing.T, name, connection string, apis ...string) *kbindv1alpha1.ClusterBinding {
	t.Helper()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique(name)}, Spec: spec(connection, apis...)}
	if err := env.Consumer.Create(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
	return cb
}

func namespacedBinding(t *testing.T, namespace, name, connection string, apis ...string) *kbindv1alpha1.Binding {
	t.Helper()
	ctx := context.Background()
	if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec(connection, apis...)}
	if err := env.Consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func spec(connection string, apis ...string) kbindv1alpha1.BindingSpec {
	s := kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: connection}}
	for _, a := range apis {
		s.APIs = append(s.APIs, kbindv1alpha1.APIReference{Name: a})
	}
	return s
}

func consumerCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	enginetest.Eventually(t, "consumer CRD "+name+" established", func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		if !kbindschema.Established(crd) {
			return fmt.Errorf("not established")
		}
		return nil
	})
	return crd
}

func providerCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Provider.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func TestClusterBindingInstallsTheProviderSchema(t *testing.T) {
	setup(t)
	g := group()
	installCRDs(t, env.Provider, widgets(g), multiVersion(g))
	widgetsAPI, multisAPI := "widgets."+g, "multis."+g
	useConversionWebhook(t, multisAPI)
	conn := connect(t, "crd-source", nil)
	cb := clusterBinding(t, "widgets", conn.Name, widgetsAPI, multisAPI)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "2 API(s) bound")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionConflicts, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	if !controllerutil.ContainsFinalizer(cb, kbindv1alpha1.CleanupFinalizer) {
		t.Error("binding lacks the cleanup finalizer")
	}

	crd := consumerCRD(t, widgetsAPI)
	if crd.Labels[kbindv1alpha1.ManagedLabel] != "true" || crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != conn.Name {
		t.Errorf("consumer CRD markers: %v %v", crd.Labels, crd.Annotations)
	}
	hash := crd.Annotations[kbindv1alpha1.SchemaHashAnnotation]
	if !strings.HasPrefix(hash, "sha256:") || len(hash) != len("sha256:")+16 || hash != kbindschema.SpecHash(&crd.Spec) {
		t.Errorf("schema hash %q does not identify the spec (%s)", hash, kbindschema.SpecHash(&crd.Spec))
	}
	if w := cb.Status.BoundAPIs[1]; w.Name != widgetsAPI || w.CRDHash != hash || w.Instances == nil {
		t.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	}
	want := providerCRD(t, widgetsAPI).Spec.Versions[0]
	got := crd.Spec.Versions[0]
	if !equality.Semantic.DeepEqual(got.Schema, want.Schema) || !equality.Semantic.DeepEqual(got.AdditionalPrinterColumns, want.AdditionalPrinterColumns) ||
		!equality.Semantic.DeepEqual(got.Subresources, want.Subresources) {
		t.Errorf("consumer version %+v differs from the provider's %+v", got, want)
	}

	multi := consumerCRD(t, multisAPI)
	if len(multi.Spec.Versions) != 1 || multi.Spec.Versions[0].Name != "v1" || !multi.Spec.Versions[0].Storage ||
		multi.Spec.Conversion == nil || multi.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("multi-version CRD with webhook conversion became %+v / %+v", multi.Spec.Versions, multi.Spec.Conversion)
	}
	// ... and the binding says so, staying Ready; the API works at v1.
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionAllVersionsServed, metav1.ConditionFalse, kbindv1alpha1.ReasonConversionWebhook,
		multisAPI+" is served at v1 only, not at v1alpha1, v1beta1", "conversion", "webhook")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "2 API(s) bound")
	m := defaultObject(g+"/v1", "Multi", "at-storage")
	if err := env.Consumer.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitProviderSpec(t, env.Provider, g+"/v1", m, 1)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

func TestHugeSchema(t *testing.T) {
	setup(t)
	g := group()
	installCRDs(t, env.Provider, huge(g))
	conn := connect(t, "huge", nil)
	cb := clusterBinding(t, "huges", conn.Name, "huges."+g)
	// The consumer API server establishes a CRD of a 1 MiB schema only
	// once it compiled it, which on a busy machine takes longer than
	// PollTimeout: a generous wait, its duration reported.
	start := time.Now()
	enginetest.WaitConditionWithin(t, 5*enginetest.PollTimeout, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	t.Logf("the binding of a 1 MiB schema was Ready after %s", time.Since(start))
	crd := consumerCRD(t, "huges."+g)
	if n := len(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties); n != 500 {
		t.Errorf("%d properties arrived, want 500", n)
	}
}

func TestAPINotExported(t *testing.T) {
	setup(t)
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("gadgets", "gadget", "Gadget", g, ns, false))
	conn := connect(t, "not-exported", nil)
	cb := clusterBinding(t, "wrong-names", conn.Name, "Widget", "example.org/v1", "gadgets."+g)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported,
		`not exported by Connection "`+conn.Name+`"`, `"Widget" (not of the form <plural>.<group>, e.g. widgets.example.org`,
		`"example.org/v1" (not of the form <plural>.<group>`, "gadgets."+g)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: "gadgets." + g}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unexported API got a consumer CRD: %v", err)
	}
}

func TestBindingScopeAndOverlap(t *testing.T) {
	setup(t)
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", g, clusterwid, true), widgets(g))
	conn := connect(t, "scoped", nil, admitAll)
	teamA := unique("team-a")
	b := namespacedBinding(t, teamA, "cluster-api", conn.Name, "clusterwidgets."+g)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported,
		"cluster-scoped, which a namespaced Binding cannot activate", "clusterwidgets."+g)

	// widgets.<group> is covered by a ClusterBinding through another
	// Connection.
	source := connect(t, "crd-source", nil)
	cb := clusterBinding(t, "covering", source.Name, "widgets."+g)
	defer env.Consumer.Delete(context.Background(), cb)
	overlap := namespacedBinding(t, teamA, "widgets", conn.Name, "widgets."+g)
	enginetest.WaitCondition(t, env.Consumer, overlap, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"already covered by a ClusterBinding", "widgets."+g+" (ClusterBinding "+cb.Name)
}

func TestBindingBeforeConnection(t *testing.T) {
	setup(t)
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("followers", "follower", "Follower", g, ns, true))
	late := unique("late")
	b := namespacedBinding(t, unique("team-b"), "early", late, "followers."+g)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, `Connection "`+late+`" not found`)
	connectAs(t, late, nil, admitAll)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	consumerCRD(t, "followers."+g)
}

// addProperty changes a provider CRD's kbindschema.
func addProperty(t *testing.T, name, property string) {
	t.Helper()
	crd := providerCRD(t, name)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties[property] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	if err := env.Provider.Update(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
}

func TestUpdatePolicy(t *testing.T) {
	setup(t)
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("followers", "follower", "Follower", g, ns, true), enginetest.CRD("pinned", "pinned", "Pinned", g, ns, true))
	// followers.<group> belongs to a Connection with the default policy
	// (Always); a second Connection pins pinned.<group> once.
	always := connect(t, "late", nil, admitAll)
	clusterBinding(t, "followers", always.Name, "followers."+g)
	once := connect(t, "once", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.UpdatePolicy = kbindv1alpha1.UpdatePolicyOnce })
	clusterBinding(t, "pinned", once.Name, "pinned."+g)
	followers := consumerCRD(t, "followers."+g)
	pinned := consumerCRD(t, "pinned."+g)

	addProperty(t, "followers."+g, "color")
	addProperty(t, "pinned."+g, "color")
	enginetest.Eventually(t, "Always to follow the provider schema", func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: followers.Name}, crd); err != nil {
			return err
		}
		if _, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["color"]; !ok {
			return fmt.Errorf("no color property yet")
		}
		if crd.Annotations[kbindv1alpha1.SchemaHashAnnotation] == followers.Annotations[kbindv1alpha1.SchemaHashAnnotation] {
			return fmt.Errorf("hash unchanged")
		}
		return nil
	})
	// Once: several resyncs later the CRD is still the first install.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: pinned.Name}, crd); err != nil {
		t.Fatal(err)
	}
	if _, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["color"]; ok ||
		crd.Annotations[kbindv1alpha1.SchemaHashAnnotation] != pinned.Annotations[kbindv1alpha1.SchemaHashAnnotation] {
		t.Errorf("updatePolicy Once followed a provider change")
	}
	enginetest.WaitCondition(t, env.Consumer, once, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

func TestPullPolicyNone(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("externals", "external", "External", g, ns, true))
	conn := connect(t, "external", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyNone })
	cb := clusterBinding(t, "externals", conn.Name, "externals."+g)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"CRD externals."+g+" is not present; with pullPolicy None kbind never creates CRDs")

	// The operator installs the CRD; the CRD source stamps kbind's markers.
	external := enginetest.CRD("externals", "external", "External", g, ns, false)
	if err := env.Consumer.Create(ctx, external); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, "externals."+g)
	if crd.Labels[kbindv1alpha1.ManagedLabel] != "true" || crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != conn.Name {
		t.Errorf("markers not stamped: %v %v", crd.Labels, crd.Annotations)
	}
	// Unbinding never deletes a CRD kbind did not create.
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "binding gone", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "externals." + g}, crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Errorf("an externally managed CRD was deleted: %v", err)
	}
}

func TestNeverTakesOverForeignCRDs(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	installCRDs(t, env.Provider, enginetest.CRD("preexistings", "preexisting", "Preexisting", g, ns, true), widgets(g))
	pre := enginetest.CRD("preexistings", "preexisting", "Preexisting", g, ns, false)
	if err := env.Consumer.Create(ctx, pre); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, "polite", nil)
	cb := clusterBinding(t, "preexistings", conn.Name, "preexistings."+g)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"CRD preexistings."+g+" exists and was not created by kbind")

	// A CRD stamped for another Connection is not stolen either: a
	// binding through this one at most joins it as a second route
	// (docs/bindings.md#one-api-several-providers), never re-stamping or
	// rewriting it. (Another Connection of this test installs
	// widgets.<group> first.)
	source := connect(t, "crd-source", nil)
	installed := clusterBinding(t, "widgets", source.Name, "widgets."+g)
	enginetest.WaitCondition(t, env.Consumer, installed, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	stamped := consumerCRD(t, "widgets."+g)
	other := clusterBinding(t, "steal-widgets", conn.Name, "widgets."+g)
	enginetest.Eventually(t, "the second binding reports", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
			return err
		}
		if len(other.Status.Conditions) == 0 {
			return fmt.Errorf("no conditions yet")
		}
		return nil
	})
	after := consumerCRD(t, "widgets."+g)
	if owner := after.Annotations[kbindv1alpha1.ConnectionAnnotation]; owner != stamped.Annotations[kbindv1alpha1.ConnectionAnnotation] || owner == conn.Name {
		t.Errorf("the CRD stamped for %q is now stamped for %q", stamped.Annotations[kbindv1alpha1.ConnectionAnnotation], owner)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "preexistings." + g}, crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Labels) != 0 || len(crd.Annotations) != 0 {
		t.Errorf("a foreign CRD was touched: %v %v", crd.Labels, crd.Annotations)
	}
}

func TestUnbindDeletesTheCRD(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	api := "unbinds." + g
	installCRDs(t, env.Provider, enginetest.CRD("unbinds", "unbind", "Unbind", g, ns, true))
	conn := connect(t, "unbinder", nil, admitAll)
	cb := clusterBinding(t, "unbinds", conn.Name, api)
	b := namespacedBinding(t, unique("team-c"), "unbinds", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	consumerCRD(t, api)

	// The Binding still lists it: deleting the ClusterBinding keeps the CRD.
	// (Wait until the ClusterBinding is gone: deleted after the Binding, it
	// would be the last to list the API and rightly delete the CRD.)
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "clusterbinding gone", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, api)
	// A namespaced Binding never deletes a CRD.
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "binding gone", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Fatalf("deleting a Binding deleted the CRD: %v", err)
	}
	// The last ClusterBinding goes: the CRD goes.
	cb2 := clusterBinding(t, "unbinds-again", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb2, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if err := env.Consumer.Delete(ctx, cb2); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "CRD deleted on unbind", func() error {
		err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		if apierrors.IsNotFound(err) || (err == nil && !crd.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func TestProviderCRDUnlabelledWhileBound(t *testing.T) {
	setup(t)
	ctx := context.Background()
	g := group()
	api := "vanishings." + g
	installCRDs(t, env.Provider, enginetest.CRD("vanishings", "vanishing", "Vanishing", g, ns, true))
	conn := connect(t, "vanisher", nil)
	cb := clusterBinding(t, "vanishings", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := providerCRD(t, api)
	delete(crd.Labels, kbindv1alpha1.ExportedLabel)
	if err := env.Provider.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported, api)
	// The consumer CRD and its instances stay.
	consumerCRD(t, api)
}

func TestOpenAPISource(t *testing.T) {
	setup(t)
	g := "synth." + group()
	installCRDs(t, env.Provider, enginetest.CRD("synths", "synth", "Synth", g, ns, true))
	conn := connect(t, "synthesized", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceOpenAPI })
	cb := clusterBinding(t, "synths", conn.Name, "synths."+g)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, "synths."+g)
	v := crd.Spec.Versions
	if len(v) != 1 || v[0].Name != "v1alpha1" || !v[0].Storage || v[0].Subresources == nil || v[0].Subresources.Status == nil {
		t.Errorf("synthesized versions %+v", v)
	}
	if crd.Spec.Names.Kind != "Synth" || crd.Spec.Names.Singular != "synth" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("synthesized names %+v scope %s", crd.Spec.Names, crd.Spec.Scope)
	}
	if _, ok := v[0].Schema.OpenAPIV3Schema.Properties["spec"]; !ok {
		t.Errorf("synthesized schema lacks spec: %+v", v[0].Schema.OpenAPIV3Schema)
	}
}

// A pullPolicy All Connection installs every export of its provider: the
// provider is the test's own.
func TestPullPolicyAllAndForbiddenSchemaRead(t *testing.T) {
	setup(t)
	g := "all." + group()
	api := "everythings." + g
	provider, pc := ownProvider(t, enginetest.CRD("everythings", "everything", "Everything", g, ns, true))
	connect(t, "everything", provider.Kubeconfig, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyAll })
	consumerCRD(t, api) // installed without any binding

	// A credential that may list CRDs (discovery) but not get one.
	user, err := provider.AddUser("list-only")
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Grant(t, pc, "list-only", user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}},
	)
	kc, err := testenv.KubeconfigFor("all", user.Config)
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, "list-only", kc)
	// everythings.<group> is stamped for "everything": use a fresh
	// name the CRD would get; the schema read is refused before that.
	cb := clusterBinding(t, "forbidden-read", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"get customresourcedefinitions.apiextensions.k8s.io/"+api)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)
}
