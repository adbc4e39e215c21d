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
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/backendtest"
)

// The issue #52 CI failure (fault lease-renewals-refused-with-reaper under
// load): a live konnector cleared the marks of every copy it syncs, round
// after round, while one copy it does not sync (an orphan) kept an old
// mark; then its consumer objects were deleted and the konnector deleted
// their copies. The next pass saw only the orphan, marked long ago, and
// reaped it, the consumer's namespace and its Lease.

// liveKonnector plays a konnector that syncs the copies named (clears
// their marks, as clearMarksOf does) and not the others.
func liveKonnector(t *testing.T, env *testEnv, namespace string, names ...string) {
	t.Helper()
	clearMarksOf(t, env, func(ctx context.Context) []client.Object {
		var out []client.Object
		for _, n := range names {
			u := widget("Widget")
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: n}, u); err == nil && u.GetDeletionTimestamp() == nil {
				out = append(out, u)
			}
		}
		return out
	})
}

// oldMark sets a reap mark long past any grace on a copy: one a pass of
// an earlier stale episode left, which no konnector cleared.
func oldMark(t *testing.T, env *testEnv, namespace, name string) {
	t.Helper()
	u := widget("Widget")
	u.SetNamespace(namespace)
	u.SetName(name)
	data := fmt.Sprintf(`{"metadata":{"annotations":{%q:"2000-01-01T00:00:00Z"}}}`, kbindv1alpha1.ReapMarkedAtAnnotation)
	if err := env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(data))); err != nil {
		t.Fatal(err)
	}
}

func deleteCopy(t *testing.T, env *testEnv, namespace, name string) {
	t.Helper()
	u := widget("Widget")
	u.SetNamespace(namespace)
	u.SetName(name)
	if err := client.IgnoreNotFound(env.Client.Delete(context.Background(), u)); err != nil {
		t.Fatal(err)
	}
}

// nothingReaped is nil while the consumer's orphan copy, its namespace
// teamA and its Lease kbind/a-1 are all there.
func nothingReaped(t *testing.T, env *testEnv, kbind, teamA string) error {
	t.Helper()
	if _, found, terminating := markOf(t, env, "Widget", teamA, "orphan"); !found || terminating {
		return fmt.Errorf("the orphan copy reaped (found=%v terminating=%v)", found, terminating)
	}
	if found, terminating := exists(t, env, &corev1.Namespace{}, "", teamA); !found || terminating {
		return fmt.Errorf("namespace %s reaped (found=%v terminating=%v)", teamA, found, terminating)
	}
	if _, err := lease(t, env, kbind, "a-1"); err != nil {
		return fmt.Errorf("the Lease: %v", err)
	}
	return nil
}

// TestMarkBeforeARenewalCountsForNothing: the consumer renews its Lease
// now and then but less often than the stale window (as the fault suite's
// konnector did after the heal, --stale-after 5 s against 10 s renewals),
// so the backend judges it stale between renewals. An orphan copy carries
// a mark an earlier episode left; the copy the konnector syncs is marked,
// cleared, then deleted (its consumer object was). A mark written before
// the consumer's last renewal proves nothing about it since: the orphan is
// marked again, and a renewal within the grace always comes first —
// nothing of the consumer is ever reaped.
func TestMarkBeforeARenewalCountsForNothing(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Copy(t, "Widget", teamA, "db", consumerA)
	env.Copy(t, "Widget", teamA, "orphan", consumerA)
	oldMark(t, env, teamA, "orphan")
	env.Lease(t, kbind, "a-1", consumerA)
	// Renewed every 4 s, stale after 3 s: stale 1 s in 4. The grace (8 s)
	// holds two renewals, so only a mark older than the last renewal can
	// be due.
	const every, longGrace = 4 * time.Second, 8 * time.Second
	keepRenewing(t, env, kbind, "a-1", every)
	liveKonnector(t, env, teamA, "db")

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond, ReapGrace: longGrace})
	backendtest.Eventually(t, 2*every+window+settle, "the reaper marked db (an episode began) and the konnector cleared it", func() error {
		if err := nothingReaped(t, env, kbind, teamA); err != nil {
			t.Fatal(err)
		}
		if !env.logged("Marked the stale consumer's copies") {
			return fmt.Errorf("no marking round yet")
		}
		return nil
	})
	// The user deletes db's consumer object; the konnector deletes db.
	deleteCopy(t, env, teamA, "db")
	backendtest.Consistently(t, 2*longGrace+2*every, "a consumer that renews keeps its orphan copy, namespace and Lease", func() error {
		return nothingReaped(t, env, kbind, teamA)
	})
}

// TestCopiesDeletedByALiveKonnectorAreEvidence: the consumer's renewals
// are refused for good. Its konnector clears the mark of the copy it
// syncs (db) round after round; an orphan it does not sync keeps its
// mark past the grace. Then db's consumer object is deleted and the
// konnector deletes db. A marked copy that vanished without the reaper
// deleting it, like a cleared mark, shows a live konnector: nothing is
// deleted until a whole grace passes without either.
func TestCopiesDeletedByALiveKonnectorAreEvidence(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Copy(t, "Widget", teamA, "db", consumerA)
	env.Copy(t, "Widget", teamA, "orphan", consumerA)
	env.Lease(t, kbind, "a-1", consumerA) // never renewed
	const longGrace = 6 * time.Second
	liveKonnector(t, env, teamA, "db")

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond, ReapGrace: longGrace})
	var orphanMarked time.Time
	backendtest.Eventually(t, window+settle, "the orphan marked", func() error {
		if err := nothingReaped(t, env, kbind, teamA); err != nil {
			t.Fatal(err)
		}
		mark, _, _ := markOf(t, env, "Widget", teamA, "orphan")
		if mark == "" {
			return fmt.Errorf("not marked")
		}
		var err error
		orphanMarked, err = time.Parse(time.RFC3339, mark)
		return err
	})
	// The orphan's mark survives the grace while db's is cleared again
	// and again: nothing goes.
	backendtest.ConsistentlyUntil(t, orphanMarked.Add(longGrace+time.Second), "the konnector clears db's mark", func() error {
		return nothingReaped(t, env, kbind, teamA)
	})
	if _, found, _ := markOf(t, env, "Widget", teamA, "db"); !found {
		t.Fatal("db reaped")
	}
	// db's consumer object is deleted; the konnector deletes db, whose
	// mark the reaper may have just written again.
	deleted := time.Now()
	deleteCopy(t, env, teamA, "db")
	backendtest.ConsistentlyUntil(t, deleted.Add(longGrace-time.Second), "a copy the konnector deleted keeps the consumer for a grace", func() error {
		return nothingReaped(t, env, kbind, teamA)
	})
	// A whole grace without a sign of the konnector, the Lease stale all
	// along: reaped (a konnector with nothing to sync cannot show it is
	// live through its copies; docs/reliability.md).
	backendtest.Eventually(t, longGrace+settle, "the consumer reaped after a quiet grace", func() error {
		if _, err := lease(t, env, kbind, "a-1"); err == nil {
			return fmt.Errorf("the Lease still there")
		}
		return nil
	})
}
