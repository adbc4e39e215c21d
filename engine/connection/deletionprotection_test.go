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

package connection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// heldFor is how long a held deletion is watched: several discovery
// passes and heartbeat renewals of the package's engine (enginetest: 2 s
// and 1 s).
const heldFor = 10 * time.Second

// setConnectionProtection sets spec.deletionProtection of Connection name.
func setConnectionProtection(t *testing.T, name string, on bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("deletionProtection %t on %s", on, name), func() error {
		conn := &kbindv1alpha1.Connection{}
		if err := consumer.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
			return err
		}
		conn.Spec.DeletionProtection = on
		return consumer.Update(context.Background(), conn)
	})
}

// waitAutoBindProtection waits until the autoBind ClusterBinding name says
// want in spec.deletionProtection.
func waitAutoBindProtection(t *testing.T, name string, want bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("autoBind ClusterBinding %s protected %t", name, want), func() error {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := consumer.Get(context.Background(), client.ObjectKey{Name: name}, cb); err != nil {
			return err
		}
		if cb.Spec.DeletionProtection != want {
			return fmt.Errorf("deletionProtection %t", cb.Spec.DeletionProtection)
		}
		return nil
	})
}

// heartbeatLease finds the heartbeat Lease of Connection name on provider
// c (by the name prefix it has there).
func heartbeatLease(t *testing.T, c client.Client, name string) *coordinationv1.Lease {
	t.Helper()
	var found *coordinationv1.Lease
	eventually(t, "the heartbeat Lease of "+name, func() error {
		leases := &coordinationv1.LeaseList{}
		if err := c.List(context.Background(), leases); err != nil {
			return err
		}
		for i := range leases.Items {
			if strings.HasPrefix(leases.Items[i].Name, name+"-") {
				found = &leases.Items[i]
				return nil
			}
		}
		return fmt.Errorf("none among %d Leases", len(leases.Items))
	})
	return found
}

// protectedEvents counts the DeletionProtected Warning Events on the
// object of uid.
func protectedEvents(t *testing.T, uid types.UID) int {
	t.Helper()
	events := &eventsv1.EventList{}
	if err := consumer.List(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Regarding.UID == uid && e.Reason == string(kbindv1alpha1.ReasonDeletionProtected) && e.Type == corev1.EventTypeWarning {
			n++
		}
	}
	return n
}

// A protected Connection deleted without the chart's policy: the
// konnector's finalizer holds it — its autoBind ClusterBinding is not
// deleted (nor drained), its session and heartbeat go on, its Secret keeps
// its finalizer — and Ready says DeletionProtected with what would go and
// the way forward, one Warning Event. The autoBind ClusterBinding carries
// the Connection's protection both ways. Turning protection off lets the
// deletion proceed as without it.
func TestProtectedConnectionIsHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := unique("guarded")
	group := name + ".example.org"
	own, pc := ownProvider(t, widgetCRD("widgets", group, true))
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": own.Kubeconfig})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
		c.Spec.DeletionProtection = true
	})
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitAutoBindProtection(t, name, true)
	setConnectionProtection(t, name, false)
	waitAutoBindProtection(t, name, false)
	setConnectionProtection(t, name, true)
	waitAutoBindProtection(t, name, true)
	lease := heartbeatLease(t, pc, name)
	autoBinding := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	enginetest.WaitCondition(t, consumer, autoBinding, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	conn := getConnection(t, name)
	if err := consumer.Delete(ctx, conn); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDeletionProtected,
		"no binding is drained, no session retired and nothing deleted; it works as before",
		"its deletion would delete its autoBind ClusterBinding "+name,
		"wait for the 1 binding(s) referencing it to be deleted: ClusterBinding "+name+"; set spec.deletionProtection",
		"set spec.deletionProtection to false to let the deletion proceed (a Terminating Connection cannot be revived)")
	for deadline := time.Now().Add(heldFor); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := consumer.Get(ctx, client.ObjectKey{Name: name}, cb); err != nil || !cb.DeletionTimestamp.IsZero() {
			t.Fatalf("a held Connection's autoBind ClusterBinding was deleted (%v)", err)
		}
		// Its bindings keep working through it.
		if c := apimeta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionReady)); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("the autoBind ClusterBinding of a held Connection is not Ready: %+v", c)
		}
		secret := &corev1.Secret{}
		if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret); err != nil || !controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
			t.Fatalf("a held Connection's Secret was released (%v)", err)
		}
		if c := getConnection(t, name); c.DeletionTimestamp.IsZero() {
			t.Fatal("the Connection is no longer deleting")
		}
	}
	// Its session goes on: the heartbeat is renewed after the deletion.
	got := &coordinationv1.Lease{}
	if err := pc.Get(ctx, client.ObjectKeyFromObject(lease), got); err != nil || got.Spec.RenewTime == nil || !got.Spec.RenewTime.After(deletedAt) {
		t.Fatalf("the heartbeat Lease of a held Connection is not renewed: %v (%v)", got.Spec.RenewTime, err)
	}
	if n := protectedEvents(t, conn.UID); n != 1 {
		t.Errorf("%d DeletionProtected Warning Events after %s held, want 1 (once per state, not per reconcile)", n, heldFor)
	}

	// Protection off: the autoBind ClusterBinding goes (carrying it, off),
	// then the Connection and its heartbeat Lease.
	setConnectionProtection(t, name, false)
	eventually(t, "the Connection gone", func() error {
		if err := consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.Connection{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		if err := consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the autoBind ClusterBinding still there (%v)", err)
		}
		if err := pc.Get(ctx, client.ObjectKeyFromObject(lease), &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the heartbeat Lease still there (%v)", err)
		}
		return nil
	})
}

// An unprotected Connection deleted never drains a protected binding: it
// waits for it (DrainingBindings) and says how to let it go; the binding,
// deleted, is held until its own protection is off, then the Connection
// finishes.
func TestConnectionDeletionWaitsForAProtectedBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := unique("unguarded")
	group := name + ".example.org"
	own, _ := ownProvider(t, widgetCRD("widgets", group, true))
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": own.Kubeconfig})
	createConnection(t, name, secretNS, name)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-guarded"},
		Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: name},
			APIs: []kbindv1alpha1.APIReference{{Name: "widgets." + group}}, DeletionProtection: true}}
	if err := consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	if err := consumer.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings,
		"ClusterBinding "+cb.Name+" (protected: set its spec.deletionProtection to false, then delete it)")
	if err := consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDeletionProtected)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings,
		"ClusterBinding "+cb.Name+" (its deletion is held by its spec.deletionProtection: set it to false to let the deletion proceed)")
	eventually(t, "protection off on "+cb.Name, func() error {
		if err := consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		cb.Spec.DeletionProtection = false
		return consumer.Update(ctx, cb)
	})
	eventually(t, "the binding and the Connection gone", func() error {
		if err := consumer.Get(ctx, client.ObjectKeyFromObject(cb), &kbindv1alpha1.ClusterBinding{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the binding still there (%v)", err)
		}
		if err := consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.Connection{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Connection still there (%v)", err)
		}
		return nil
	})
}
