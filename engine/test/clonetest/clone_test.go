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

package clonetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}

// Bounds, all derived from the heartbeat interval but connectBound: the
// time a konnector takes to connect, which every engine test allows for.
// connectBound only ever lengthens a window in which something must not
// happen (TestRestartIsNoDuplicate); where something must happen, the
// konnector's connection is waited for with no bound of its own (the
// machine's speed: measured and logged) and the interval-derived bound
// counts from it.
const (
	connectBound = enginetest.PollTimeout / 3
	// detectBound: both konnectors see the other's nonce within two
	// renewals (each at most 1.1 intervals apart) of the second one's
	// first, and say so at the next reconcile.
	detectBound = 6 * interval
	// holdBound is how long a deletion in the clone is watched: today's
	// engine deletes the provider copy within one sync, well inside it.
	holdBound = 5 * interval
)

// A consumer cluster restored from an etcd snapshot of production (a
// disaster-recovery drill, a staging clone) keeps production's identity
// (the kube-system UID), its object UIDs and its kubeconfig Secret: its
// konnector renews production's heartbeat Lease and the provider copies'
// markers say "ours". Both konnectors must report DuplicateConsumer, and
// a deletion in the clone must delete nothing on the provider; once the
// clone's konnector stops, production resumes (and deletes again).
func TestRestoredCloneDeletesNothing(t *testing.T) {
	ctx := context.Background()
	env := productionFor(t)
	w := create(t, env.Consumer, widget("drill", "db"))
	original := waitCopy(t, env, "drill", "db")

	clone := env.Pair.Consumer.CloneT(t, "clone")
	cc, err := client.New(clone.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The clone is production as the snapshot saw it.
	if a, b := kubeSystemUID(t, env.Consumer), kubeSystemUID(t, cc); a != b {
		t.Fatalf("the clone's identity %s is not production's %s", b, a)
	}
	cw, ok := get(t, cc, "drill", "db")
	if !ok || cw.GetUID() != w.GetUID() {
		t.Fatalf("the clone does not hold production's widget with its UID %s: %v", w.GetUID(), cw)
	}

	lease := heartbeatLease(t, env)
	productionNonce := lease.Annotations[kbindv1alpha1.KonnectorNonceAnnotation]
	stopClone := env.StartEngineOn(t, clone.Config, nil)
	started := time.Now()
	// The clone's konnector connects and renews production's Lease with a
	// nonce of its own: how long it takes to connect is the machine's
	// (measured, not bounded); detectBound counts from this renewal as the
	// test saw it (at or after the real one: the bound only gets looser).
	var renewed time.Time
	enginetest.Eventually(t, "the clone's konnector renewing production's Lease", func() error {
		if n := leaseNonce(t, env); n == productionNonce {
			return fmt.Errorf("the Lease carries production's nonce %q", n)
		}
		renewed = time.Now()
		return nil
	})
	t.Logf("the clone's konnector renewed production's Lease %s after it started", renewed.Sub(started).Round(time.Millisecond))
	// Both report it (not fatal here: what the clone deletes is the point).
	for _, side := range []struct {
		name string
		c    client.Client
	}{{"production", env.Consumer}, {"clone", cc}} {
		if err := waitDuplicate(side.c, renewed.Add(detectBound)); err != nil {
			t.Errorf("%s: no DuplicateConsumer within %s (detectBound) of the clone's first renewal: %v", side.name, detectBound, err)
		} else {
			t.Logf("%s reports DuplicateConsumer %s after the clone's first renewal", side.name, time.Since(renewed).Round(time.Millisecond))
		}
	}

	// A deletion in the clone deletes nothing on the provider: the object
	// keeps its finalizer and waits.
	if err := cc.Delete(ctx, cw); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	for time.Since(deleted) < holdBound {
		o, kept := get(t, cc, "drill", "db")
		released := !kept || !controllerutil.ContainsFinalizer(o, kbindv1alpha1.SyncerFinalizer)
		p, ok := get(t, env.Provider, "drill", "db")
		if !ok || p.GetDeletionTimestamp() != nil || p.GetUID() != original.GetUID() {
			t.Fatalf("the clone's konnector deleted production's provider copy drill/db (UID %s) %s after the deletion in the clone (the clone's object released: %t; the copy now: %v)",
				original.GetUID(), time.Since(deleted).Round(time.Millisecond), released, describe(p))
		}
		if released {
			t.Fatalf("the clone's object was released while its konnector is a duplicate (the provider copy is still there)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if t.Failed() {
		return
	}

	// The clone procedure (docs/troubleshooting.md#duplicate-consumer):
	// on the clone, every binding's deletionPolicy Orphan, then the
	// bindings and the Connection deleted — the clone lets go of
	// everything, production's copies and Lease stay.
	cb := &kbindv1alpha1.ClusterBinding{}
	if err := cc.Get(ctx, client.ObjectKey{Name: "widgets"}, cb); err != nil {
		t.Fatal(err)
	}
	cb.Spec.DeletionPolicy = kbindv1alpha1.DeletionPolicyOrphan
	if err := cc.Update(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if err := cc.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if err := cc.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cc, "drill", "db")
	enginetest.Eventually(t, "the clone's Connection gone", func() error {
		err := cc.Get(ctx, client.ObjectKey{Name: "provider"}, &kbindv1alpha1.Connection{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	if p, ok := get(t, env.Provider, "drill", "db"); !ok || p.GetUID() != original.GetUID() || p.GetDeletionTimestamp() != nil {
		t.Fatalf("the clone procedure touched production's provider copy: %s", describe(p))
	}
	if l := heartbeatLease(t, env); l.UID != lease.UID {
		t.Fatalf("the clone's Connection deleted production's heartbeat Lease (UID %s, now %s)", lease.UID, l.UID)
	}

	// The clone's konnector stops: production resumes once the duplicate
	// signal has stopped for the recovery window, and deletes again.
	stopClone()
	stopped := time.Now()
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}
	enginetest.WaitConditionWithin(t, recoverBound, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	t.Logf("production Ready again %s after the clone's konnector stopped", time.Since(stopped).Round(time.Millisecond))
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Provider, "drill", "db")
	waitGone(t, env.Consumer, "drill", "db")
}

// A konnector restart (as an upgrade or a leader failover) changes the
// Lease's nonce once: that is no duplicate, and deletion goes on.
func TestRestartIsNoDuplicate(t *testing.T) {
	ctx := context.Background()
	env := productionFor(t)
	w := create(t, env.Consumer, widget("restart", "db"))
	waitCopy(t, env, "restart", "db")
	before := leaseNonce(t, env)

	env.StopEngine()
	if err := env.StartEngine(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	enginetest.Eventually(t, "a new nonce on the Lease", func() error {
		if after := leaseNonce(t, env); after == before {
			return fmt.Errorf("nonce still %q", after)
		}
		return nil
	})
	for time.Since(started) < connectBound+detectBound {
		conn := &kbindv1alpha1.Connection{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "provider"}, conn); err != nil {
			t.Fatal(err)
		}
		for _, c := range conn.Status.Conditions {
			if c.Reason == string(kbindv1alpha1.ReasonDuplicateConsumer) {
				t.Fatalf("a restart was taken for a duplicate consumer %s after it: %s=%s %s", time.Since(started), c.Type, c.Status, c.Message)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Provider, "restart", "db")
	waitGone(t, env.Consumer, "restart", "db")
}

// recoverBound: the recovery window after the last sighting, a renewal to
// notice it and a reconcile.
const recoverBound = detectBound + 4*interval

// waitDuplicate waits until the Connection "provider" read through c
// reports DuplicateConsumer on Heartbeat and Ready, until deadline.
func waitDuplicate(c client.Client, deadline time.Time) error {
	last := fmt.Errorf("the deadline had passed")
	for time.Now().Before(deadline) {
		conn := &kbindv1alpha1.Connection{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "provider"}, conn); err != nil {
			return err
		}
		last = nil
		for _, typ := range []kbindv1alpha1.ConditionType{kbindv1alpha1.ConditionHeartbeat, kbindv1alpha1.ConditionReady} {
			cond := meta.FindStatusCondition(conn.Status.Conditions, string(typ))
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(kbindv1alpha1.ReasonDuplicateConsumer) {
				last = fmt.Errorf("%s: %+v", typ, cond)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// leaseNonce is the konnector nonce on production's heartbeat Lease.
func leaseNonce(t *testing.T, env *enginetest.Env) string {
	t.Helper()
	return heartbeatLease(t, env).Annotations[kbindv1alpha1.KonnectorNonceAnnotation]
}

// heartbeatLease is production's heartbeat Lease on the provider.
func heartbeatLease(t *testing.T, env *enginetest.Env) *coordinationv1.Lease {
	t.Helper()
	uid := kubeSystemUID(t, env.Consumer)
	var leases coordinationv1.LeaseList
	if err := env.Provider.List(context.Background(), &leases); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if ptr.Deref(l.Spec.HolderIdentity, "") == uid && strings.HasPrefix(l.Name, "provider-") {
			return &l
		}
	}
	t.Fatalf("no heartbeat Lease of consumer %s on the provider", uid)
	return nil
}

func kubeSystemUID(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

func widget(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func create(t *testing.T, c client.Client, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetNamespace()}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// get reads a widget; ok is false when it does not exist.
func get(t *testing.T, c client.Client, namespace, name string) (*unstructured.Unstructured, bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

func waitCopy(t *testing.T, env *enginetest.Env, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	var pcopy *unstructured.Unstructured
	enginetest.Eventually(t, fmt.Sprintf("provider copy %s/%s", namespace, name), func() error {
		u, ok := get(t, env.Provider, namespace, name)
		if !ok {
			return fmt.Errorf("absent")
		}
		pcopy = u
		return nil
	})
	return pcopy
}

// describe says which copy u is: absent, or its UID and whether it is
// being deleted.
func describe(u *unstructured.Unstructured) string {
	if u == nil {
		return "absent"
	}
	return fmt.Sprintf("UID %s, deleting %t", u.GetUID(), u.GetDeletionTimestamp() != nil)
}

func waitGone(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("widget %s/%s gone", namespace, name), func() error {
		if _, ok := get(t, c, namespace, name); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
}
