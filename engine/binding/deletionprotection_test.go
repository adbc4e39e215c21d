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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// heldFor is how long a held deletion is watched: five binding resyncs
// of the package's engine (enginetest: 2 s) and more than the syncers'
// deselection grace (two resyncs), after which a deleting binding that
// claimed nothing would have had its copies released.
const heldFor = 12 * time.Second

// sharedProvider is the package pair's provider as a provider of s.
func sharedProvider(s scenario, conn *kbindv1alpha1.Connection) *provider {
	return &provider{scenario: s, name: "the shared provider", client: env.Provider, conn: conn}
}

// setProtection sets spec.deletionProtection of the binding b.
func setProtection(t *testing.T, b client.Object, on bool) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("deletionProtection %t on %s", on, b.GetName()), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.(kbindv1alpha1.BindingObject).BindingSpec().DeletionProtection = on
		return env.Consumer.Update(context.Background(), b)
	})
}

// protectedEvents counts the DeletionProtected Events on the object of uid.
func protectedEvents(t *testing.T, uid types.UID) int {
	t.Helper()
	events := &eventsv1.EventList{}
	if err := env.Consumer.List(context.Background(), events); err != nil {
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

// keeps checks, for heldFor, that the deleting binding b is still there
// and that every object of objs and its copy on p are, and the consumer
// CRD crd (when not "") too: nothing of a held deletion goes.
func keeps(t *testing.T, b client.Object, p *provider, kind, crd string, objs ...string) {
	t.Helper()
	holds(t, heldFor, "a held deletion keeps everything", func() error {
		got := b.DeepCopyObject().(client.Object)
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
			return fmt.Errorf("the binding: %w", err)
		}
		if crd != "" {
			c := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: crd}, c); err != nil || !c.DeletionTimestamp.IsZero() {
				return fmt.Errorf("the consumer CRD %s was deleted (%v)", crd, err)
			}
		}
		if got := p.copies(t, kind); fmt.Sprint(got) != fmt.Sprint(objs) {
			return fmt.Errorf("the provider holds copies of %v, want %v", got, objs)
		}
		return nil
	})
}

// A protected ClusterBinding deleted (kubectl delete, a GitOps prune)
// without the chart's policy: the konnector's finalizer holds it — the
// provider copies, the consumer objects and the consumer CRD all stay for
// many resyncs, while it keeps syncing; Ready says DeletionProtected with
// the counts and the way forward, one Warning Event. Turning protection
// off completes the deletion as without it: copies drained, CRD deleted.
func TestProtectedClusterBindingIsHeld(t *testing.T) {
	setup(t)
	ctx := context.Background()
	s := newScenario()
	api := s.api("keeps")
	installCRDs(t, env.Provider, sized(s.group, "keeps", "Keep", "integer", ""))
	conn := connect(t, "protect", nil)
	p := sharedProvider(s, conn)
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("keeps")}, Spec: spec(conn.Name, api)}
	cb.Spec.DeletionProtection = true
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	db := defaultObject(s.version(), "Keep", unique("db"))
	create(t, db)
	p.waitCopies(t, "Keep", "default/"+db.GetName())
	waitInstances(t, cb, kbindv1alpha1.InstanceCounts{Total: 1, Synced: 1})
	waitUnbindDeletesCRD(t, cb, true)

	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDeletionProtected,
		"release 1 object(s) of "+api, "then delete the consumer CRD "+api+" with every object of it",
		"set spec.deletionProtection to false to let the deletion proceed (a Terminating ClusterBinding cannot be revived)")
	keeps(t, cb, p, "Keep", api, "default/"+db.GetName())
	// Held, it syncs as before: an object created now gets its copy.
	late := defaultObject(s.version(), "Keep", unique("late"))
	create(t, late)
	p.waitCopies(t, "Keep", "default/"+db.GetName(), "default/"+late.GetName())
	if n := protectedEvents(t, cb.UID); n != 1 {
		t.Errorf("%d DeletionProtected Warning Events after %s held, want 1 (once per state, not per resync)", n, heldFor)
	}
	if consumerObject(t, db).GetDeletionTimestamp() != nil {
		t.Error("a consumer object is being deleted under a held binding")
	}

	setProtection(t, cb, false)
	waitGoneBinding(t, cb)
	p.waitCopies(t, "Keep")
	enginetest.Eventually(t, "the consumer CRD deleted with the last ClusterBinding", func() error {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: api}, c); apierrors.IsNotFound(err) || (err == nil && !c.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("still there")
	})
}

// The same for a namespaced Binding; a Binding whose namespace is being
// deleted is not held (the namespace controller's deletes are not covered:
// the namespace's objects go anyway, and a held Binding would only keep
// the namespace Terminating).
func TestProtectedBindingIsHeld(t *testing.T) {
	setup(t)
	ctx := context.Background()
	s := newScenario()
	api := s.api("holds")
	installCRDs(t, env.Provider, sized(s.group, "holds", "Hold", "integer", ""))
	conn := connect(t, "protect-ns", nil, admitAll)
	p := sharedProvider(s, conn)
	team := s.ns("team-p")
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "holds"}, Spec: spec(conn.Name, api)}
	b.Spec.DeletionProtection = true
	makeNamespace(t, team, nil)
	if err := env.Consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	db := namespacedObject(s.version(), "Hold", team, "db")
	create(t, db)
	p.waitCopies(t, "Hold", team+"/db")
	waitInstances(t, b, kbindv1alpha1.InstanceCounts{Total: 1, Synced: 1})

	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDeletionProtected,
		"release 1 object(s) of "+api, "a Terminating Binding cannot be revived")
	keeps(t, b, p, "Hold", api, team+"/db")
	if n := protectedEvents(t, b.UID); n != 1 {
		t.Errorf("%d DeletionProtected Warning Events, want 1", n)
	}
	setProtection(t, b, false)
	waitGoneBinding(t, b)
	p.waitCopies(t, "Hold")

	// A namespace being deleted: its protected Binding's deletion proceeds.
	// (The test servers run no namespace controller: the namespace stays
	// Terminating and its Binding is deleted by hand, as that controller
	// would.)
	doomed := s.ns("team-doomed")
	makeNamespace(t, doomed, nil)
	nb := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: doomed, Name: "holds"}, Spec: spec(conn.Name, api)}
	nb.Spec.DeletionProtection = true
	if err := env.Consumer.Create(ctx, nb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, nb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if err := env.Consumer.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Consumer.Delete(ctx, nb); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, nb)
}

// status.boundAPIs[].unbindDeletesCRD: true on the one ClusterBinding of
// an API whose consumer CRD kbind created, false on both of two that list
// it (deleting either keeps the CRD), true again once the other is gone —
// and never on a ClusterBinding of a CRD kbind did not create.
func TestUnbindDeletesCRDStatus(t *testing.T) {
	setup(t)
	ctx := context.Background()
	s := newScenario()
	api := s.api("fates")
	installCRDs(t, env.Provider, sized(s.group, "fates", "Fate", "integer", ""))
	conn := connect(t, "fates", nil)
	one := clusterBinding(t, "fates-one", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, one, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitUnbindDeletesCRD(t, one, true)
	two := clusterBinding(t, "fates-two", conn.Name, api)
	enginetest.WaitCondition(t, env.Consumer, two, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitUnbindDeletesCRD(t, two, false)
	waitUnbindDeletesCRD(t, one, false)
	if err := env.Consumer.Delete(ctx, two); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, two)
	waitUnbindDeletesCRD(t, one, true)
	deleteBindings(t, one)

	// A consumer CRD kbind did not create (stamped under pullPolicy None)
	// is never deleted: false.
	theirs := s.api("theirs")
	installCRDs(t, env.Provider, enginetest.CRD("theirs", "their", "Their", s.group, ns, true))
	installCRDs(t, env.Consumer, enginetest.CRD("theirs", "their", "Their", s.group, ns, false))
	none := connect(t, "fates-none", nil, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyNone })
	cb := clusterBinding(t, "fates-none", none.Name, theirs)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitUnbindDeletesCRD(t, cb, false)
	deleteBindings(t, cb)
}

// waitUnbindDeletesCRD waits until the ClusterBinding's one bound API says
// want in unbindDeletesCRD.
func waitUnbindDeletesCRD(t *testing.T, cb *kbindv1alpha1.ClusterBinding, want bool) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s unbindDeletesCRD %t", cb.Name, want), func() error {
		got := &kbindv1alpha1.ClusterBinding{}
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(cb), got); err != nil {
			return err
		}
		if len(got.Status.BoundAPIs) != 1 || got.Status.BoundAPIs[0].UnbindDeletesCRD != want {
			return fmt.Errorf("bound APIs %+v", got.Status.BoundAPIs)
		}
		return nil
	})
}
