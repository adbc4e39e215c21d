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
func isolatedCopy(t *testing.T, env *testEnv, namespace, name, consumer, consumerNamespace, consumerName string) {
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
	t.Parallel()
	env := newEnv(t)
	consumerA, consumerB := env.consumer("a"), env.consumer("b")
	nsA, aTeamA, tenantB := env.name("a"), env.name("a-team-a"), env.name("tenant-b")
	// A, Prefixed: namespace <id>-a holds the Lease, <id>-a-team-a the copies.
	env.Namespace(t, nsA, consumerA)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aTeamA}}
	kbindv1alpha1.PrefixedNamespaceMarkers(consumerA, "team-a").Stamp(ns)
	env.Create(t, ns)
	isolatedCopy(t, env, aTeamA, "w1", consumerA, "team-a", "w1")
	env.Lease(t, nsA, "provider-aaaaaaaa-1", consumerA)
	// B, Namespace: the admin's namespace, copies under derived names.
	env.Namespace(t, tenantB, "")
	isolatedCopy(t, env, tenantB, "team-a.w1", consumerB, "team-a", "w1")
	env.Lease(t, tenantB, "provider-bbbbbbbb-2", consumerB)
	stopB := keepRenewing(t, env, tenantB, "provider-bbbbbbbb-2", 300*time.Millisecond)
	defer stopB()

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})
	// Stale a window after the start, deleted a reap grace (500ms,
	// startBackend) after being marked: window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "A reaped", func() error {
		for _, o := range []struct {
			obj      client.Object
			ns, name string
		}{
			{widget("Widget"), aTeamA, "w1"}, {&coordinationv1.Lease{}, nsA, "provider-aaaaaaaa-1"},
		} {
			if found, _ := exists(t, env, o.obj, o.ns, o.name); found {
				return fmt.Errorf("%s/%s still there", o.ns, o.name)
			}
		}
		// No namespace controller here: a deleted namespace stays Terminating.
		if _, terminating := exists(t, env, &corev1.Namespace{}, "", aTeamA); !terminating {
			return fmt.Errorf("namespace %s not deleted", aTeamA)
		}
		return nil
	})
	for _, o := range []struct {
		obj      client.Object
		ns, name string
	}{
		{widget("Widget"), tenantB, "team-a.w1"}, {&coordinationv1.Lease{}, tenantB, "provider-bbbbbbbb-2"}, {&corev1.Namespace{}, "", tenantB},
	} {
		if found, terminating := exists(t, env, o.obj, o.ns, o.name); !found || terminating {
			t.Errorf("B's %T %s/%s: found=%v terminating=%v", o.obj, o.ns, o.name, found, terminating)
		}
	}
}
