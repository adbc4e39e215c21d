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

package isolationtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// stream records one object's watch events: every event's owner as the
// consumer object says it, UIDs seen, and deletions.
type stream struct {
	mu       sync.Mutex
	owners   []string // "provider", "consumer", or "both"/"neither" (violations)
	uids     map[types.UID]bool
	deleted  int
	lastSize int64
}

func (s *stream) record(ev watch.Event, owner func(*unstructured.Unstructured) string) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == watch.Deleted {
		s.deleted++
	}
	s.uids[u.GetUID()] = true
	if o := owner(u); len(s.owners) == 0 || s.owners[len(s.owners)-1] != o {
		s.owners = append(s.owners, o)
	}
	s.lastSize, _, _ = unstructured.NestedInt64(u.Object, "spec", "size")
}

func (s *stream) snapshot() (owners []string, uids, deleted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.owners), len(s.uids), s.deleted
}

// watchOne streams the Widget ns/name from the cluster at cfg into s until
// ctx ends.
func watchOne(ctx context.Context, t *testing.T, cfg *rest.Config, ns, name string, s *stream, owner func(*unstructured.Unstructured) string) {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
	w, err := wc.Watch(ctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				s.record(ev, owner)
			}
		}
	}()
}

// consumerOwner is who owns a consumer object by what it says: the
// owner annotation (the provider) or the syncer finalizer (the consumer),
// never both, never neither.
func consumerOwner(u *unstructured.Unstructured) string {
	provider := u.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider
	consumer := slices.Contains(u.GetFinalizers(), kbindv1alpha1.SyncerFinalizer)
	switch {
	case provider && consumer:
		return "both"
	case provider:
		return "provider"
	case consumer:
		return "consumer"
	}
	return "neither"
}

// providerOwner is whose markers the provider object carries.
func providerOwner(u *unstructured.Unstructured) string {
	if _, marked := u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation]; marked {
		return "consumer"
	}
	return "provider"
}

// writer writes spec.size on the Widget at k through c every few
// milliseconds, from base up, until stop; paused holds it.
func writer(ctx context.Context, c client.Client, k client.ObjectKey, base int64, paused *atomic.Bool, writes *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := base; ctx.Err() == nil; i++ {
		if !paused.Load() {
			u := object(widgetGVK, "", "", nil)
			if err := c.Get(ctx, k, u); err == nil {
				_ = unstructured.SetNestedField(u.Object, i, "spec", "size")
				if c.Update(ctx, u) == nil {
					writes.Add(1)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// setSize writes spec.size on the Widget at k through c.
func setSize(t *testing.T, c client.Client, k client.ObjectKey, size int64) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := object(widgetGVK, "", "", nil)
		if err := c.Get(context.Background(), k, u); err != nil {
			return err
		}
		_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
		return c.Update(context.Background(), u)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitSize waits until the Widget at k through c has spec.size size.
func waitSize(t *testing.T, c client.Client, k client.ObjectKey, size int64) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s spec.size %d", k, size), func() error {
		u := object(widgetGVK, "", "", nil)
		if err := c.Get(context.Background(), k, u); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); got != size {
			return fmt.Errorf("spec.size %d", got)
		}
		return nil
	})
}

// handOverTo annotates the consumer object at k for a hand-over to to and
// waits until the konnector has done it.
func handOverTo(t *testing.T, c client.Client, k client.ObjectKey, to string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kbindv1alpha1.HandOverAnnotation, to))
	u := object(widgetGVK, k.Namespace, k.Name, nil)
	if err := c.Patch(context.Background(), u, patch); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "hand-over of "+k.String()+" to the "+to, func() error {
		if err := c.Get(context.Background(), k, u); err != nil {
			return err
		}
		if _, asked := u.GetAnnotations()[kbindv1alpha1.HandOverAnnotation]; asked || consumerOwner(u) != to {
			return fmt.Errorf("owner %s, annotations %v", consumerOwner(u), u.GetAnnotations())
		}
		return nil
	})
}

// TestHandOverBothWays: an imported object is handed to the consumer and
// back to the provider while writers on both sides change its spec. The
// consumer's watch stream shows exactly one owner at every event and the
// owner switching once each way; neither side's object is ever deleted or
// replaced (one UID each); after each hand-over the new owner's write
// wins and the other side's is reverted.
func TestHandOverBothWays(t *testing.T) {
	a := consumerA(t)
	const nsP = "handover-a"
	ensureNamespace(t, env.Provider, nsP)
	user := "consumer-a-" + t.Name()
	bindRole(t, "", "kbind-discovery-handover-a", user, discoveryRules)
	bindRole(t, nsP, "kbind-consumer", user, objectRules("widgets", "widgets/status"))
	providerWidget(t, nsP, "team-h.db", 1)
	ensureNamespace(t, a.consumer, "team-h")
	connect(t, a, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: nsP}, nil, "widgets.example.org")
	waitBound(t, []tenant{a}, "widgets.example.org")
	importing(t, a, "widgets.example.org")
	ckey, pkey := key("team-h", "db"), key(nsP, "team-h.db")
	waitImported(t, a, ckey, 1, "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &stream{uids: map[types.UID]bool{}}
	ps := &stream{uids: map[types.UID]bool{}}
	watchOne(ctx, t, env.Pair.Consumer.Config, ckey.Namespace, ckey.Name, cs, consumerOwner)
	watchOne(ctx, t, env.Pair.Provider.Config, pkey.Namespace, pkey.Name, ps, providerOwner)

	var paused atomic.Bool
	var consumerWrites, providerWrites atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go writer(ctx, a.consumer, ckey, 1000, &paused, &consumerWrites, &wg)
	go writer(ctx, env.Provider, pkey, 100000, &paused, &providerWrites, &wg)
	during := func(what string) {
		// The writers run across the hand-over and a little after it.
		handOverTo(t, a.consumer, ckey, what)
		before := consumerWrites.Load() + providerWrites.Load()
		enginetest.Eventually(t, "writes on both sides after the hand-over", func() error {
			if consumerWrites.Load()+providerWrites.Load() < before+20 {
				return fmt.Errorf("%d writes", consumerWrites.Load()+providerWrites.Load()-before)
			}
			return nil
		})
		paused.Store(true)
	}

	// To the consumer: its write wins, the provider's is reverted.
	during(kbindv1alpha1.HandOverConsumer)
	setSize(t, a.consumer, ckey, 5555)
	waitSize(t, env.Provider, pkey, 5555)
	setSize(t, env.Provider, pkey, 6666)
	waitSize(t, env.Provider, pkey, 5555)

	// Back to the provider: its write wins, the consumer's is reverted.
	paused.Store(false)
	during(kbindv1alpha1.HandOverProvider)
	setSize(t, env.Provider, pkey, 7777)
	waitSize(t, a.consumer, ckey, 7777)
	setSize(t, a.consumer, ckey, 8888)
	waitSize(t, a.consumer, ckey, 7777)
	enginetest.Eventually(t, "the provider object unmarked", func() error {
		u := object(widgetGVK, "", "", nil)
		if err := env.Provider.Get(ctx, pkey, u); err != nil {
			return err
		}
		if marked := providerOwner(u); marked != "provider" {
			return fmt.Errorf("markers %v", u.GetAnnotations())
		}
		return nil
	})
	cancel()
	wg.Wait()

	owners, uids, deleted := cs.snapshot()
	if want := []string{"provider", "consumer", "provider"}; !slices.Equal(owners, want) {
		t.Errorf("consumer watch stream owners %v, want %v (exactly one owner at every event)", owners, want)
	}
	if uids != 1 || deleted != 0 {
		t.Errorf("consumer object: %d UIDs, %d deletions; want 1 and 0", uids, deleted)
	}
	powners, puids, pdeleted := ps.snapshot()
	if want := []string{"provider", "consumer", "provider"}; !slices.Equal(powners, want) {
		t.Errorf("provider watch stream markers %v, want %v", powners, want)
	}
	if puids != 1 || pdeleted != 0 {
		t.Errorf("provider object: %d UIDs, %d deletions; want 1 and 0", puids, pdeleted)
	}
	t.Logf("writes during the hand-overs: consumer %d, provider %d; consumer owners %v", consumerWrites.Load(), providerWrites.Load(), owners)

	teardown(t, a)
}

// TestReleaseRefusedWhenImportWouldNotTakeItBack (issue #51): an entry
// imports only objects labelled sync=yes, and does not copy that label
// up. Releasing a consumer object labelled so would unmark a provider
// copy the objectSelector does not select: the import would read that as
// "import off" and delete the consumer object, leaving the provider
// object unmarked for good. The konnector refuses the hand-over, with an
// Event naming the selector and the binding's PermissionDenied; once the
// binding copies the label up, the same release goes through and the
// object stays, imported.
func TestReleaseRefusedWhenImportWouldNotTakeItBack(t *testing.T) {
	ctx := context.Background()
	const nsP, nsC = "handover-sel", "team-s"
	a := importingSyncYes(t, nsP, nsC)
	ckey, pkey := key(nsC, "db"), key(nsP, nsC+".db")
	w := object(widgetGVK, nsC, "db", map[string]any{"size": int64(3)})
	w.SetLabels(map[string]string{"sync": "yes"})
	if err := a.consumer.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitSize(t, env.Provider, pkey, 3)

	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kbindv1alpha1.HandOverAnnotation, kbindv1alpha1.HandOverProvider))
	if err := a.consumer.Patch(ctx, object(widgetGVK, nsC, "db", nil), patch); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a.consumer, nsC, "db", corev1.EventTypeWarning, "HandOverRefused")
	enginetest.Eventually(t, "the ClusterBinding names the refused hand-over and the selector", func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := a.consumer.Get(ctx, key("", "widgets.example.org"), cb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionPermissionDenied))
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "kbind refuses: hand-over of 1 object(s), "+ckey.String()) ||
			!strings.Contains(c.Message, "objectSelector (sync=yes)") {
			return fmt.Errorf("PermissionDenied %+v", c)
		}
		return nil
	})
	u := object(widgetGVK, "", "", nil)
	if err := a.consumer.Get(ctx, ckey, u); err != nil || consumerOwner(u) != "consumer" || u.GetUID() != w.GetUID() {
		t.Fatalf("the consumer object after the refusal: owner %s, UID %s (want consumer, %s): %v", consumerOwner(u), u.GetUID(), w.GetUID(), err)
	}
	p := object(widgetGVK, "", "", nil)
	if err := env.Provider.Get(ctx, pkey, p); err != nil || providerOwner(p) != "consumer" {
		t.Fatalf("the provider copy after the refusal: markers %v: %v", p.GetAnnotations(), err)
	}

	// The label copied up: the import takes the object back, and the
	// release goes through.
	updateClusterBinding(t, a, "widgets.example.org", func(spec *kbindv1alpha1.BindingSpec) {
		spec.Metadata = &kbindv1alpha1.MetadataSync{Labels: []string{"sync"}}
	})
	enginetest.Eventually(t, "the released object imported, same UID", func() error {
		if err := a.consumer.Get(ctx, ckey, u); err != nil {
			return err
		}
		if err := env.Provider.Get(ctx, pkey, p); err != nil {
			return err
		}
		if consumerOwner(u) != "provider" || u.GetUID() != w.GetUID() || providerOwner(p) != "provider" {
			return fmt.Errorf("consumer owner %s UID %s, provider markers %v", consumerOwner(u), u.GetUID(), p.GetAnnotations())
		}
		return nil
	})
	waitInstances(t, a, "widgets.example.org", func(in kbindv1alpha1.InstanceCounts) bool { return in.Imported == 1 && in.Total == 1 })
	teardown(t, a)
}

// importingSyncYes connects consumer A with Namespace isolation in
// provider namespace nsP, creates consumer namespace nsC, and binds
// widgets with a ClusterBinding whose entry imports the provider's
// objects labelled sync=yes (objectSelector), copying no label.
func importingSyncYes(t *testing.T, nsP, nsC string) tenant {
	t.Helper()
	a := consumerA(t)
	ensureNamespace(t, env.Provider, nsP)
	user := "consumer-a-" + t.Name()
	bindRole(t, "", "kbind-discovery-"+nsP, user, discoveryRules)
	bindRole(t, nsP, "kbind-consumer", user, objectRules("widgets", "widgets/status"))
	ensureNamespace(t, a.consumer, nsC)
	connect(t, a, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: nsP}, nil, "widgets.example.org")
	waitBound(t, []tenant{a}, "widgets.example.org")
	updateClusterBinding(t, a, "widgets.example.org", func(spec *kbindv1alpha1.BindingSpec) {
		spec.APIs[0].ProviderObjects = kbindv1alpha1.ProviderObjectsImport
		spec.APIs[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"sync": "yes"}}
	})
	return a
}

// updateClusterBinding changes the spec of the tenant's ClusterBinding
// name.
func updateClusterBinding(t *testing.T, tn tenant, name string, change func(*kbindv1alpha1.BindingSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := tn.consumer.Get(context.Background(), key("", name), cb); err != nil {
			return err
		}
		change(&cb.Spec)
		return tn.consumer.Update(context.Background(), cb)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAdoptRefusedWhenTheSelectorWouldReleaseIt (issue #51): an entry
// imports only provider objects labelled sync=yes, and its imported
// copies do not carry that label (spec.metadata.labels does not list it).
// Adopting one would make it a consumer object the objectSelector does not
// select: the ordinary sync would release it at once and delete its
// provider object, the provider's own. The konnector refuses the adoption,
// naming the selector; once the object carries the label, it adopts it and
// the provider object stays.
func TestAdoptRefusedWhenTheSelectorWouldReleaseIt(t *testing.T) {
	ctx := context.Background()
	const nsP, nsC = "adopt-sel", "team-t"
	a := importingSyncYes(t, nsP, nsC)
	ckey, pkey := key(nsC, "db"), key(nsP, nsC+".db")
	pw := object(widgetGVK, nsP, nsC+".db", map[string]any{"size": int64(4)})
	pw.SetLabels(map[string]string{"sync": "yes"})
	if err := env.Provider.Create(ctx, pw); err != nil {
		t.Fatal(err)
	}
	waitImported(t, a, ckey, 4, "")

	patch := func(p string) {
		t.Helper()
		if err := a.consumer.Patch(ctx, object(widgetGVK, nsC, "db", nil), client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			t.Fatal(err)
		}
	}
	patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, kbindv1alpha1.HandOverAnnotation, kbindv1alpha1.HandOverConsumer))
	waitEvent(t, a.consumer, nsC, "db", corev1.EventTypeWarning, "HandOverRefused")
	u, p := object(widgetGVK, "", "", nil), object(widgetGVK, "", "", nil)
	if err := a.consumer.Get(ctx, ckey, u); err != nil || consumerOwner(u) != "provider" {
		t.Fatalf("the imported object after the refused adoption: owner %s: %v", consumerOwner(u), err)
	}
	if err := env.Provider.Get(ctx, pkey, p); err != nil || p.GetUID() != pw.GetUID() || providerOwner(p) != "provider" {
		t.Fatalf("the provider's object after the refused adoption: %v (markers %v)", err, p.GetAnnotations())
	}

	// Labelled so that the selector selects it, it is adopted, and the
	// provider object stays: now the consumer's copy.
	patch(`{"metadata":{"labels":{"sync":"yes"}}}`)
	enginetest.Eventually(t, "the adopted object synced to the provider's object", func() error {
		if err := a.consumer.Get(ctx, ckey, u); err != nil {
			return err
		}
		if err := env.Provider.Get(ctx, pkey, p); err != nil {
			return err
		}
		if consumerOwner(u) != "consumer" || p.GetUID() != pw.GetUID() || providerOwner(p) != "consumer" {
			return fmt.Errorf("consumer owner %s, provider object UID %s markers %v", consumerOwner(u), p.GetUID(), p.GetAnnotations())
		}
		return nil
	})
	setSize(t, a.consumer, ckey, 44)
	waitSize(t, env.Provider, pkey, 44)
	if err := env.Provider.Get(ctx, pkey, p); err != nil || p.GetUID() != pw.GetUID() {
		t.Fatalf("the provider's object after the adoption: %v", err)
	}
	teardown(t, a)
}
