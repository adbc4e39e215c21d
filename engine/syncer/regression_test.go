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

package syncer_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Regression tests for issue #14.

func connectAs(t *testing.T, name string, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: name}}},
	} {
		if err := env.Consumer.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func bindCluster(t *testing.T, name, connection string, apis ...string) *kbindv1alpha1.ClusterBinding {
	t.Helper()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: connection}}}
	for _, a := range apis {
		cb.Spec.APIs = append(cb.Spec.APIs, kbindv1alpha1.APIReference{Name: a})
	}
	if err := env.Consumer.Create(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	return cb
}

// Removing an API from a binding releases it exactly like deleting the
// binding: provider copies deleted, syncer finalizers released, kbind's
// consumer CRD deleted (the last ClusterBinding listed it), and nothing
// left running for it — not even a watch.
func TestRemovingAnAPIReleasesLikeUnbind(t *testing.T) {
	parallelEnv(t)
	ns := unique("narrow-a")
	ctx := context.Background()
	narrowGVK, narrows := namespacedAPI(t, "Narrow", "narrow.example.org")
	keeperGVK, keepers := namespacedAPI(t, "Keeper", "keeper.example.org")
	cb := bindCluster(t, unique("narrowing"), "provider", narrows, keepers)
	create(t, env.Consumer, object(narrowGVK, ns, "n1", map[string]any{"a": "b"}))
	create(t, env.Consumer, object(keeperGVK, ns, "k1", map[string]any{"a": "b"}))
	waitCopy(t, narrowGVK, ns, "n1", nil)
	waitCopy(t, keeperGVK, ns, "k1", nil)
	if enginetest.OpenWatches(t, env.Pair.Consumer.Config, "narrows") == 0 {
		t.Fatal("no consumer watch on narrows while bound")
	}

	enginetest.Eventually(t, "narrows removed from the binding", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		cb.Spec.APIs = []kbindv1alpha1.APIReference{{Name: keepers}}
		return env.Consumer.Update(ctx, cb)
	})
	waitGone(t, env.Provider, narrowGVK, ns, "n1")
	enginetest.Eventually(t, "the consumer CRD narrows deleted", func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := env.Consumer.Get(ctx, client.ObjectKey{Name: narrows}, crd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	enginetest.Eventually(t, "narrows gone from status.boundAPIs", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if len(cb.Status.BoundAPIs) != 1 || cb.Status.BoundAPIs[0].Name != keepers {
			return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
		}
		return nil
	})
	enginetest.Eventually(t, "no watch left on narrows", func() error {
		if n := enginetest.OpenWatches(t, env.Pair.Consumer.Config, "narrows"); n != 0 {
			return fmt.Errorf("%d consumer watch(es)", n)
		}
		if n := enginetest.OpenWatches(t, env.Pair.Provider.Config, "narrows"); n != 0 {
			return fmt.Errorf("%d provider watch(es)", n)
		}
		return nil
	})
	// The other API is untouched.
	if _, ok := get(t, env.Provider, keeperGVK, ns, "k1"); !ok {
		t.Error("the pcopy of an API still listed was deleted")
	}
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
}

// Hundreds of objects refused by the provider keep the binding's status
// writable: refusals are counted per verb and resource, and the message is
// kept within the API server's limit.
func TestManyRefusalsKeepStatusWritable(t *testing.T) {
	parallelEnv(t)
	ns := unique("refused-a")
	ctx := context.Background()
	refusedGVK, refuseds := namespacedAPI(t, "Refused", "refused.example.org")
	connection := unique("readonly")
	user := addUser(t, "kbind-readonly", "kbind:readonly")
	enginetest.Grant(t, env.Provider, user.Name, user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{refusedGVK.Group}, Resources: []string{"refuseds"}, Verbs: []string{"get", "list", "watch"}})
	kc, err := testenv.KubeconfigFor(connection, user.Config)
	if err != nil {
		t.Fatal(err)
	}
	connectAs(t, connection, kc)
	cb := bindCluster(t, refuseds, connection, refuseds)

	const n = 500
	ensureNamespace(t, env.Consumer, ns)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			o := object(refusedGVK, ns, fmt.Sprintf("an-object-with-a-rather-long-name-to-fill-messages-%04d", i), map[string]any{"a": "b"})
			if err := env.Consumer.Create(ctx, o); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	enginetest.EventuallyWithin(t, 2*enginetest.PollTimeout, "every refusal counted in the binding's status", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if len(cb.Status.BoundAPIs) != 1 || cb.Status.BoundAPIs[0].Instances == nil || cb.Status.BoundAPIs[0].Instances.Failed != n {
			return fmt.Errorf("boundAPIs %+v", cb.Status.BoundAPIs)
		}
		return nil
	})
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		fmt.Sprintf("apply Refused in namespace %s: forbidden (%d object(s))", ns, n))
}

// SYNC-5: a provider pcopy that is terminating is waited for, not raced:
// a consumer change made meanwhile is not applied to the dying pcopy; once
// it is gone, a new pcopy carries the current spec.
func TestTerminatingCopyIsWaitedFor(t *testing.T) {
	parallelEnv(t)
	ns := unique("terminating-a")
	ctx := context.Background()
	w := create(t, env.Consumer, object(widgetGVK, ns, "w1", map[string]any{"size": int64(1)}))
	pcopy := waitCopy(t, widgetGVK, ns, "w1", nil)
	controllerutil.AddFinalizer(pcopy, "example.org/slow-cleanup")
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Delete(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	oldUID := pcopy.GetUID()
	enginetest.Eventually(t, "consumer spec updated", func() error {
		u, _ := get(t, env.Consumer, widgetGVK, ns, "w1")
		u.Object["spec"] = map[string]any{"size": int64(2)}
		return env.Consumer.Update(ctx, u)
	})
	// The Widget syncs other objects meanwhile: once a later object has a
	// pcopy, w1's update has been seen too.
	create(t, env.Consumer, object(widgetGVK, ns, "w2", map[string]any{"size": int64(1)}))
	waitCopy(t, widgetGVK, ns, "w2", nil)
	dying, ok := get(t, env.Provider, widgetGVK, ns, "w1")
	if !ok || dying.GetUID() != oldUID || dying.Object["spec"].(map[string]any)["size"] != int64(1) {
		t.Fatalf("the terminating pcopy was written: %v", dying)
	}

	controllerutil.RemoveFinalizer(dying, "example.org/slow-cleanup")
	if err := env.Provider.Update(ctx, dying); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "w1", func(u *unstructured.Unstructured) error {
		if u.GetUID() == oldUID || u.Object["spec"].(map[string]any)["size"] != int64(2) {
			return fmt.Errorf("uid %s spec %v", u.GetUID(), u.Object["spec"])
		}
		return nil
	})
	_ = env.Consumer.Delete(ctx, w)
}

// Cost grows with change, not with object count: syncing many objects
// costs no API LIST (and no GET) per object on the provider.
func TestNoListPerObject(t *testing.T) {
	parallelEnv(t)
	ns := unique("counted-a")
	ctx := context.Background()
	countedGVK, counteds := namespacedAPI(t, "Counted", "counted.example.org")
	connection := unique("counted")
	var mu sync.Mutex
	counts := map[string]int{}
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if strings.HasPrefix(r.URL.Path, "/apis/"+countedGVK.Group+"/") {
			verb := r.Method
			if r.Method == http.MethodGet {
				switch {
				case r.URL.Query().Get("watch") == "true":
					verb = "WATCH"
				case strings.HasSuffix(r.URL.Path, "/counteds"):
					verb = "LIST"
				}
			}
			mu.Lock()
			counts[verb]++
			mu.Unlock()
		}
		return enginetest.Fault{}
	})
	connectAs(t, connection, proxy.Kubeconfig(t))
	bindCluster(t, counteds, connection, counteds)

	const n = 100
	ensureNamespace(t, env.Consumer, ns)
	for i := 0; i < n; i++ {
		create(t, env.Consumer, object(countedGVK, ns, fmt.Sprintf("c%03d", i), map[string]any{"i": int64(i)}))
	}
	enginetest.Eventually(t, "every pcopy", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(countedGVK.GroupVersion().WithKind("CountedList"))
		if err := env.Provider.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d of %d", len(list.Items), n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if counts["LIST"] > 3 || counts["GET"] > 3 {
		t.Errorf("requests on counteds for %d objects: %v (want a handful of LISTs and GETs, independent of the count)", n, counts)
	}
	if counts["PATCH"] < n {
		t.Errorf("requests %v: fewer applies than objects", counts)
	}
	t.Logf("provider requests on counteds for %d objects: %v", n, counts)
}

// SYNC-D: a consumer object deleted while the provider cache lags (a copy
// applied a moment ago, a watch re-listing after an outage or a compacted
// resourceVersion) keeps its finalizer until the provider itself says the
// copy is gone. Before, the cache's "no copy" released the finalizer at
// once and left the copy behind for good (found by the fault suite's
// watch-expiry scenario).
func TestDeletionConfirmsAbsenceWithTheProvider(t *testing.T) {
	parallelEnv(t)
	ns := unique("lagged-a")
	ctx := context.Background()
	// The Lagged API's provider watch is held by the proxy.
	laggedGVK, laggeds := namespacedAPI(t, "Lagged", "lagged.example.org")
	connection := unique("lagged")
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	connectAs(t, connection, proxy.Kubeconfig(t))
	bindCluster(t, laggeds, connection, laggeds)
	// From now on the Lagged informer's watch, resumed after its
	// connection is closed, never delivers: the cache (synced before)
	// does not see the copies the syncer applies.
	var resumed atomic.Int32
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if strings.HasPrefix(r.URL.Path, "/apis/"+laggedGVK.Group+"/") && r.URL.Query().Get("watch") == "true" {
			resumed.Add(1)
			return enginetest.Fault{Delay: time.Hour}
		}
		return enginetest.Fault{}
	})
	proxy.CloseClientConnections()
	enginetest.Eventually(t, "the Lagged watch resumed (and held)", func() error {
		if resumed.Load() == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	w := create(t, env.Consumer, object(laggedGVK, ns, "l1", map[string]any{"size": int64(1)}))
	waitCopy(t, laggedGVK, ns, "l1", nil)
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	// The copy is deleted before the consumer object goes.
	waitGone(t, env.Consumer, laggedGVK, ns, "l1")
	if pcopy, ok := get(t, env.Provider, laggedGVK, ns, "l1"); ok {
		t.Errorf("the provider copy outlived the consumer object: %v", pcopy.GetAnnotations())
	}
}
