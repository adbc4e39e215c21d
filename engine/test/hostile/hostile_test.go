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
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// secretLike is a provider kind named like a core kind, in its own group.
func secretLike() *apiextensionsv1.CustomResourceDefinition {
	return enginetest.CRD("secrets", "secret", "Secret", "hostile.example.org", apiextensionsv1.NamespaceScoped, true)
}

// manyVersions serves 100 versions (v1 … v100), v100 the storage version;
// with no conversion webhook every version has the same schema.
func manyVersions() *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("multis", "multi", "Multi", "hostile.example.org", apiextensionsv1.NamespaceScoped, true)
	base := crd.Spec.Versions[0]
	crd.Spec.Versions = nil
	for i := 1; i <= 100; i++ {
		v := *base.DeepCopy()
		v.Name, v.Storage = fmt.Sprintf("v%d", i), i == 100
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	return crd
}

// loose keeps unknown fields at its root: no schema at all.
func loose() *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("looses", "loose", "Loose", "hostile.example.org", apiextensionsv1.NamespaceScoped, true)
	preserve := true
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}
	return crd
}

// engineOptions raise the provider client's rate limit above the
// konnector's default (100 QPS, burst 200), as an operator syncing
// thousands of namespaces would (--provider-qps): the first sync of an
// object in a new namespace costs two provider writes (the namespace and
// the apply), so the default syncs 50 such objects a second — 200 s for
// TestTenThousandNamespaces' 10000 before its deletes, measured, every
// second of it waiting on the rate limiter — and the test is about what
// 10000 namespaces do to kbind, not about that limit.
var engineOptions = engine.Options{ProviderQPS: 400, ProviderBurst: 800}

// provider is the package's pair and engine, every API of the package
// bound in a ClusterBinding of its own, started by the first test that
// asks. The tests are tenants of it: each works in a consumer namespace
// of its own (tenant), through the binding of its own API; those that
// share the Widgets binding use their own object names.
//
// They run one after another, in file order, TestAHugeSchema last: its
// 1.5 MiB CRD makes every later list of the provider's CRDs (the
// Connection's discovery) slow, and tried in parallel on a loaded machine
// (load 70 on 2 cores) the tenants' waits overran the engine's provider
// timeout: the Connection not Ready, bindings Pending, the largest Widget
// neither synced nor refused within a minute.
var provider = testenv.NewShared("pair and engine with the hostile APIs bound", startProvider)

func TestMain(m *testing.M) { testenv.Main(m, provider) }

func startProvider() (*enginetest.Env, func() error, error) {
	env, stop, err := enginetest.Start(enginetest.Options{Engine: engineOptions, ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("shifters", "shifter", "Shifter", "hostile.example.org", apiextensionsv1.NamespaceScoped, true),
		secretLike(), manyVersions(), loose(), keeps(),
		enginetest.CRD("spreads", "spread", "Spread", "hostile.example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	if err != nil {
		return nil, nil, err
	}
	if err := setup(env); err != nil {
		stop()
		return nil, nil, err
	}
	return env, func() error { stop(); return nil }, nil
}

// setup connects to the provider and binds each API in its own
// ClusterBinding, so that one API's trouble shows on its binding alone.
func setup(env *enginetest.Env) error {
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"}}},
	}
	for _, api := range []string{"widgets.example.org", "shifters.hostile.example.org", "secrets.hostile.example.org", "multis.hostile.example.org", "looses.hostile.example.org",
		"keeps.hostile.example.org", "spreads.hostile.example.org"} {
		objs = append(objs, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: strings.Split(api, ".")[0]}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
			APIs:          []kbindv1alpha1.APIReference{{Name: api}}}})
	}
	for _, o := range objs {
		if err := env.Consumer.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// tenant is one test's share of the provider: the package's pair and
// engine, and a consumer namespace of the test's own (its provider copies
// land in the provider namespace of that name).
type tenant struct {
	*enginetest.Env
	ns string
}

// newTenant returns the package's environment (starting it if no test has
// yet) with a new consumer namespace named after the test.
func newTenant(t *testing.T) *tenant {
	t.Helper()
	env := provider.Get(t)
	name := "hostile-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), "-"), "-")
	name = strings.TrimRight(name[:min(len(name), 63)], "-")
	if err := env.Consumer.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating the test's namespace %s: %v", name, err)
	}
	return &tenant{Env: env, ns: name}
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// obj is an object of kind gvk in the tenant's namespace.
func (env *tenant) obj(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(env.ns)
	u.SetName(name)
	return u
}

func (env *tenant) ready(t *testing.T, binding string) {
	t.Helper()
	enginetest.WaitCondition(t, env.Consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: binding}},
		kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

// roundTrip creates u on the consumer and waits for its provider copy
// with the same spec, then for a provider status back on the consumer.
func (env *tenant) roundTrip(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	enginetest.Eventually(t, "create "+u.GetKind()+" (the consumer CRD established)", func() error {
		err := env.Consumer.Create(ctx, u.DeepCopy())
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		return nil
	})
	copyOf := &unstructured.Unstructured{}
	copyOf.SetGroupVersionKind(u.GroupVersionKind())
	enginetest.Eventually(t, "the provider copy of "+u.GetKind(), func() error {
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(u), copyOf); err != nil {
			return err
		}
		if fmt.Sprint(copyOf.Object["spec"]) != fmt.Sprint(u.Object["spec"]) {
			return fmt.Errorf("spec differs")
		}
		return nil
	})
	copyOf.Object["status"] = map[string]any{"phase": "Ready"}
	if err := env.Provider.Status().Update(ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the status of "+u.GetKind()+" down", func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Ready" {
			return fmt.Errorf("status phase %q", phase)
		}
		return nil
	})
}

// A kind named Secret in another group is just another API: its CRD is
// installed under its own group, objects sync, the core Secrets are
// untouched.
func TestKindNamedLikeACoreKind(t *testing.T) {
	env := newTenant(t)
	env.ready(t, "secrets")
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1alpha1", Kind: "Secret"}, "s1", map[string]any{"data": "not a core secret"}))
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Namespace: env.ns, Name: "s1"}, &corev1.Secret{}); err == nil {
		t.Error("a core Secret named s1 appeared")
	}
}

// A CRD serving 100 versions: every version is installed on the consumer
// and objects sync at the storage version and at the oldest one.
func TestAHundredVersions(t *testing.T) {
	env := newTenant(t)
	env.ready(t, "multis")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: "multis.hostile.example.org"}, crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 100 {
		t.Errorf("the consumer CRD serves %d versions, want 100", len(crd.Spec.Versions))
	}
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "hostile.example.org", Version: "v100", Kind: "Multi"}, "m100", map[string]any{"a": "b"}))
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1", Kind: "Multi"}, "m1", map[string]any{"c": "d"}))
}

// No schema at all (unknown fields kept at the root): the whole spec goes
// up as it is, nested and odd values included.
func TestUnknownFieldsEverywhere(t *testing.T) {
	env := newTenant(t)
	env.ready(t, "looses")
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1alpha1", Kind: "Loose"}, "l1", map[string]any{
		"deep": map[string]any{"deeper": []any{int64(1), "two", map[string]any{"three": true}}}, "empty": map[string]any{}, "nothing": nil,
	}))
}

// An object near the API server's 1.5 MiB request limit syncs both ways.
// The largest object the consumer accepts, whose provider copy (with
// kbind's markers) may not fit, either syncs or is refused and reported —
// by the provider (a ProviderRejected Warning Event and the binding's
// failed count), or by the consumer's own storage when kbind's finalizer
// and annotation push it over the limit (ObjectTooLarge; which one depends
// on a few bytes: the namespace's name, the managed fields) — never lost
// on the consumer, while the binding's other objects keep syncing.
func TestObjectsAtTheSizeLimit(t *testing.T) {
	env := newTenant(t)
	ctx := context.Background()
	env.ready(t, "widgets")
	widget := schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}
	env.roundTrip(t, env.obj(widget, "big", map[string]any{"blob": strings.Repeat("x", 1400*1024)}))

	var size int
	for size = 1536 * 1024; size > 1400*1024; size -= 256 {
		if err := env.Consumer.Create(ctx, env.obj(widget, "largest", map[string]any{"blob": strings.Repeat("y", size)})); err == nil {
			break
		}
	}
	t.Logf("the largest Widget the consumer accepts has a %d-byte spec", size)
	largest := env.obj(widget, "largest", nil)
	enginetest.EventuallyWithin(t, 60*time.Second, "largest synced or reported", func() error {
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(largest), largest.DeepCopy()); err == nil {
			t.Log("its provider copy fits")
			return nil
		}
		var events corev1.EventList
		if err := env.Consumer.List(ctx, &events, client.InNamespace(env.ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "largest" && (e.Reason == "ProviderRejected" || e.Reason == "ObjectTooLarge") {
				t.Logf("refused and reported (%s): %s", e.Reason, e.Message)
				return nil
			}
		}
		return fmt.Errorf("neither a provider copy nor a ProviderRejected or ObjectTooLarge Event; engine log: %s", lastLines(env.Logs.String(), env.ns+"/largest", 8))
	})
	if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(largest), largest); err != nil {
		t.Errorf("the consumer object is gone: %v", err)
	}
	env.roundTrip(t, env.obj(widget, "small-after", map[string]any{"size": int64(1)}))
}

// A provider CRD that changes scope (deleted, re-created cluster-scoped):
// a consumer CRD's scope cannot change, so the binding reports the change
// and names the fix; its objects stay on the consumer, and other bindings
// keep syncing.
func TestACRDThatChangesScope(t *testing.T) {
	env := newTenant(t)
	ctx := context.Background()
	env.ready(t, "shifters")
	shifter := schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1alpha1", Kind: "Shifter"}
	env.roundTrip(t, env.obj(shifter, "s1", map[string]any{"a": "b"}))

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Provider.Get(ctx, client.ObjectKey{Name: "shifters.hostile.example.org"}, crd); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the provider CRD gone", func() error {
		err := env.Provider.Get(ctx, client.ObjectKey{Name: "shifters.hostile.example.org"}, &apiextensionsv1.CustomResourceDefinition{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return client.IgnoreNotFound(err)
	})
	if err := env.Provider.Create(ctx, enginetest.CRD("shifters", "shifter", "Shifter", "hostile.example.org", apiextensionsv1.ClusterScoped, true)); err != nil {
		t.Fatal(err)
	}

	var msg string
	enginetest.EventuallyWithin(t, 60*time.Second, "the scope change reported on the binding", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "shifters"}, cb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionReady))
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "a CRD's scope cannot change") {
			return fmt.Errorf("Ready %+v", c)
		}
		msg = c.Reason + ": " + c.Message
		return nil
	})
	t.Logf("shifters: Ready=False/%s", msg)
	// The consumer object is not lost.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(shifter)
	if err := env.Consumer.Get(ctx, client.ObjectKey{Namespace: env.ns, Name: "s1"}, u); err != nil {
		t.Errorf("the consumer object is gone: %v", err)
	}
	// Other bindings are unaffected.
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}, "after-shift", map[string]any{"size": int64(2)}))
}

// lastLines are the last n lines of s mentioning word, each cut at 400
// bytes (a line may hold a 1.5 MiB object).
func lastLines(s, word string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			if i := strings.Index(l, word); i > 200 {
				l = l[i-200:]
			}
			if len(l) > 700 {
				l = l[:700] + "…"
			}
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}
