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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// Regression tests for issue #14.

var (
	narrowGVK  = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Narrow"}
	keeperGVK  = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Keeper"}
	refusedGVK = schema.GroupVersionKind{Group: "refused.example.org", Version: "v1alpha1", Kind: "Refused"}
	countedGVK = schema.GroupVersionKind{Group: "counted.example.org", Version: "v1alpha1", Kind: "Counted"}
)

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
	ctx := context.Background()
	cb := bindCluster(t, "narrowing", "provider", "narrows.example.org", "keepers.example.org")
	create(t, env.Consumer, object(narrowGVK, "narrow-a", "n1", map[string]any{"a": "b"}))
	create(t, env.Consumer, object(keeperGVK, "narrow-a", "k1", map[string]any{"a": "b"}))
	waitCopy(t, narrowGVK, "narrow-a", "n1", nil)
	waitCopy(t, keeperGVK, "narrow-a", "k1", nil)
	if enginetest.OpenWatches(t, env.Pair.Consumer.Config, "narrows") == 0 {
		t.Fatal("no consumer watch on narrows while bound")
	}

	enginetest.Eventually(t, "narrows removed from the binding", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		cb.Spec.APIs = []kbindv1alpha1.APIReference{{Name: "keepers.example.org"}}
		return env.Consumer.Update(ctx, cb)
	})
	waitGone(t, env.Provider, narrowGVK, "narrow-a", "n1")
	enginetest.Eventually(t, "the consumer CRD narrows deleted", func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := env.Consumer.Get(ctx, client.ObjectKey{Name: "narrows.example.org"}, crd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	enginetest.Eventually(t, "narrows gone from status.boundAPIs", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		if len(cb.Status.BoundAPIs) != 1 || cb.Status.BoundAPIs[0].Name != "keepers.example.org" {
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
	if _, ok := get(t, env.Provider, keeperGVK, "narrow-a", "k1"); !ok {
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
	ctx := context.Background()
	user, err := env.Pair.Provider.AddUser("kbind-readonly", "kbind:readonly")
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Grant(t, env.Provider, "readonly", user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"refused.example.org"}, Resources: []string{"refuseds"}, Verbs: []string{"get", "list", "watch"}})
	kc, err := testenv.KubeconfigFor("readonly", user.Config)
	if err != nil {
		t.Fatal(err)
	}
	connectAs(t, "readonly", kc)
	cb := bindCluster(t, "refuseds", "readonly", "refuseds.refused.example.org")

	const n = 500
	ensureNamespace(t, env.Consumer, "refused-a")
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			o := object(refusedGVK, "refused-a", fmt.Sprintf("an-object-with-a-rather-long-name-to-fill-messages-%04d", i), map[string]any{"a": "b"})
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
		fmt.Sprintf("apply Refused in namespace refused-a: forbidden (%d object(s))", n))
}

// SYNC-5: a provider pcopy that is terminating is waited for, not raced:
// a consumer change made meanwhile is not applied to the dying pcopy; once
// it is gone, a new pcopy carries the current spec.
func TestTerminatingCopyIsWaitedFor(t *testing.T) {
	ctx := context.Background()
	w := create(t, env.Consumer, object(widgetGVK, "terminating-a", "w1", map[string]any{"size": int64(1)}))
	pcopy := waitCopy(t, widgetGVK, "terminating-a", "w1", nil)
	controllerutil.AddFinalizer(pcopy, "example.org/slow-cleanup")
	if err := env.Provider.Update(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Delete(ctx, pcopy); err != nil {
		t.Fatal(err)
	}
	oldUID := pcopy.GetUID()
	enginetest.Eventually(t, "consumer spec updated", func() error {
		u, _ := get(t, env.Consumer, widgetGVK, "terminating-a", "w1")
		u.Object["spec"] = map[string]any{"size": int64(2)}
		return env.Consumer.Update(ctx, u)
	})
	// The Widget syncs other objects meanwhile: once a later object has a
	// pcopy, w1's update has been seen too.
	create(t, env.Consumer, object(widgetGVK, "terminating-a", "w2", map[string]any{"size": int64(1)}))
	waitCopy(t, widgetGVK, "terminating-a", "w2", nil)
	dying, ok := get(t, env.Provider, widgetGVK, "terminating-a", "w1")
	if !ok || dying.GetUID() != oldUID || dying.Object["spec"].(map[string]any)["size"] != int64(1) {
		t.Fatalf("the terminating pcopy was written: %v", dying)
	}

	controllerutil.RemoveFinalizer(dying, "example.org/slow-cleanup")
	if err := env.Provider.Update(ctx, dying); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, "terminating-a", "w1", func(u *unstructured.Unstructured) error {
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
	ctx := context.Background()
	var mu sync.Mutex
	counts := map[string]int{}
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if strings.HasPrefix(r.URL.Path, "/apis/counted.example.org/") {
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
	connectAs(t, "counted", proxy.Kubeconfig(t))
	bindCluster(t, "counteds", "counted", "counteds.counted.example.org")

	const n = 100
	ensureNamespace(t, env.Consumer, "counted-a")
	for i := 0; i < n; i++ {
		create(t, env.Consumer, object(countedGVK, "counted-a", fmt.Sprintf("c%03d", i), map[string]any{"i": int64(i)}))
	}
	enginetest.Eventually(t, "every pcopy", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(countedGVK.GroupVersion().WithKind("CountedList"))
		if err := env.Provider.List(ctx, list, client.InNamespace("counted-a")); err != nil {
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

// laggedGVK's provider watch is held by a proxy in
// TestDeletionConfirmsAbsenceWithTheProvider.
var laggedGVK = schema.GroupVersionKind{Group: "lagged.example.org", Version: "v1alpha1", Kind: "Lagged"}

// SYNC-D: a consumer object deleted while the provider cache lags (a copy
// applied a moment ago, a watch re-listing after an outage or a compacted
// resourceVersion) keeps its finalizer until the provider itself says the
// copy is gone. Before, the cache's "no copy" released the finalizer at
// once and left the copy behind for good (found by the fault suite's
// watch-expiry scenario).
func TestDeletionConfirmsAbsenceWithTheProvider(t *testing.T) {
	ctx := context.Background()
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	connectAs(t, "lagged", proxy.Kubeconfig(t))
	bindCluster(t, "laggeds", "lagged", "laggeds.lagged.example.org")
	// From now on the Lagged informer's watch, resumed after its
	// connection is closed, never delivers: the cache (synced before)
	// does not see the copies the syncer applies.
	var resumed atomic.Int32
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if strings.HasPrefix(r.URL.Path, "/apis/lagged.example.org/") && r.URL.Query().Get("watch") == "true" {
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

	w := create(t, env.Consumer, object(laggedGVK, "lagged-a", "l1", map[string]any{"size": int64(1)}))
	waitCopy(t, laggedGVK, "lagged-a", "l1", nil)
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	// The copy is deleted before the consumer object goes.
	waitGone(t, env.Consumer, laggedGVK, "lagged-a", "l1")
	if pcopy, ok := get(t, env.Provider, laggedGVK, "lagged-a", "l1"); ok {
		t.Errorf("the provider copy outlived the consumer object: %v", pcopy.GetAnnotations())
	}
}
