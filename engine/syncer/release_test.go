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
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/session"
)

func TestConfirmAbsence(t *testing.T) {
	cases := []struct {
		name                              string
		cached, hasFinalizer, seen, check bool
	}{
		{"the cache holds the copy: it is deleted, nothing to confirm", true, true, false, false},
		{"no finalizer: nothing is held", false, false, false, false},
		{"absent from the cache, its deletion not reported: ask the provider", false, true, false, true},
		{"absent from the cache after the informer reported the deleted copy gone", false, true, true, false},
	}
	for _, tc := range cases {
		if got := confirmAbsence(tc.cached, tc.hasFinalizer, tc.seen); got != tc.check {
			t.Errorf("%s: confirmAbsence = %v, want %v", tc.name, got, tc.check)
		}
	}
}

// Only the informer's report of the very copy release deleted spares the
// provider GET; anything else keeps it.
func TestDeletions(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	type step struct {
		op  string // expect, observed, forget
		uid types.UID
	}
	cases := []struct {
		name  string
		steps []step
		seen  bool
	}{
		{"nothing recorded", nil, false},
		{"deletion sent, not reported yet", []step{{"expect", "u1"}}, false},
		{"deletion sent and reported", []step{{"expect", "u1"}, {"observed", "u1"}}, true},
		{"another copy reported deleted", []step{{"expect", "u1"}, {"observed", "u2"}}, false},
		{"reported before release waited for it", []step{{"observed", "u1"}, {"expect", "u1"}}, false},
		{"expected again after the report (a retried release)", []step{{"expect", "u1"}, {"observed", "u1"}, {"expect", "u1"}}, true},
		{"a new copy expected after the old one was reported", []step{{"expect", "u1"}, {"observed", "u1"}, {"expect", "u2"}}, false},
		{"applied again: forgotten, a late report ignored", []step{{"expect", "u1"}, {"forget", ""}, {"observed", "u1"}}, false},
		{"finalizer released", []step{{"expect", "u1"}, {"observed", "u1"}, {"forget", ""}}, false},
	}
	for _, tc := range cases {
		var d deletions
		for _, s := range tc.steps {
			switch s.op {
			case "expect":
				d.expect(key, s.uid)
			case "observed":
				d.observed(key, s.uid)
			case "forget":
				d.forget(key)
			}
		}
		if got := d.seen(key); got != tc.seen {
			t.Errorf("%s: seen = %v, want %v", tc.name, got, tc.seen)
		}
		if d.seen(types.NamespacedName{Namespace: "ns", Name: "other"}) {
			t.Errorf("%s: another key seen", tc.name)
		}
	}
}

// widgetGVK is the kind of the objects the releaser tests release.
var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// widget is a Widget ns/name with uid, annotations and finalizers.
func widget(ns, name string, uid types.UID, annotations map[string]string, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(uid)
	u.SetAnnotations(annotations)
	u.SetFinalizers(finalizers)
	return u
}

// holdsFinalizer reports whether obj, read again through c, still holds
// the syncer finalizer.
func holdsFinalizer(t *testing.T, c client.Client, obj *unstructured.Unstructured) bool {
	t.Helper()
	fresh := widget("", "", "", nil)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
		t.Fatal(err)
	}
	return controllerutil.ContainsFinalizer(fresh, kbindv1alpha1.SyncerFinalizer)
}

// A drain releases exactly the objects that still hold the finalizer and
// that no live binding covers.
func TestLeftScope(t *testing.T) {
	objs := []unstructured.Unstructured{
		*widget("a", "w1", "", nil, kbindv1alpha1.SyncerFinalizer),
		*widget("b", "w2", "", nil, kbindv1alpha1.SyncerFinalizer),
		*widget("a", "released", "", nil),
	}
	cases := []struct {
		name  string
		scope Scope
		want  []string
	}{
		{"no binding left: every held object", Scope{}, []string{"a/w1", "b/w2"}},
		{"a ClusterBinding covers everything", Scope{Cluster: true}, nil},
		{"a Binding still covers namespace a", Scope{Namespaces: map[string]Policy{"a": {}}}, []string{"b/w2"}},
	}
	for _, tc := range cases {
		var got []string
		for _, o := range leftScope(objs, tc.scope) {
			got = append(got, client.ObjectKeyFromObject(o).String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: leftScope = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// release deletes only a copy that is kbind's (both UIDs), keeps the
// finalizer until the copy is gone, and releases it at once for Orphan
// (the annotation's or the binding's), a foreign copy or no copy; an
// annotation naming no policy keeps both.
func TestRelease(t *testing.T) {
	target := Target{Connection: "p", GVK: widgetGVK, ProviderGVK: widgetGVK, Namespaced: true, ClusterUID: "cluster"}
	orphan := map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan}
	copyOf := func(objectUID types.UID) *unstructured.Unstructured {
		return widget("ns", "w", "p1", map[string]string{
			kbindv1alpha1.ConsumerClusterUIDAnnotation: "cluster", kbindv1alpha1.ConsumerObjectUIDAnnotation: string(objectUID)})
	}
	terminating := copyOf("c1")
	terminating.SetFinalizers([]string{"provider.example.com/hold"})
	terminating.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	annotated := func(policy string) map[string]string {
		return map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: policy}
	}
	cases := []struct {
		name          string
		cobj          *unstructured.Unstructured
		pobj          *unstructured.Unstructured // nil: no copy
		def           kbindv1alpha1.DeletionPolicy
		copyDeleted   bool
		finalizerKept bool
		want          State // "" when the result is forgotten
		event         string
	}{
		{"no finalizer: nothing held", widget("ns", "w", "c1", nil), copyOf("c1"), "", false, false, "", ""},
		{"kbind's copy: deleted, the finalizer waits", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), copyOf("c1"), "", true, true, StatePending, ""},
		{"kbind's copy already terminating: waited for, its finalizers named", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), terminating, "", false, true, StatePending,
			"Normal ProviderCopyDeleting deleting: the provider copy Widget ns/w (Connection p) is being deleted and its finalizers keep it: provider.example.com/hold"},
		{"Orphan: the copy stays, released", widget("ns", "w", "c1", orphan, kbindv1alpha1.SyncerFinalizer), copyOf("c1"), "", false, false, "", ""},
		{"the binding's Orphan: the copy stays, released", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), copyOf("c1"), kbindv1alpha1.DeletionPolicyOrphan, false, false, "", ""},
		{"the annotation's Delete wins over the binding's Orphan", widget("ns", "w", "c1", annotated("Delete"), kbindv1alpha1.SyncerFinalizer), copyOf("c1"), kbindv1alpha1.DeletionPolicyOrphan, true, true, StatePending, ""},
		{"the annotation's Orphan wins over the binding's Foreground", widget("ns", "w", "c1", orphan, kbindv1alpha1.SyncerFinalizer), copyOf("c1"), kbindv1alpha1.DeletionPolicyForeground, false, false, "", ""},
		{"Foreground: deleted, the finalizer waits", widget("ns", "w", "c1", annotated("Foreground"), kbindv1alpha1.SyncerFinalizer), copyOf("c1"), "", true, true, StatePending, ""},
		{"a typo keeps the copy and the object", widget("ns", "w", "c1", annotated("orphan"), kbindv1alpha1.SyncerFinalizer), copyOf("c1"), kbindv1alpha1.DeletionPolicyDelete, false, true, StateFailed,
			`Warning InvalidDeletionPolicy the annotation core.kbind.io/deletion-policy="orphan" names no deletion policy`},
		{"a typo on an object without a copy of kbind's: released", widget("ns", "w", "c1", annotated("orphan"), kbindv1alpha1.SyncerFinalizer), copyOf("c2"), "", false, false, "", ""},
		{"another object's copy: left, released", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), copyOf("c2"), "", false, false, "", ""},
		{"no copy: released", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), nil, "", false, false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			consumer := fake.NewClientBuilder().WithObjects(tc.cobj.DeepCopy()).Build()
			pb := fake.NewClientBuilder()
			if tc.pobj != nil {
				pb = pb.WithObjects(tc.pobj.DeepCopy())
			}
			results := NewResults(nil)
			recorded := events.NewFakeRecorder(4)
			r := &releaser{reporter: reporter{target: target, results: results, events: recorded}, consumer: consumer, session: &session.Session{Client: pb.Build()}}
			key := client.ObjectKeyFromObject(tc.cobj)
			cobj := widget("", "", "", nil)
			if err := consumer.Get(ctx, key, cobj); err != nil {
				t.Fatal(err)
			}
			pobj, exists, err := r.providerCopy(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := r.release(ctx, cobj, pobj, exists, tc.def, ""); err != nil || out != done {
				t.Fatalf("release = %v, %v; want done, nil", out, err)
			}
			_, stillThere, err := r.providerCopy(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if deleted := exists && !stillThere; deleted != tc.copyDeleted {
				t.Errorf("provider copy deleted = %v, want %v", deleted, tc.copyDeleted)
			}
			if kept := holdsFinalizer(t, consumer, cobj); kept != tc.finalizerKept {
				t.Errorf("finalizer kept = %v, want %v", kept, tc.finalizerKept)
			}
			if got := results.byAPI[apiKey(target.Connection, widgetGVK.GroupKind())][key].State; got != tc.want {
				t.Errorf("result = %q, want %q", got, tc.want)
			}
			select {
			case e := <-recorded.Events:
				if tc.event == "" || !strings.HasPrefix(e, tc.event) {
					t.Errorf("event %q, want one starting %q", e, tc.event)
				}
			default:
				if tc.event != "" {
					t.Errorf("no event, want one starting %q", tc.event)
				}
			}
		})
	}
}

// Without a provider session a drain waits while the Connection exists,
// except for Orphan objects, and releases everything once it is gone,
// naming the copies it leaves behind.
func TestAbandon(t *testing.T) {
	orphan := map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan}
	cases := []struct {
		name          string
		connGone      bool
		wantRemaining int
		wantAbandoned []string
		wantReleased  []string
	}{
		{"the provider is unreachable: only Orphan goes", false, 1, nil, []string{"kept"}},
		{"the Connection is gone: every object goes", true, 0, []string{"ns/deleted"}, []string{"deleted", "kept"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []*unstructured.Unstructured{
				widget("ns", "deleted", "", nil, kbindv1alpha1.SyncerFinalizer),
				widget("ns", "kept", "", orphan, kbindv1alpha1.SyncerFinalizer),
			}
			consumer := fake.NewClientBuilder().WithObjects(objs[0].DeepCopy(), objs[1].DeepCopy()).Build()
			r := &releaser{consumer: consumer}
			remaining, abandoned, err := r.abandon(context.Background(), objs, tc.connGone, "")
			if err != nil {
				t.Fatal(err)
			}
			if remaining != tc.wantRemaining || !slices.Equal(abandoned, tc.wantAbandoned) {
				t.Errorf("abandon = %d, %v; want %d, %v", remaining, abandoned, tc.wantRemaining, tc.wantAbandoned)
			}
			var released []string
			for _, o := range objs {
				if !holdsFinalizer(t, consumer, o) {
					released = append(released, o.GetName())
				}
			}
			if !slices.Equal(released, tc.wantReleased) {
				t.Errorf("released %v, want %v", released, tc.wantReleased)
			}
		})
	}
}

// The annotation wins over the binding's default, the default over
// Delete; an annotation that names no policy is not known (the caller
// keeps the copy), even when the binding has a default.
func TestDeletionPolicyOf(t *testing.T) {
	ann := func(v string) map[string]string { return map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: v} }
	cases := []struct {
		name      string
		ann       map[string]string
		def       kbindv1alpha1.DeletionPolicy
		want      kbindv1alpha1.DeletionPolicy
		wantKnown bool
	}{
		{"nothing set: Delete", nil, "", kbindv1alpha1.DeletionPolicyDelete, true},
		{"the binding's default", nil, kbindv1alpha1.DeletionPolicyForeground, kbindv1alpha1.DeletionPolicyForeground, true},
		{"the annotation wins", ann("Orphan"), kbindv1alpha1.DeletionPolicyForeground, kbindv1alpha1.DeletionPolicyOrphan, true},
		{"the annotation's Delete wins", ann("Delete"), kbindv1alpha1.DeletionPolicyOrphan, kbindv1alpha1.DeletionPolicyDelete, true},
		{"Foreground by annotation", ann("Foreground"), "", kbindv1alpha1.DeletionPolicyForeground, true},
		{"a typo is not known", ann("orphan"), kbindv1alpha1.DeletionPolicyOrphan, "orphan", false},
		{"an empty annotation is not known", ann(""), kbindv1alpha1.DeletionPolicyOrphan, "", false},
	}
	for _, tc := range cases {
		got, known := deletionPolicyOf(tc.ann, tc.def)
		if got != tc.want || known != tc.wantKnown {
			t.Errorf("%s: deletionPolicyOf = %q, %v; want %q, %v", tc.name, got, known, tc.want, tc.wantKnown)
		}
	}
}
