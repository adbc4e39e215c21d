package backend_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/backendtest"
)

// isolatedCopy creates a provider copy the way the konnector writes one
// under isolation (docs/isolation.md): a derived namespace and name, the
// ownership markers and the consumer object's origin.
func isolatedCopy(t *testing.T, env *backendtest.Env, namespace, name, consumer, consumerNamespace, consumerName string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	u.SetAPIVersion("example.org/v1alpha1")
	u.SetKind("Widget")
	u.SetNamespace(namespace)
	u.SetName(name)
	kbindv1alpha1.CopyMarkers(consumer, "consumer-object-"+name).WithOrigin(consumerNamespace, consumerName).Stamp(u)
	env.Create(t, u)
}

// TestReapsAnIsolatedConsumer: A (Prefixed "a") stopped heartbeating, B
// (Namespace "tenant-b") is live. The reaper deletes exactly A's copies,
// the prefixed namespace kbind created for A and A's Lease, and nothing of
// B's — not its copies with the same consumer names, not its Lease, not
// the provider admin's tenant namespace.
func TestReapsAnIsolatedConsumer(t *testing.T) {
	env := backendtest.Start(t)
	// A, Prefixed: namespace "a" holds the Lease, "a-team-a" the copies.
	env.Namespace(t, "a", consumerA)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-team-a"}}
	kbindv1alpha1.PrefixedNamespaceMarkers(consumerA, "team-a").Stamp(ns)
	env.Create(t, ns)
	isolatedCopy(t, env, "a-team-a", "w1", consumerA, "team-a", "w1")
	env.Lease(t, "a", "provider-aaaaaaaa-1", consumerA)
	// B, Namespace: the admin's namespace, copies under derived names.
	env.Namespace(t, "tenant-b", "")
	isolatedCopy(t, env, "tenant-b", "team-a.w1", consumerB, "team-a", "w1")
	env.Lease(t, "tenant-b", "provider-bbbbbbbb-2", consumerB)
	stopB := keepRenewing(t, env, "tenant-b", "provider-bbbbbbbb-2", 300*time.Millisecond)
	defer stopB()

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})
	backendtest.Eventually(t, 20*time.Second, "A reaped", func() error {
		for _, o := range []struct {
			obj      client.Object
			ns, name string
		}{
			{widget("Widget"), "a-team-a", "w1"}, {&coordinationv1.Lease{}, "a", "provider-aaaaaaaa-1"},
		} {
			if found, _ := exists(t, env, o.obj, o.ns, o.name); found {
				return fmt.Errorf("%s/%s still there", o.ns, o.name)
			}
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if _, terminating := exists(t, env, &corev1.Namespace{}, "", "a-team-a"); !terminating {
			return fmt.Errorf("namespace a-team-a not deleted")
		}
		return nil
	})
	for _, o := range []struct {
		obj      client.Object
		ns, name string
	}{
		{widget("Widget"), "tenant-b", "team-a.w1"}, {&coordinationv1.Lease{}, "tenant-b", "provider-bbbbbbbb-2"}, {&corev1.Namespace{}, "", "tenant-b"},
	} {
		if found, terminating := exists(t, env, o.obj, o.ns, o.name); !found || terminating {
			t.Errorf("B's %T %s/%s: found=%v terminating=%v", o.obj, o.ns, o.name, found, terminating)
		}
	}
}
