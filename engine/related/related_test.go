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

package related_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/related"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// env is the package's engine on a consumer/provider pair, with the
// Connection "provider" (admitting every namespace): started by the first
// test that calls setup, so the pure tests never wait for it.
var env *enginetest.Env

// relatedResync is the engine's binding resync. Longer than the whole
// package runs (about two minutes, five under -race): no resync happens
// while the tests run, so every change a test waits for arrives through a
// watch (SYNC-R2) — a copy that arrives at all, within the poll's
// PollTimeout, arrived through one.
const relatedResync = time.Hour

var shared = testenv.NewShared("engine on a consumer/provider pair", func() (*enginetest.Env, func() error, error) {
	e, stop, err := enginetest.Start(enginetest.Options{Engine: engine.Options{BindingResync: relatedResync}})
	if err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": e.Pair.Provider.Kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
				NamespacedBindings: enginetest.AdmitAllNamespaces()}},
	} {
		if err := e.Consumer.Create(ctx, o); err != nil {
			stop()
			return nil, nil, err
		}
	}
	env = e
	return e, func() error { stop(); return nil }, nil
})

func TestMain(m *testing.M) {
	startTimeout()
	testenv.Main(m, shared)
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
// runs it in parallel with the package's other tests: every test owns the
// namespaces, Connections, users and cluster-scoped objects it creates,
// named by unique.
func setup(t *testing.T) {
	t.Helper()
	shared.Get(t)
	t.Parallel()
}

// unique is base with a number no other test run of this process uses:
// parallel tests, and each run of -count=N, share one pair.
func unique(base string) string { return testenv.UniqueName(base) }

func ns(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if obj.GetNamespace() != "" {
		ns(t, c, obj.GetNamespace())
	}
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// binding creates a Binding in namespace with the related entries; it
// binds no API of its own beyond a placeholder it does not need.
func binding(t *testing.T, namespace, name string, entries ...kbindv1alpha1.RelatedResource) *kbindv1alpha1.Binding {
	t.Helper()
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:    kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:             []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: entries,
	}}
	mustCreate(t, env.Consumer, b)
	return b
}

func secret(namespace, name string, labels map[string]string, data string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": []byte(data)}}
}

func waitSecret(t *testing.T, c client.Client, namespace, name string, check func(*corev1.Secret) error) {
	t.Helper()
	enginetest.Eventually(t, "secret "+namespace+"/"+name, func() error {
		s := &corev1.Secret{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return err
		}
		return check(s)
	})
}

func waitAbsent(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	enginetest.Eventually(t, "gone: "+obj.GetNamespace()+"/"+obj.GetName(), func() error {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func data(want string) func(*corev1.Secret) error {
	return func(s *corev1.Secret) error {
		if string(s.Data["key"]) != want {
			return fmt.Errorf("data %q", s.Data["key"])
		}
		return nil
	}
}

func TestFromProviderSecretsAndRotation(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsA := unique("rel-a")
	src := secret(nsA, "db-credentials", map[string]string{"app": "db"}, "v1")
	mustCreate(t, env.Provider, src)
	mustCreate(t, env.Provider, secret(nsA, "unrelated", nil, "x"))
	b := binding(t, nsA, "related", kbindv1alpha1.RelatedResource{
		Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider,
		Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	})
	waitSecret(t, env.Consumer, nsA, "db-credentials", func(s *corev1.Secret) error {
		if string(s.Data["key"]) != "v1" || s.Type != corev1.SecretTypeOpaque || s.Labels[kbindv1alpha1.ManagedLabel] != "true" ||
			!strings.HasPrefix(s.Annotations[kbindv1alpha1.RelatedBindingAnnotation], string(b.UID)+"/") || s.Labels["app"] != "" {
			return fmt.Errorf("copy %+v", s.ObjectMeta)
		}
		return nil
	})
	if err := env.Consumer.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "unrelated"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unselected Secret was copied: %v", err)
	}

	// Rotation arrives through the provider watch, well under 5 s.
	src.Data["key"] = []byte("v2")
	if err := env.Provider.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	waitSecret(t, env.Consumer, nsA, "db-credentials", data("v2"))
	// No resync comes while the tests run (relatedResync): the copy came
	// through the watch; how long it took is reported, not asserted.
	t.Logf("rotation took %s", time.Since(rotated))

	// A source that stops matching loses its copy; so does a deleted one.
	src.Labels = nil
	if err := env.Provider.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "db-credentials"}})

	second := secret(nsA, "second", map[string]string{"app": "db"}, "s")
	mustCreate(t, env.Provider, second)
	waitSecret(t, env.Consumer, nsA, "second", data("s"))
	if err := env.Provider.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "second"}})

	// Binding deletion deletes every copy.
	mustCreate(t, env.Provider, secret(nsA, "third", map[string]string{"app": "db"}, "t"))
	waitSecret(t, env.Consumer, nsA, "third", data("t"))
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "third"}})
}

func TestFromConsumerConfigMapsNamesAndEntries(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsB := unique("rel-b")
	for _, n := range []string{"settings", "extra", "other"} {
		mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: n, Labels: map[string]string{"tier": "web"}},
			Data: map[string]string{"k": n}, BinaryData: map[string][]byte{"b": {0, 1, 2}}, Immutable: ptr.To(n == "settings")})
	}
	byName := kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromConsumer,
		Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"settings"}}}
	byBoth := kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromConsumer,
		Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"extra", "missing"},
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}}}
	b := binding(t, nsB, "related", byName, byBoth)
	enginetest.Eventually(t, "configmaps on the provider", func() error {
		for _, n := range []string{"settings", "extra"} {
			cm := &corev1.ConfigMap{}
			if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsB, Name: n}, cm); err != nil {
				return err
			}
			if cm.Data["k"] != n || len(cm.BinaryData["b"]) != 3 || (n == "settings") != (cm.Immutable != nil && *cm.Immutable) {
				return fmt.Errorf("copy of %s: %+v", n, cm)
			}
		}
		return nil
	})
	if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "other"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unselected ConfigMap was copied: %v", err)
	}
	// Removing the second entry deletes its copies only. The controller
	// writes the binding's status meanwhile: read again on a conflict.
	enginetest.Eventually(t, "the second entry removed", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.RelatedResources = []kbindv1alpha1.RelatedResource{byName}
		return env.Consumer.Update(ctx, b)
	})
	waitAbsent(t, env.Provider, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "extra"}})
	if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "settings"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the first entry's copy went with the second entry: %v", err)
	}
	// An immutable source changed by recreation replaces its copy.
	settings := &corev1.ConfigMap{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "settings"}, settings); err != nil {
		t.Fatal(err)
	}
	if err := env.Consumer.Delete(ctx, settings); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "settings"},
		Data: map[string]string{"k": "recreated"}, Immutable: ptr.To(true)})
	enginetest.Eventually(t, "the immutable copy replaced", func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "settings"}, cm); err != nil {
			return err
		}
		if cm.Data["k"] != "recreated" {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})
}

func TestForeignTargetsAndTokens(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsC := unique("rel-c")
	selected := map[string]string{"copy": "yes"}
	// The provider already has an unmanaged Secret of the same name.
	foreign := secret(nsC, "shared", nil, "provider-owned")
	mustCreate(t, env.Provider, foreign)
	mustCreate(t, env.Consumer, secret(nsC, "shared", selected, "consumer"))
	mustCreate(t, env.Consumer, secret(nsC, "plain", selected, "p"))
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsC, Name: "sa-token", Labels: selected,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type: corev1.SecretTypeServiceAccountToken, Data: map[string][]byte{"token": []byte("t")}}
	mustCreate(t, env.Consumer, token)
	b := binding(t, nsC, "related", kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer,
		Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: selected}}})
	waitSecret(t, env.Provider, nsC, "plain", data("p"))
	enginetest.Eventually(t, "related status", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		r := b.Status.RelatedResources
		if r == nil || r.Copies != 1 || r.Conflicts != 1 || r.Skipped != 1 {
			return fmt.Errorf("related status %+v", r)
		}
		return nil
	})
	got := &corev1.Secret{}
	if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil || string(got.Data["key"]) != "provider-owned" {
		t.Errorf("the foreign target was touched: %v %q", err, got.Data["key"])
	}
	if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsC, Name: "sa-token"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a service-account token was copied: %v", err)
	}
	enginetest.Eventually(t, "Warning Events", func() error {
		var events corev1.EventList
		if err := env.Consumer.List(ctx, &events, client.InNamespace(nsC)); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			seen[e.Reason] = true
			if strings.Contains(e.Message, "provider-owned") || strings.Contains(e.Message, "consumer") && e.Reason == "" {
				return fmt.Errorf("an Event carries Secret data: %s", e.Message)
			}
		}
		if !seen["RelatedConflict"] || !seen["RelatedSkipped"] {
			return fmt.Errorf("events %v", seen)
		}
		return nil
	})
}

func TestFromConsumerRotation(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsE := unique("rel-e")
	src := secret(nsE, "api-key", map[string]string{"share": "yes"}, "k1")
	mustCreate(t, env.Consumer, src)
	binding(t, nsE, "related", kbindv1alpha1.RelatedResource{
		Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer,
		Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"share": "yes"}}},
	})
	waitSecret(t, env.Provider, nsE, "api-key", data("k1"))
	// No resync comes while the tests run (relatedResync): the change
	// arrives through the metadata-only watch on consumer Secrets.
	src.Data["key"] = []byte("k2")
	if err := env.Consumer.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	waitSecret(t, env.Provider, nsE, "api-key", data("k2"))
	t.Logf("FromConsumer rotation took %s", time.Since(changed))
}

func TestEntryIDFollowsContent(t *testing.T) {
	a := kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider}
	b := a
	b.Selector.Names = []string{"x"}
	first, again := related.EntryID(a), related.EntryID(a)
	if first == related.EntryID(b) || first != again || len(first) != 10 {
		t.Error("an entry's identity must follow its content")
	}
}

func TestForbiddenTargetNamespace(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsD, limited := unique("rel-d"), unique("related-limited")
	user, err := env.Pair.Provider.AddUser(limited)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Grant(t, env.Provider, limited, user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	)
	kc, err := testenv.KubeconfigFor("provider", user.Config)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: limited}, Data: map[string][]byte{"kubeconfig": kc}})
	mustCreate(t, env.Consumer, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: limited},
		Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: limited},
			NamespacedBindings: enginetest.AdmitAllNamespaces()}})
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsD, Name: "cfg"}, Data: map[string]string{"a": "b"}})
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsD, Name: "related"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: limited},
		APIs:          []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: []kbindv1alpha1.RelatedResource{{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"cfg"}}}},
	}}
	mustCreate(t, env.Consumer, b)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"create namespaces/"+nsD+" (provider side)")
	// Once the namespace exists, the copy is made (at the next reconcile:
	// here a spec change, in production also the resync) and the condition
	// clears.
	ns(t, env.Provider, nsD)
	enginetest.Eventually(t, "a spec change", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.RelatedResources[0].Selector.Names = []string{"cfg", "more"}
		return env.Consumer.Update(ctx, b)
	})
	enginetest.Eventually(t, "the copy", func() error {
		return env.Provider.Get(ctx, client.ObjectKey{Namespace: nsD, Name: "cfg"}, &corev1.ConfigMap{})
	})
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
}

// TestReapMarkIsClearedOnARelatedCopy (issue #52, path 4, related copies):
// the backend reaper marks the provider copies of a consumer whose Lease
// looks stale (core.kbind.io/reap-marked-at); a live konnector's related
// syncer removes the mark from every related copy it keeps, through the
// mark's own event (no binding resync comes while the tests run), and leaves the
// copy's payload as it is.
func TestReapMarkIsClearedOnARelatedCopy(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsReap := unique("rel-reap")
	mustCreate(t, env.Consumer, secret(nsReap, "db-password", map[string]string{"share": "yes"}, "s1"))
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsReap, Name: "settings", Labels: map[string]string{"share": "yes"}},
		Data: map[string]string{"k": "v"}})
	sel := kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"share": "yes"}}}
	binding(t, nsReap, "related",
		kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer, Selector: sel},
		kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromConsumer, Selector: sel})
	waitSecret(t, env.Provider, nsReap, "db-password", data("s1"))
	copies := []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}
	names := []string{"db-password", "settings"}
	enginetest.Eventually(t, "the ConfigMap copy on the provider", func() error {
		return env.Provider.Get(ctx, client.ObjectKey{Namespace: nsReap, Name: "settings"}, copies[1])
	})

	// The reaper's phase-1 mark, written as the backend writes it.
	for i, obj := range copies {
		if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsReap, Name: names[i]}, obj); err != nil {
			t.Fatal(err)
		}
		mark := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, obj.GetUID(), kbindv1alpha1.ReapMarkedAtAnnotation,
			time.Now().UTC().Format(time.RFC3339))
		if err := env.Provider.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(mark))); err != nil {
			t.Fatal(err)
		}
	}
	marked := time.Now()
	enginetest.Eventually(t, "the reaper's marks cleared", func() error {
		for i, obj := range copies {
			if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsReap, Name: names[i]}, obj); err != nil {
				return err
			}
			if m, ok := obj.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation]; ok {
				return fmt.Errorf("%T %s still marked (%s)", obj, names[i], m)
			}
		}
		return nil
	})
	// No resync comes while the tests run (relatedResync): the marks were
	// cleared through their own event; how long it took is reported.
	t.Logf("marks cleared after %s", time.Since(marked))
	s := copies[0].(*corev1.Secret)
	if string(s.Data["key"]) != "s1" || s.Annotations[kbindv1alpha1.RelatedBindingAnnotation] == "" || s.UID == "" {
		t.Errorf("the Secret copy changed: data %q, annotations %v", s.Data["key"], s.Annotations)
	}
}
