package binding_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var env *enginetest.Env

const (
	ns         = apiextensionsv1.NamespaceScoped
	clusterwid = apiextensionsv1.ClusterScoped
)

func TestMain(m *testing.M) {
	widgets := enginetest.CRD("widgets", "widget", "Widget", "example.org", ns, true)
	widgets.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"size": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("3")}, Minimum: ptrFloat(1)},
		},
	}
	widgets.Spec.Versions[0].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}}
	var err error
	var stop func()
	env, stop, err = enginetest.Start(enginetest.Options{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		widgets,
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", clusterwid, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", ns, false),
		multiVersion(),
		enginetest.CRD("followers", "follower", "Follower", "example.org", ns, true),
		enginetest.CRD("pinned", "pinned", "Pinned", "example.org", ns, true),
		enginetest.CRD("externals", "external", "External", "example.org", ns, true),
		enginetest.CRD("preexistings", "preexisting", "Preexisting", "example.org", ns, true),
		enginetest.CRD("unbinds", "unbind", "Unbind", "example.org", ns, true),
		enginetest.CRD("vanishings", "vanishing", "Vanishing", "example.org", ns, true),
		enginetest.CRD("synths", "synth", "Synth", "synth.example.org", ns, true),
		enginetest.CRD("switches", "switch", "Switch", "example.org", ns, true),
		enginetest.CRD("storeds", "stored", "Stored", "example.org", ns, true),
		enginetest.CRD("keeps", "keep", "Keep", "all.example.org", ns, true),
		huge(),
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func ptrFloat(f float64) *float64 { return &f }

// huge is a provider CRD whose schema is about 1 MiB.
func huge() *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("huges", "huge", "Huge", "example.org", ns, true)
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
func multiVersion() *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("multis", "multi", "Multi", "example.org", ns, true)
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
// given kubeconfig) and waits until it is Ready.
func connect(t *testing.T, name string, kubeconfig []byte, mutate ...func(*kbindv1alpha1.Connection)) *kbindv1alpha1.Connection {
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
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	return conn
}

// admitAll makes a Connection admit the Bindings of every namespace
// (BIND-3; the default admits none).
func admitAll(c *kbindv1alpha1.Connection) {
	c.Spec.NamespacedBindings = enginetest.AdmitAllNamespaces()
}

func clusterBinding(t *testing.T, name, connection string, apis ...string) *kbindv1alpha1.ClusterBinding {
	t.Helper()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec(connection, apis...)}
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
	useConversionWebhook(t, "multis.example.org")
	conn := connect(t, "crd-source", nil)
	cb := clusterBinding(t, "widgets", conn.Name, "widgets.example.org", "multis.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "2 API(s) bound")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionConflicts, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	if !controllerutil.ContainsFinalizer(cb, kbindv1alpha1.CleanupFinalizer) {
		t.Error("binding lacks the cleanup finalizer")
	}

	crd := consumerCRD(t, "widgets.example.org")
	if crd.Labels[kbindv1alpha1.ManagedLabel] != "true" || crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != conn.Name {
		t.Errorf("consumer CRD markers: %v %v", crd.Labels, crd.Annotations)
	}
	hash := crd.Annotations[kbindv1alpha1.SchemaHashAnnotation]
	if !strings.HasPrefix(hash, "sha256:") || len(hash) != len("sha256:")+16 || hash != kbindschema.SpecHash(&crd.Spec) {
		t.Errorf("schema hash %q does not identify the spec (%s)", hash, kbindschema.SpecHash(&crd.Spec))
	}
	if w := cb.Status.BoundAPIs[1]; w.Name != "widgets.example.org" || w.CRDHash != hash || w.Instances == nil {
		t.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
	}
	want := providerCRD(t, "widgets.example.org").Spec.Versions[0]
	got := crd.Spec.Versions[0]
	if !equality.Semantic.DeepEqual(got.Schema, want.Schema) || !equality.Semantic.DeepEqual(got.AdditionalPrinterColumns, want.AdditionalPrinterColumns) ||
		!equality.Semantic.DeepEqual(got.Subresources, want.Subresources) {
		t.Errorf("consumer version %+v differs from the provider's %+v", got, want)
	}

	multi := consumerCRD(t, "multis.example.org")
	if len(multi.Spec.Versions) != 1 || multi.Spec.Versions[0].Name != "v1" || !multi.Spec.Versions[0].Storage ||
		multi.Spec.Conversion == nil || multi.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("multi-version CRD with webhook conversion became %+v / %+v", multi.Spec.Versions, multi.Spec.Conversion)
	}
	// ... and the binding says so, staying Ready; the API works at v1.
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionAllVersionsServed, metav1.ConditionFalse, kbindv1alpha1.ReasonConversionWebhook,
		"multis.example.org is served at v1 only, not at v1alpha1, v1beta1", "conversion", "webhook")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "2 API(s) bound")
	m := defaultObject("example.org/v1", "Multi", "at-storage")
	if err := env.Consumer.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitProviderSpec(t, env.Provider, "example.org/v1", m, 1)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

func TestHugeSchema(t *testing.T) {
	conn := connect(t, "huge", nil)
	cb := clusterBinding(t, "huges", conn.Name, "huges.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, "huges.example.org")
	if n := len(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties); n != 500 {
		t.Errorf("%d properties arrived, want 500", n)
	}
}

func TestAPINotExported(t *testing.T) {
	conn := connect(t, "not-exported", nil)
	cb := clusterBinding(t, "wrong-names", conn.Name, "Widget", "example.org/v1", "gadgets.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported,
		`not exported by Connection "not-exported"`, `"Widget" (not of the form <plural>.<group>, e.g. widgets.example.org`,
		`"example.org/v1" (not of the form <plural>.<group>`, "gadgets.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: "gadgets.example.org"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unexported API got a consumer CRD: %v", err)
	}
}

func TestBindingScopeAndOverlap(t *testing.T) {
	conn := connect(t, "scoped", nil, admitAll)
	b := namespacedBinding(t, "team-a", "cluster-api", conn.Name, "clusterwidgets.example.org")
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported,
		"cluster-scoped, which a namespaced Binding cannot activate", "clusterwidgets.example.org")

	// widgets.example.org is covered by the ClusterBinding of the first
	// test, or by this one.
	cb := clusterBinding(t, "covering", "crd-source", "widgets.example.org")
	defer env.Consumer.Delete(context.Background(), cb)
	overlap := namespacedBinding(t, "team-a", "widgets", conn.Name, "widgets.example.org")
	enginetest.WaitCondition(t, env.Consumer, overlap, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"already covered by a ClusterBinding", "widgets.example.org (ClusterBinding covering")
}

func TestBindingBeforeConnection(t *testing.T) {
	b := namespacedBinding(t, "team-b", "early", "late", "followers.example.org")
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, `Connection "late" not found`)
	connect(t, "late", nil, admitAll)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	consumerCRD(t, "followers.example.org")
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
	// followers.example.org belongs to Connection "late" (always); a second
	// Connection pins pinned.example.org once.
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: "late"}, &kbindv1alpha1.Connection{}); err != nil {
		connect(t, "late", nil, admitAll)
		clusterBinding(t, "followers", "late", "followers.example.org")
	}
	once := connect(t, "once", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.UpdatePolicy = kbindv1alpha1.UpdatePolicyOnce })
	clusterBinding(t, "pinned", once.Name, "pinned.example.org")
	followers := consumerCRD(t, "followers.example.org")
	pinned := consumerCRD(t, "pinned.example.org")

	addProperty(t, "followers.example.org", "color")
	addProperty(t, "pinned.example.org", "color")
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
	ctx := context.Background()
	conn := connect(t, "external", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyNone })
	cb := clusterBinding(t, "externals", conn.Name, "externals.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"CRD externals.example.org is not present; with pullPolicy None kbind never creates CRDs")

	// The operator installs the CRD; the CRD source stamps kbind's markers.
	external := enginetest.CRD("externals", "external", "External", "example.org", ns, false)
	if err := env.Consumer.Create(ctx, external); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, "externals.example.org")
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
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "externals.example.org"}, crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Errorf("an externally managed CRD was deleted: %v", err)
	}
}

func TestNeverTakesOverForeignCRDs(t *testing.T) {
	ctx := context.Background()
	pre := enginetest.CRD("preexistings", "preexisting", "Preexisting", "example.org", ns, false)
	if err := env.Consumer.Create(ctx, pre); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, "polite", nil)
	cb := clusterBinding(t, "preexistings", conn.Name, "preexistings.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"CRD preexistings.example.org exists and was not created by kbind")

	// A CRD stamped for another Connection is not stolen either: a
	// binding through this one at most joins it as a second route
	// (docs/bindings.md#one-api-several-providers), never re-stamping or
	// rewriting it.
	// (Another test's Connection installs widgets.example.org; run alone,
	// this test has no such CRD to try.)
	widgets := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "widgets.example.org"}, widgets); err == nil {
		other := clusterBinding(t, "steal-widgets", conn.Name, "widgets.example.org")
		enginetest.Eventually(t, "the second binding reports", func() error {
			if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
				return err
			}
			if len(other.Status.Conditions) == 0 {
				return fmt.Errorf("no conditions yet")
			}
			return nil
		})
		after := consumerCRD(t, "widgets.example.org")
		if owner := after.Annotations[kbindv1alpha1.ConnectionAnnotation]; owner != widgets.Annotations[kbindv1alpha1.ConnectionAnnotation] || owner == conn.Name {
			t.Errorf("the CRD stamped for %q is now stamped for %q", widgets.Annotations[kbindv1alpha1.ConnectionAnnotation], owner)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "preexistings.example.org"}, crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Labels) != 0 || len(crd.Annotations) != 0 {
		t.Errorf("a foreign CRD was touched: %v %v", crd.Labels, crd.Annotations)
	}
}

func TestUnbindDeletesTheCRD(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, "unbinder", nil, admitAll)
	cb := clusterBinding(t, "unbinds", conn.Name, "unbinds.example.org")
	b := namespacedBinding(t, "team-c", "unbinds", conn.Name, "unbinds.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	consumerCRD(t, "unbinds.example.org")

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
	crd := consumerCRD(t, "unbinds.example.org")
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
	cb2 := clusterBinding(t, "unbinds-again", conn.Name, "unbinds.example.org")
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
	ctx := context.Background()
	conn := connect(t, "vanisher", nil)
	cb := clusterBinding(t, "vanishings", conn.Name, "vanishings.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := providerCRD(t, "vanishings.example.org")
	delete(crd.Labels, kbindv1alpha1.ExportedLabel)
	if err := env.Provider.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported, "vanishings.example.org")
	// The consumer CRD and its instances stay.
	consumerCRD(t, "vanishings.example.org")
}

func TestOpenAPISource(t *testing.T) {
	conn := connect(t, "synthesized", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceOpenAPI })
	cb := clusterBinding(t, "synths", conn.Name, "synths.synth.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	crd := consumerCRD(t, "synths.synth.example.org")
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

func TestPullPolicyAllAndForbiddenSchemaRead(t *testing.T) {
	provider := testenv.StartClusterT(t, "all", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("everythings", "everything", "Everything", "all.example.org", ns, true),
	}})
	connect(t, "everything", provider.Kubeconfig, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyAll })
	consumerCRD(t, "everythings.all.example.org") // installed without any binding

	// A credential that may list CRDs (discovery) but not get one.
	user, err := provider.AddUser("list-only")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := client.New(provider.Config, client.Options{Scheme: env.Scheme})
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
	// everythings.all.example.org is stamped for "everything": use a fresh
	// name the CRD would get; the schema read is refused before that.
	cb := clusterBinding(t, "forbidden-read", conn.Name, "everythings.all.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"get customresourcedefinitions.apiextensions.k8s.io/everythings.all.example.org")
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)
}
