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

package syncer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/session"
)

// blockingCache hands out informers that never sync: a Syncer started on it
// runs (waits) until it is stopped, so a leaked one stays visible.
type blockingCache struct{ cache.Cache }

func (blockingCache) GetInformer(ctx context.Context, _ client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// RemoveInformer accepts the removals of a storage-version change.
func (blockingCache) RemoveInformer(context.Context, client.Object) error { return nil }

// Many binding reconciles race on one API whose target keeps changing
// (each wants to replace the running Syncer): exactly one Syncer may be
// left running, and it must be the registry's.
func TestReconcileRaceLeavesOneSyncer(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kbindv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org", Annotations: map[string]string{kbindv1alpha1.ConnectionAnnotation: "p"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}},
	}
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: kbindv1alpha1.ConnectionStatus{
		LocalClusterUID: "uid", Conditions: []metav1.Condition{{Type: string(kbindv1alpha1.ConditionReady), Status: metav1.ConditionTrue}}}}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "p"}, APIs: []kbindv1alpha1.APIReference{{Name: crd.Name}}}}

	// Each read of the CRD alternates its storage version, so concurrent
	// reconciles see different targets and each replaces the Syncer.
	var reads sync.Mutex
	n := 0
	consumer := fake.NewClientBuilder().WithScheme(scheme).WithObjects(crd, conn, cb).
		WithIndex(&kbindv1alpha1.ClusterBinding{}, index.BindingAPI, func(client.Object) []string { return []string{crd.Name} }).
		WithIndex(&kbindv1alpha1.Binding{}, index.BindingAPI, func(client.Object) []string { return nil }).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if got, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				reads.Lock()
				n++
				got.Spec.Versions[0].Name = fmt.Sprintf("v%d", n%2)
				reads.Unlock()
			}
			return nil
		}}).Build()

	sessions := session.NewManager(ctx, session.Options{Scheme: scheme, QPS: 10, Burst: 10})
	sess, _, err := sessions.Prepare("p", "h", "", "uid", isolation.Mapping{}, &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	sessions.Publish(sess)
	t.Cleanup(func() { sessions.Stop("p") })

	var mu sync.Mutex
	var all []*Syncer
	r := &Registry{Consumer: consumer, Cache: blockingCache{}, Sessions: sessions, Results: NewResults(nil),
		started: func(s *Syncer) { mu.Lock(); all = append(all, s); mu.Unlock() }}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if err := r.Reconcile(ctx, crd.Name); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	r.mu.Lock()
	owned := r.syncers[Route{CRD: crd.Name, Connection: "p"}]
	r.mu.Unlock()
	running := 0
	for _, s := range all {
		if !s.Exited() {
			running++
			if s != owned {
				t.Errorf("a Syncer runs that the registry does not own")
			}
		}
	}
	if running != 1 {
		t.Errorf("%d Syncers running after %d starts, want exactly 1", running, len(all))
	}
	r.StopAll()
}

func TestNextStep(t *testing.T) {
	sess := &session.Session{}
	other := &session.Session{}
	target := Target{Connection: "p"}
	running := &Syncer{session: sess, reporter: reporter{target: target}, done: make(chan struct{})}
	exited := &Syncer{session: sess, reporter: reporter{target: target}, done: make(chan struct{})}
	close(exited.done)
	api := API{Session: sess, Target: target}
	cases := []struct {
		name    string
		current *Syncer
		want    bool
		api     API
		backoff bool
		step    step
	}{
		{"nothing runs, nothing wanted", nil, false, api, false, stepDone},
		{"nothing runs, wanted", nil, true, api, false, stepStart},
		{"runs as wanted", running, true, api, false, stepRescope},
		{"runs, no longer wanted", running, false, api, false, stepStop},
		{"runs on another session", running, true, API{Session: other, Target: target}, false, stepStop},
		{"runs for another target", running, true, API{Session: sess, Target: Target{Connection: "q"}}, false, stepStop},
		{"failed, backoff pending", exited, true, api, true, stepWait},
		{"failed, backoff over", exited, true, api, false, stepForget},
		{"exited, no longer wanted", exited, false, api, false, stepForget},
	}
	for _, tc := range cases {
		if got := nextStep(tc.current, tc.want, tc.api, tc.backoff); got != tc.step {
			t.Errorf("%s: step %d, want %d", tc.name, got, tc.step)
		}
	}
}

func TestForgetDropsResults(t *testing.T) {
	results := NewResults(nil)
	target := Target{Connection: "p", GVK: schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}}
	results.set(target, types.NamespacedName{Namespace: "a", Name: "w"}, Result{State: StateSynced})
	r := &Registry{Cache: blockingCache{}, Results: results}
	r.recordInformer(Route{CRD: "widgets.example.org", Connection: "p"}, target.GVK)
	r.Cache = removingCache{}
	r.Forget(context.Background(), "widgets.example.org", "p")
	if s := results.Summarize("p", target.GVK.GroupKind(), "", true, nil); s.Synced != 0 {
		t.Errorf("results kept after Forget: %+v", s)
	}
	if len(r.used) != 0 {
		t.Errorf("informers still recorded: %v", r.used)
	}
}

// removingCache accepts informer removals.
type removingCache struct{ cache.Cache }

func (removingCache) RemoveInformer(context.Context, client.Object) error { return nil }

// A storage-version change releases the informers of the old version only.
func TestTakeInformersOfOneVersion(t *testing.T) {
	v1 := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}
	v2 := v1.GroupKind().WithVersion("v2")
	r := &Registry{}
	sess := &session.Session{}
	r.recordInformerLocked(Route{CRD: "widgets.example.org", Connection: "p"}, v1, sess, v1) // consumer and provider
	r.recordInformerLocked(Route{CRD: "widgets.example.org", Connection: "p"}, v2, nil, schema.GroupVersionKind{})
	taken := r.takeInformersLocked(Route{CRD: "widgets.example.org", Connection: "p"}, v1)
	if len(taken) != 2 || !taken[usedInformer{gvk: v1}] || !taken[usedInformer{gvk: v1, session: sess}] {
		t.Errorf("taken %v, want the v1 informers on both sides", taken)
	}
	if left := r.used[Route{CRD: "widgets.example.org", Connection: "p"}]; len(left) != 1 || !left[usedInformer{gvk: v2}] {
		t.Errorf("left %v, want the v2 informer", left)
	}
	if taken := r.takeInformersLocked(Route{CRD: "gadgets.example.org", Connection: "p"}, v1); len(taken) != 0 {
		t.Errorf("an unknown API gave %v", taken)
	}
}

// The record forgets the informers of a session that has stopped (a
// rotated Connection's previous one): it must not keep every session the
// Connection ever had — caches, clients, REST mapper — alive.
func TestRecordForgetsStoppedSessions(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}
	m := session.NewManager(context.Background(), session.Options{Scheme: clientgoscheme.Scheme, Timeout: time.Second})
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	old, _, err := m.Prepare("p", "hash-1", "", "", isolation.Mapping{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{}
	r.recordInformerLocked(Route{CRD: "widgets.example.org", Connection: "p"}, gvk, old, gvk)
	// New credentials: a new candidate replaces (and stops) the old one.
	newer, _, err := m.Prepare("p", "hash-2", "", "", isolation.Mapping{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Stopped() || newer.Stopped() {
		t.Fatalf("stopped: old %v, newer %v; want true, false", old.Stopped(), newer.Stopped())
	}
	r.recordInformerLocked(Route{CRD: "widgets.example.org", Connection: "p"}, gvk, newer, gvk)
	want := map[usedInformer]bool{{gvk: gvk}: true, {gvk: gvk, session: newer}: true}
	if got := r.used[Route{CRD: "widgets.example.org", Connection: "p"}]; !maps.Equal(got, want) {
		t.Errorf("recorded %v, want the consumer's and the new session's informer only", got)
	}
	m.Stop("p")
}

// A provider API projected onto a second consumer API has one provider
// informer for both: forgetting one API keeps it while the other uses it.
func TestForgetKeepsASharedProviderInformer(t *testing.T) {
	provider := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}
	projected := schema.GroupVersionKind{Group: "acme.io", Version: "v1", Kind: "AcmeWidget"}
	sess := &session.Session{}
	removed := &recordingCache{}
	r := &Registry{Cache: removed, Results: NewResults(nil)}
	r.recordInformerLocked(Route{CRD: "widgets.example.org", Connection: "p"}, provider, sess, provider)
	r.recordInformerLocked(Route{CRD: "acmewidgets.acme.io", Connection: "p"}, projected, sess, provider)
	r.Forget(context.Background(), "acmewidgets.acme.io", "p")
	if want := []schema.GroupVersionKind{projected}; !slices.Equal(removed.gvks, want) {
		t.Errorf("removed %v, want only the projected consumer informer %v", removed.gvks, want)
	}
}

// recordingCache records the informers removed from it.
type recordingCache struct {
	cache.Cache
	gvks []schema.GroupVersionKind
}

func (c *recordingCache) RemoveInformer(_ context.Context, obj client.Object) error {
	c.gvks = append(c.gvks, obj.GetObjectKind().GroupVersionKind())
	return nil
}
