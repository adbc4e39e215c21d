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

package binding_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// A namespace relabelled in two steps (issue #52, path 1): its
// ClusterBinding's label removed first, the other binding's label set
// after, or its namespace handed from a ClusterBinding to a Binding waiting
// in it. In between the object is not selected — by stale claims (the
// syncer re-queues it on the label event before the bindings recompute
// theirs) or truly, for a moment. A deselection is acted on only when it
// persists on freshly computed claims (syncer.DecideSelection); a move
// within that window wins, and a move keeps the old copy by default: a
// relabel never destroys a database.
func TestRelabelInTwoSteps(t *testing.T) {
	setup(t)
	// Its names are this run's (s.ns), its API relabels.<group> of its own.
	s := newScenario()
	relabelAPI := s.api("relabels")
	east := startProvider(t, "rl-east", s, nil, sized(s.group, "relabels", "Relabel", "integer", ""))
	west := startProvider(t, "rl-west", s, nil, sized(s.group, "relabels", "Relabel", "integer", ""))

	t.Run("ClusterBinding east, no label, ClusterBinding west: the east copy is kept", func(t *testing.T) {
		ctx := context.Background()
		ns := s.ns("rl-two-step")
		makeNamespace(t, ns, map[string]string{"rl": "east"})
		toEast := relabelBinding(t, relabelAPI, s.ns("relabels-east"), east.conn.Name, "east")
		toWest := relabelBinding(t, relabelAPI, s.ns("relabels-west"), west.conn.Name, "west")
		defer deleteBindings(t, toEast, toWest)
		for _, cb := range []*kbindv1alpha1.ClusterBinding{toEast, toWest} {
			enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		}
		db := namespacedObject(s.version(), "Relabel", ns, "db")
		create(t, db)
		east.waitCopies(t, "Relabel", ns+"/db")
		east.statusComesBack(t, db)

		// Step 1: kubectl label ns rl-two-step rl-
		relabel(t, ns, nil)
		// The bindings have recomputed their claims: east counts nothing.
		waitInstances(t, toEast, kbindv1alpha1.InstanceCounts{})
		// Step 2: kubectl label ns rl-two-step rl=west
		relabel(t, ns, map[string]string{"rl": "west"})
		west.waitCopies(t, "Relabel", ns+"/db")
		west.statusComesBack(t, db)
		east.waitKeptFor(t, db, west.conn.Name)
		_ = ctx
	})

	t.Run("ClusterBinding east hands the namespace to a Binding through west: the east copy is kept", func(t *testing.T) {
		ns := s.ns("rl-handover")
		makeNamespace(t, ns, map[string]string{"rl": "east"})
		toEast := relabelBinding(t, relabelAPI, s.ns("relabels-east"), east.conn.Name, "east")
		waiting := namespacedBinding(t, ns, "relabels", west.conn.Name, relabelAPI)
		defer deleteBindings(t, waiting, toEast)
		enginetest.WaitCondition(t, env.Consumer, toEast, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		enginetest.WaitCondition(t, env.Consumer, waiting, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
			"already covered by a ClusterBinding")
		db := namespacedObject(s.version(), "Relabel", ns, "db")
		create(t, db)
		east.waitCopies(t, "Relabel", ns+"/db")
		east.statusComesBack(t, db)

		// kubectl label ns rl-handover rl-: the Binding waiting there claims it.
		relabel(t, ns, nil)
		west.waitCopies(t, "Relabel", ns+"/db")
		west.statusComesBack(t, db)
		east.waitKeptFor(t, db, west.conn.Name)
	})

	t.Run("after a hand-over, the bindings deleted one by one: the new route's copy is drained, never orphaned", func(t *testing.T) {
		ns := s.ns("rl-handed")
		makeNamespace(t, ns, map[string]string{"rl": "east"})
		toEast := relabelBinding(t, relabelAPI, s.ns("relabels-east"), east.conn.Name, "east")
		toWest := relabelBinding(t, relabelAPI, s.ns("relabels-west"), west.conn.Name, "west")
		waiting := namespacedBinding(t, ns, "relabels", west.conn.Name, relabelAPI)
		defer deleteBindings(t, waiting, toEast, toWest)
		enginetest.WaitCondition(t, env.Consumer, toEast, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		db := namespacedObject(s.version(), "Relabel", ns, "db")
		create(t, db)
		east.waitCopies(t, "Relabel", ns+"/db")
		relabel(t, ns, nil)
		west.waitCopies(t, "Relabel", ns+"/db")
		west.statusComesBack(t, db)
		east.waitKeptFor(t, db, west.conn.Name)

		// The Binding goes: west's ClusterBinding covers the namespace
		// without selecting it, so west's route releases the object once
		// the deselection persists. East's drain, meanwhile, must not take
		// the finalizer of an object west syncs: west's copy would be left
		// with nothing to delete it.
		deleteBindings(t, waiting, toEast)
		west.waitCopies(t, "Relabel")
		enginetest.Eventually(t, "the finalizer released by west's route", func() error {
			if got := consumerObject(t, db); len(got.GetFinalizers()) > 0 {
				return fmt.Errorf("finalizers %v", got.GetFinalizers())
			}
			return nil
		})
	})

	t.Run("an object deleted after a move before the new route took it is released by the old route, never stuck", func(t *testing.T) {
		ctx := context.Background()
		ns := s.ns("rl-deleted-in-move")
		makeNamespace(t, ns, map[string]string{"rl": "east"})
		toEast := relabelBinding(t, relabelAPI, s.ns("relabels-east"), east.conn.Name, "east")
		// The new route claims the namespace but never syncs (its
		// Connection does not exist): nothing of it takes the object's
		// finalizer over, as with a new route slower than the user.
		toGhost := relabelBinding(t, relabelAPI, s.ns("relabels-ghost"), s.ns("rl-ghost"), "ghost")
		defer deleteBindings(t, toEast, toGhost)
		enginetest.WaitCondition(t, env.Consumer, toEast, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		kept := namespacedObject(s.version(), "Relabel", ns, "kept")
		gone := namespacedObject(s.version(), "Relabel", ns, "gone")
		gone.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: string(kbindv1alpha1.DeletionPolicyDelete)})
		create(t, kept)
		create(t, gone)
		east.waitCopies(t, "Relabel", ns+"/gone", ns+"/kept")

		// kubectl label ns … rl=ghost: east releases its copies for the
		// move (kept, or deleted as gone's annotation asks); the objects
		// keep east's finalizer and route annotation, which the new route
		// would rewrite when it syncs them.
		relabel(t, ns, map[string]string{"rl": "ghost"})
		east.waitKeptFor(t, kept, s.ns("rl-ghost"))
		east.waitCopies(t, "Relabel") // gone's deleted, kept's no longer kbind's
		for _, obj := range []*unstructured.Unstructured{kept, gone} {
			if err := env.Consumer.Delete(ctx, obj.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
		// The finalizer is east's: nobody else will ever release it.
		for _, obj := range []*unstructured.Unstructured{kept, gone} {
			enginetest.Eventually(t, "deleted "+obj.GetName()+" released", func() error {
				got, err := at(env.Consumer, obj.GetAPIVersion(), obj)
				if apierrors.IsNotFound(err) {
					return nil
				}
				if err != nil {
					return err
				}
				return fmt.Errorf("still there, deleting %t, finalizers %v", got.GetDeletionTimestamp() != nil, got.GetFinalizers())
			})
		}
		// The copy kept for the move stays: no longer kbind's.
		east.waitKeptFor(t, kept, s.ns("rl-ghost"))
	})

	t.Run("a deselection that persists is released under the binding's policy", func(t *testing.T) {
		ns := s.ns("rl-left")
		makeNamespace(t, ns, map[string]string{"rl": "east"})
		toEast := relabelBinding(t, relabelAPI, s.ns("relabels-east"), east.conn.Name, "east")
		defer deleteBindings(t, toEast)
		enginetest.WaitCondition(t, env.Consumer, toEast, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		db := namespacedObject(s.version(), "Relabel", ns, "db")
		create(t, db)
		east.waitCopies(t, "Relabel", ns+"/db")

		relabel(t, ns, nil)
		// No move comes: once the deselection has held for its grace
		// (two binding resyncs) on recomputed claims, the default Delete
		// deletes the copy and the finalizer goes.
		east.waitCopies(t, "Relabel")
		enginetest.Eventually(t, "the finalizer released", func() error {
			if got := consumerObject(t, db); len(got.GetFinalizers()) > 0 {
				return fmt.Errorf("finalizers %v", got.GetFinalizers())
			}
			return nil
		})
	})
}

// makeNamespace creates a consumer namespace with labels.
func makeNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := env.Consumer.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
		t.Fatal(err)
	}
}

// relabelBinding binds relabelAPI through connection in the namespaces
// labelled rl=region.
func relabelBinding(t *testing.T, relabelAPI, name, connection, region string) *kbindv1alpha1.ClusterBinding {
	t.Helper()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec(connection, relabelAPI)}
	cb.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rl": region}}
	if err := env.Consumer.Create(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
	return cb
}

// deleteBindings deletes bindings in order, each waited for.
func deleteBindings(t *testing.T, bindings ...client.Object) {
	t.Helper()
	for _, b := range bindings {
		if err := env.Consumer.Delete(context.Background(), b); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, b)
	}
}

// waitKeptFor waits until p holds the copy of obj kept for its move to
// Connection to: kbind's markers replaced by the moved annotation. A
// copy deleted is a lost database.
func (p *provider) waitKeptFor(t *testing.T, obj *unstructured.Unstructured, to string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s keeps the copy of %s/%s, moved to %s", p.name, obj.GetNamespace(), obj.GetName(), to), func() error {
		got, err := at(p.client, obj.GetAPIVersion(), obj)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the copy was DELETED: a relabel destroyed the database")
		}
		if err != nil {
			return err
		}
		if moved := got.GetAnnotations()[kbindv1alpha1.MovedAnnotation]; !strings.Contains(moved, "to Connection "+to) {
			return fmt.Errorf("moved annotation %q", moved)
		}
		return nil
	})
}
