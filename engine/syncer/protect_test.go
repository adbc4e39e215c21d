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
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/session"
)

// TestKeptByProtection: only a live binding whose spec.deletionProtection
// is true keeps copies (BIND-5); one being deleted drains as before.
func TestKeptByProtection(t *testing.T) {
	now := metav1.Now()
	cb := func(protected bool, deleting bool) kbindv1alpha1.BindingObject {
		b := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}}
		b.Spec.DeletionProtection = protected
		if deleting {
			b.DeletionTimestamp = &now
		}
		return b
	}
	nsb := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "widgets"}}
	nsb.Spec.DeletionProtection = true
	for _, tc := range []struct {
		name string
		b    kbindv1alpha1.BindingObject
		want string
	}{
		{"unprotected", cb(false, false), ""},
		{"protected", cb(true, false), "ClusterBinding/widgets"},
		{"protected, being deleted (protection turned off first, or its namespace deleting)", cb(true, true), ""},
		{"unprotected, being deleted", cb(false, true), ""},
		{"a protected Binding", nsb, "Binding/team-a/widgets"},
	} {
		if got := KeptByProtection(tc.b); got != tc.want {
			t.Errorf("%s: KeptByProtection = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDecideRelease: deletion protection keeps the owned copy of an object
// that is not being deleted itself, whatever its deletion policy (a typo
// included); an object's own deletion, and an unprotected binding, follow
// the policy as before.
func TestDecideRelease(t *testing.T) {
	const by = "ClusterBinding/widgets"
	del, orphan, fg := kbindv1alpha1.DeletionPolicy(kbindv1alpha1.DeletionPolicyDelete), kbindv1alpha1.DeletionPolicy(kbindv1alpha1.DeletionPolicyOrphan),
		kbindv1alpha1.DeletionPolicy(kbindv1alpha1.DeletionPolicyForeground)
	for _, tc := range []struct {
		name       string
		owned      bool
		deleting   bool
		policy     kbindv1alpha1.DeletionPolicy
		known      bool
		keptBy     string
		kept       bool
		keptOrphan bool
		want       releaseAction
	}{
		{"no copy of ours: released", false, false, del, true, by, false, false, stepRelease},
		{"no copy of ours, unprotected: released", false, false, del, true, "", false, false, stepRelease},
		{"unprotected, Delete: deleted", true, false, del, true, "", false, false, stepDelete},
		{"unprotected, Foreground: deleted", true, false, fg, true, "", false, false, stepDelete},
		{"unprotected, Orphan: kept under Orphan", true, false, orphan, true, "", false, false, stepKeepOrphan},
		{"unprotected, Orphan, labelled: released", true, false, orphan, true, "", false, true, stepRelease},
		{"unprotected, a typo: waits", true, false, "orphan", false, "", false, false, stepUnknownPolicy},
		{"protected, Delete: kept", true, false, del, true, by, false, false, stepKeepProtected},
		{"protected, Foreground: kept", true, false, fg, true, by, false, false, stepKeepProtected},
		{"protected, Orphan: kept by protection", true, false, orphan, true, by, false, false, stepKeepProtected},
		{"protected, Orphan label of an earlier release: kept by protection", true, false, orphan, true, by, false, true, stepKeepProtected},
		{"protected, a typo: kept (nothing deleted)", true, false, "orphan", false, by, false, false, stepKeepProtected},
		{"protected, marked kept: released", true, false, del, true, by, true, false, stepReleaseProtected},
		{"protected, the object deleted itself, Delete: deleted", true, true, del, true, by, false, false, stepDelete},
		{"protected, the object deleted itself, Foreground: deleted", true, true, fg, true, by, false, false, stepDelete},
		{"protected, the object deleted itself, Orphan: kept under Orphan", true, true, orphan, true, by, false, false, stepKeepOrphan},
		{"protected, the object deleted itself, a typo: waits", true, true, "orphan", false, by, false, false, stepUnknownPolicy},
	} {
		if got := decideRelease(tc.owned, tc.deleting, tc.policy, tc.known, tc.keptBy, tc.kept, tc.keptOrphan); got != tc.want {
			t.Errorf("%s: decideRelease = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestKeepAndUnmarkPatch: the keep is one merge patch of the copy's UID,
// the kept label and the kept-by annotation, leaving kbind's markers; a
// sync's unmark removes the label and the annotation again.
func TestKeepAndUnmarkPatch(t *testing.T) {
	pobj := widget("ns", "w", "p1", map[string]string{
		kbindv1alpha1.ConsumerClusterUIDAnnotation: "cluster", kbindv1alpha1.ConsumerObjectUIDAnnotation: "c1"})
	data, err := keepPatch(pobj, "Binding/ns/b")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"core.kbind.io/kept-by":"Binding/ns/b"},"labels":{"core.kbind.io/kept":"DeletionProtection"},"uid":"p1"}}`
	if string(data) != want {
		t.Errorf("keepPatch = %s, want %s", data, want)
	}

	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        string // "": no patch
	}{
		{"nothing to remove", nil, nil, ""},
		{"kept by protection", map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection},
			map[string]string{kbindv1alpha1.KeptByAnnotation: "Binding/ns/b"},
			`{"metadata":{"annotations":{"core.kbind.io/kept-by":null},"labels":{"core.kbind.io/kept":null},"uid":"p1"}}`},
		{"kept under Orphan", map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptOrphan}, nil,
			`{"metadata":{"labels":{"core.kbind.io/kept":null},"uid":"p1"}}`},
		{"a kept-by annotation alone", nil, map[string]string{kbindv1alpha1.KeptByAnnotation: "Binding/ns/b"},
			`{"metadata":{"annotations":{"core.kbind.io/kept-by":null},"uid":"p1"}}`},
		{"reap-marked and kept", map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection},
			map[string]string{kbindv1alpha1.KeptByAnnotation: "x", kbindv1alpha1.ReapMarkedAtAnnotation: "2026-01-01T00:00:00Z"},
			`{"metadata":{"annotations":{"core.kbind.io/kept-by":null,"core.kbind.io/reap-marked-at":null},"labels":{"core.kbind.io/kept":null},"uid":"p1"}}`},
	} {
		u := pobj.DeepCopy()
		u.SetLabels(tc.labels)
		ann := maps.Clone(u.GetAnnotations())
		maps.Copy(ann, tc.annotations)
		u.SetAnnotations(ann)
		data, ok := unmarkPatch(u)
		if got := string(data); ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s: unmarkPatch = %s, %v; want %s", tc.name, got, ok, tc.want)
		}
	}
}

// TestReleaseProtected: under a protected binding, releasing an object that
// is not being deleted keeps its owned copy — labelled, annotated, markers
// kept — and releases the finalizer with one CopiesKept Event, whatever
// the deletion policy; the object's own deletion deletes its copy as
// before; a copy not ours is left untouched.
func TestReleaseProtected(t *testing.T) {
	const by = "ClusterBinding/widgets"
	target := Target{Connection: "p", GVK: widgetGVK, ProviderGVK: widgetGVK, Namespaced: true, ClusterUID: "cluster"}
	copyOf := func(objectUID types.UID) *unstructured.Unstructured {
		return widget("ns", "w", "p1", map[string]string{
			kbindv1alpha1.ConsumerClusterUIDAnnotation: "cluster", kbindv1alpha1.ConsumerObjectUIDAnnotation: string(objectUID)})
	}
	annotated := func(policy string) map[string]string {
		return map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: policy}
	}
	deleting := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
		return u
	}
	const keptEvent = "Normal CopiesKept no longer synced by ClusterBinding/widgets, whose spec.deletionProtection is true: its provider copy Widget ns/w (Connection p) was kept"
	for _, tc := range []struct {
		name        string
		cobj        *unstructured.Unstructured
		pobj        *unstructured.Unstructured
		def         kbindv1alpha1.DeletionPolicy
		copyDeleted bool
		copyKept    bool // labelled and annotated kept by the binding
		finalizer   bool
		event       string
	}{
		{"Delete: kept", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), copyOf("c1"), "", false, true, false, keptEvent},
		{"Foreground (the binding's): kept", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), copyOf("c1"), kbindv1alpha1.DeletionPolicyForeground, false, true, false, keptEvent},
		{"Orphan (the annotation's): kept by protection", widget("ns", "w", "c1", annotated("Orphan"), kbindv1alpha1.SyncerFinalizer), copyOf("c1"), "", false, true, false, keptEvent},
		{"the annotation's Delete: kept", widget("ns", "w", "c1", annotated("Delete"), kbindv1alpha1.SyncerFinalizer), copyOf("c1"), kbindv1alpha1.DeletionPolicyOrphan, false, true, false, keptEvent},
		{"a typo: kept", widget("ns", "w", "c1", annotated("orphan"), kbindv1alpha1.SyncerFinalizer), copyOf("c1"), "", false, true, false, keptEvent},
		{"the object deleted itself: its copy deleted, the finalizer waits", deleting(widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer)), copyOf("c1"), "", true, false, true, ""},
		{"another object's copy: untouched, released", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), copyOf("c2"), "", false, false, false, ""},
		{"no copy: released", widget("ns", "w", "c1", nil, kbindv1alpha1.SyncerFinalizer), nil, "", false, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			consumer := fake.NewClientBuilder().WithObjects(tc.cobj.DeepCopy()).Build()
			pb := fake.NewClientBuilder()
			if tc.pobj != nil {
				pb = pb.WithObjects(tc.pobj.DeepCopy())
			}
			recorded := events.NewFakeRecorder(4)
			r := &releaser{reporter: reporter{target: target, results: NewResults(nil), events: recorded}, consumer: consumer,
				session: &session.Session{Client: pb.Build()}, doubts: &doubts{}}
			key := client.ObjectKeyFromObject(tc.cobj)
			cobj := widget("", "", "", nil)
			if err := consumer.Get(ctx, key, cobj); err != nil {
				t.Fatal(err)
			}
			// What a sync had written in doubt: a late copy is never deleted.
			r.doubts.wrote(key, cobj.GetUID())
			pobj, exists, err := r.providerCopy(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.release(ctx, cobj, pobj, exists, tc.def, by); err != nil {
				t.Fatal(err)
			}
			after, stillThere, err := r.providerCopy(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if deleted := exists && !stillThere; deleted != tc.copyDeleted {
				t.Errorf("provider copy deleted = %v, want %v", deleted, tc.copyDeleted)
			}
			if stillThere {
				kept := keptFor(after, by)
				if kept != tc.copyKept {
					t.Errorf("copy kept = %v (labels %v, annotations %v), want %v", kept, after.GetLabels(), after.GetAnnotations(), tc.copyKept)
				}
				if a := after.GetAnnotations(); a[kbindv1alpha1.ConsumerClusterUIDAnnotation] != "cluster" || a[kbindv1alpha1.ConsumerObjectUIDAnnotation] != tc.pobj.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] {
					t.Errorf("the copy's markers changed: %v", a)
				}
				if !tc.copyKept && after.GetLabels()[kbindv1alpha1.KeptLabel] != "" {
					t.Errorf("a copy not ours was labelled: %v", after.GetLabels())
				}
			}
			if held := holdsFinalizer(t, consumer, cobj); held != tc.finalizer {
				t.Errorf("finalizer held = %v, want %v", held, tc.finalizer)
			}
			if tc.copyKept {
				if _, late := r.doubts.late(key, cobj.GetUID()); late {
					t.Error("a kept copy would be deleted as a late write")
				}
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
			select {
			case e := <-recorded.Events:
				t.Errorf("a second event %q", e)
			default:
			}
		})
	}
}
