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
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// One entry's names are bounded by the API: each name is a watch, and a
// list too long to read is a label selector's job (docs/related.md).
func TestRelatedNamesAreLimited(t *testing.T) {
	setup(t)
	nsMax := unique("rel-max")
	ns(t, env.Consumer, nsMax)
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsMax, Name: "too-many"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: []kbindv1alpha1.RelatedResource{byName(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer,
			names("c", 33)...)},
	}}
	err := env.Consumer.Create(context.Background(), b)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must have at most 32 items") {
		t.Fatalf("33 names: %v, want Invalid (at most 32 items)", err)
	}
	b.Spec.RelatedResources[0].Selector.Names = names("c", 32)
	if err := env.Consumer.Create(context.Background(), b); err != nil {
		t.Fatalf("32 names: %v", err)
	}
}

// TestRelatedWatchBudget: a consumer namespace's bindings hold at most
// the konnector's budget of related watches. An entry that would exceed
// it copies nothing, keeps the copies it has, and the binding says so;
// the consumer API server's open watches stay within the budget; another
// namespace has a budget of its own.
func TestRelatedWatchBudget(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsBudget, nsOther := unique("rel-budget"), unique("rel-budget-other")
	const budget = 8
	consumer := env.StartConsumerWith(t, unique("consumer-budget"), func(o *engine.Options) { o.RelatedWatchesPerNamespace = budget })
	c := consumer.Client
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
		Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}})
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
		Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
			NamespacedBindings: enginetest.AdmitAllNamespaces()}}
	mustCreate(t, c, conn)
	enginetest.WaitCondition(t, c, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	for _, n := range append(names("c", 24), names("k", 3)...) {
		mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsBudget, Name: n}, Data: map[string]string{"k": n}})
	}
	for _, n := range names("o", 6) {
		mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsOther, Name: n}, Data: map[string]string{"k": n}})
	}
	before := enginetest.OpenWatches(t, consumer.Cluster.Config, "configmaps")
	up := func(names ...string) kbindv1alpha1.RelatedResource {
		return byName(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, names...)
	}
	onProvider := func(ns string, names ...string) func() error {
		return func() error {
			for _, n := range names {
				if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &corev1.ConfigMap{}); err != nil {
					return err
				}
			}
			return nil
		}
	}

	// Within the budget (3 + 3 names): everything is copied.
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsBudget, Name: "big"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: []kbindv1alpha1.RelatedResource{up(names("c", 3)...), up(names("k", 3)...)}}}
	mustCreate(t, c, b)
	enginetest.Eventually(t, "the copies within the budget", onProvider(nsBudget, append(names("c", 3), names("k", 3)...)...))

	// The first entry grows to 24 names: over the budget, it copies
	// nothing more and its copies stay; the second entry still fits.
	enginetest.Eventually(t, "growing the first entry", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.RelatedResources[0] = up(names("c", 24)...)
		return c.Update(ctx, b)
	})
	enginetest.WaitCondition(t, c, b, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"relatedResources[0]", "related watches", fmt.Sprintf("budget of %d", budget), "namespace "+nsBudget)
	// The budget, and one watch of kbind's consumer-side copies (ConfigMaps)
	// in the namespace.
	opened := enginetest.OpenWatches(t, consumer.Cluster.Config, "configmaps") - before
	t.Logf("open ConfigMap watches on the consumer: %d more for %s (budget %d)", opened, nsBudget, budget)
	if opened > budget+1 {
		t.Errorf("%d more ConfigMap watches for one namespace, want at most %d", opened, budget+1)
	}
	other := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsOther, Name: "small"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: []kbindv1alpha1.RelatedResource{up(names("o", 6)...)}}}
	mustCreate(t, c, other)
	enginetest.Eventually(t, "another namespace's copies", onProvider(nsOther, names("o", 6)...))
	if err := onProvider(nsBudget, append(names("c", 3), names("k", 3)...)...)(); err != nil {
		t.Errorf("a copy went while its entry was over the budget: %v", err)
	}
	if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsBudget, Name: "c3"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("an entry over the budget copied c3: %v", err)
	}
	opened = enginetest.OpenWatches(t, consumer.Cluster.Config, "configmaps") - before
	t.Logf("open ConfigMap watches on the consumer: %d more for both namespaces", opened)
	if opened > 2*(budget+1) {
		t.Errorf("%d more ConfigMap watches, want at most %d", opened, 2*(budget+1))
	}
}

// TestASlowNamespaceDoesNotDelayAnother: a binding whose related
// informers cannot list (the provider holds the list of its namespace's
// Secrets) does not hold up the bindings of other namespaces, which share
// its reconcile worker: a reconcile never waits for informers to sync.
func TestASlowNamespaceDoesNotDelayAnother(t *testing.T) {
	setup(t)
	nsA, nsB, slow := unique("rel-slow-a"), unique("rel-slow-b"), unique("slow")
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	var held atomic.Int64
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"+nsA+"/secrets") {
			held.Add(1)
			return enginetest.Fault{Delay: time.Hour}
		}
		return enginetest.Fault{}
	})
	connect(t, slow, proxy.Kubeconfig(t))
	mustCreate(t, env.Provider, secret(nsA, "a", nil, "a"))
	mustCreate(t, env.Provider, secret(nsB, "b", nil, "b"))
	bindingOn(t, slow, nsA, "stuck", byName(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, "a"))
	enginetest.Eventually(t, "the list of "+nsA+" held", func() error {
		if held.Load() == 0 {
			return fmt.Errorf("no request yet")
		}
		return nil
	})

	start := time.Now()
	bindingOn(t, slow, nsB, "prompt", byName(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, "b"))
	// A reconcile that waited for the held informer would wait as long as
	// the list is held (an hour; every retry is held too): the copy would
	// never come. So the generous poll proves it, and how long the copy
	// took is reported, not asserted.
	enginetest.Eventually(t, "the copy in "+nsB, func() error {
		return env.Consumer.Get(context.Background(), client.ObjectKey{Namespace: nsB, Name: "b"}, &corev1.Secret{})
	})
	t.Logf("the copy in %s appeared after %s while %s's list was held", nsB, time.Since(start), nsA)
	absent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "a"}}, "its source was never read")
}
