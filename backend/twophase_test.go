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
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	coordinationv1 "k8s.io/api/coordination/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/backendtest"
	"github.com/kbind/kbind/backend/reaper"
)

// grace is the reap grace period of these tests. A mark carries whole
// seconds, so it falls due between grace-1s and grace after it was set;
// the live konnector's stand-in (clearMarksOf) clears marks every 100 ms:
// grace-1s = 3 s leaves it 30 rounds to clear one, however busy the
// machine.
const grace = 4 * time.Second

// clearMarks plays a live konnector whose Lease renewals are refused but
// whose sync goes on: it watches its copies (a poll here) and removes the
// reaper's mark from each, as the syncer does on the copy's event. It
// returns the number of marks it cleared.
func clearMarks(t *testing.T, env *testEnv, consumer string) *atomic.Int64 {
	t.Helper()
	return clearMarksOf(t, env, func(ctx context.Context) []client.Object {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("example.org/v1alpha1")
		list.SetKind("WidgetList")
		if err := env.Client.List(ctx, list, client.MatchingLabels{kbindv1alpha1.ConsumerClusterUIDLabel: consumer}); err != nil {
			return nil
		}
		objs := make([]client.Object, 0, len(list.Items))
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
		return objs
	})
}

// clearMarksOf removes the reaper's mark, every 100 ms until the test
// ends, from each object list returns (a merge patch carrying the object's
// UID), and returns the number of marks it cleared.
func clearMarksOf(t *testing.T, env *testEnv, list func(context.Context) []client.Object) *atomic.Int64 {
	t.Helper()
	var cleared atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			for _, o := range list(ctx) {
				if _, ok := o.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation]; !ok {
					continue
				}
				data := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:null}}}`, o.GetUID(), kbindv1alpha1.ReapMarkedAtAnnotation)
				if err := env.Client.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(data))); err == nil {
					cleared.Add(1)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &cleared
}

func markOf(t *testing.T, env *testEnv, kind, namespace, name string) (mark string, found, terminating bool) {
	t.Helper()
	u := widget(kind)
	found, terminating = exists(t, env, u, namespace, name)
	return u.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation], found, terminating
}

// reapedAfterGrace starts a reaping backend with a grace period of a few
// seconds and holds what read reads (one provider object of the gone
// consumer: its reap mark, whether it exists, whether it is terminating)
// to the two phases: marked first (never deleted unmarked), kept — and the
// consumer's Lease with it — while the mark's grace period runs, then
// reaped, the Lease (kbind/a-1) after it.
func reapedAfterGrace(t *testing.T, env *testEnv, what, kbind string, read func() (mark string, found, terminating bool)) {
	t.Helper()
	const longGrace = 4 * time.Second
	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond, ReapGrace: longGrace})
	var markedSeen time.Time
	var markedAt string
	// Stale a window after the start, then marked: window + settle.
	backendtest.Eventually(t, window+settle, what+" marked", func() error {
		mark, found, _ := read()
		if !found {
			t.Fatalf("%s was deleted without ever being marked", what)
		}
		if mark == "" {
			return fmt.Errorf("not marked")
		}
		markedSeen, markedAt = time.Now(), mark
		return nil
	})
	marked, err := time.Parse(time.RFC3339, markedAt)
	if err != nil {
		t.Fatalf("the mark %q: %v", markedAt, err)
	}
	// The reaper may delete once the mark (whole seconds, its own clock,
	// the test's) is longGrace old: until then, however late a busy
	// machine saw the mark, nothing goes.
	backendtest.ConsistentlyUntil(t, marked.Add(longGrace), what+" waits for the grace period", func() error {
		if _, found, terminating := read(); !found || terminating {
			return fmt.Errorf("%s deleted %s after the mark was seen (marked at %s), before the grace period (%s)", what, time.Since(markedSeen), markedAt, longGrace)
		}
		if _, err := lease(t, env, kbind, "a-1"); err != nil {
			return fmt.Errorf("the Lease deleted before %s: %v", what, err)
		}
		return nil
	})
	// Due at marked+longGrace, deleted on the next pass, the Lease after
	// it: longGrace + settle from the mark.
	backendtest.Eventually(t, time.Until(marked.Add(longGrace+settle)), "the gone consumer reaped", func() error {
		if _, found, _ := read(); found {
			return fmt.Errorf("%s still there", what)
		}
		if _, err := lease(t, env, kbind, "a-1"); err == nil {
			return fmt.Errorf("the Lease still there")
		}
		return nil
	})
}

// TestLiveConsumerWithRefusedRenewalsIsNeverReaped (issue #52, path 4): the
// consumer's Lease is never renewed (renewals refused) while its konnector
// keeps syncing and clears the reaper's marks: its copies, related copies,
// namespace and Lease all stay, however long the Lease is stale.
func TestLiveConsumerWithRefusedRenewalsIsNeverReaped(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Copy(t, "Widget", teamA, "db", consumerA)
	env.Copy(t, "Widget", teamA, "cache", consumerA)
	env.Lease(t, kbind, "a-1", consumerA) // never renewed
	cleared := clearMarks(t, env, consumerA)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond, ReapGrace: grace})
	// Stale a window after the start, marked, cleared: window + settle.
	backendtest.Eventually(t, window+settle, "the reaper marked a copy and the konnector cleared it", func() error {
		for _, name := range []string{"db", "cache"} {
			if _, found, terminating := markOf(t, env, "Widget", teamA, name); !found || terminating {
				t.Fatalf("copy %s reaped (found=%v terminating=%v) although its konnector syncs (marks cleared: %d)", name, found, terminating, cleared.Load())
			}
		}
		if cleared.Load() == 0 {
			return fmt.Errorf("no mark cleared yet")
		}
		return nil
	})
	backendtest.Consistently(t, window+3*grace, "a live consumer keeps its copies", func() error {
		for _, name := range []string{"db", "cache"} {
			if _, found, terminating := markOf(t, env, "Widget", teamA, name); !found || terminating {
				return fmt.Errorf("copy %s reaped (found=%v terminating=%v) although its konnector clears the marks", name, found, terminating)
			}
		}
		if _, err := lease(t, env, kbind, "a-1"); err != nil {
			return fmt.Errorf("the Lease: %v", err)
		}
		return nil
	})
	t.Logf("marks cleared by the konnector: %d", cleared.Load())
}

// TestGoneConsumerIsReapedAfterGrace: a consumer whose konnector is gone
// is reaped — its copies only once their marks survived the grace period,
// then the rest, Leases last.
func TestGoneConsumerIsReapedAfterGrace(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Copy(t, "Widget", teamA, "db", consumerA)
	env.Related(t, "ConfigMap", teamA, "a-cm", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	reapedAfterGrace(t, env, "the copy team-a/db", kbind, func() (string, bool, bool) { return markOf(t, env, "Widget", teamA, "db") })
	if n := events(t, env, teamA, "db", reaper.ReasonReaped); n > 1 {
		t.Errorf("%d Reaped Events about db", n)
	}
}

// TestKeptCopyIsNeverReaped (issue #52, path 5): a copy kept by an Orphan
// release (core.kbind.io/kept: Orphan, markers intact) is never marked nor
// deleted, while the rest of the gone consumer is reaped.
func TestKeptCopyIsNeverReaped(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	consumerA := env.consumer("a")
	kbind, teamA := env.name("kbind"), env.name("team-a")
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamA, "")
	env.Copy(t, "Widget", teamA, "gone", consumerA)
	kept := env.Copy(t, "Widget", teamA, "kept-db", consumerA)
	kept.SetLabels(map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumerA,
		kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptOrphan})
	if err := env.Client.Update(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	env.Lease(t, kbind, "a-1", consumerA)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond, ReapGrace: grace})
	// Stale a window after the start, deleted a grace after being marked:
	// window + grace + settle.
	backendtest.Eventually(t, window+grace+settle, "the consumer reaped, its Lease last", func() error {
		if _, found, _ := markOf(t, env, "Widget", teamA, "gone"); found {
			return fmt.Errorf("gone still there")
		}
		if _, err := lease(t, env, kbind, "a-1"); err == nil {
			return fmt.Errorf("the Lease still there")
		}
		return nil
	})
	mark, found, terminating := markOf(t, env, "Widget", teamA, "kept-db")
	if !found || terminating || mark != "" {
		t.Errorf("the kept copy: found=%v terminating=%v mark=%q, want untouched", found, terminating, mark)
	}
}

// TestFailedReadBeforeDeleteDeletesNothing: the reaper reads each due copy
// again right before deleting it; when that read fails (here: it may not
// get), nothing is deleted, however old the mark.
func TestFailedReadBeforeDeleteDeletesNothing(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	consumerA := env.consumer("a")
	kbind, teamA := env.name("kbind"), env.name("team-a")
	env.Namespace(t, kbind, "")
	env.Namespace(t, teamA, "")
	env.Copy(t, "Widget", teamA, "db", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	// The user, its ClusterRole and binding are the test's own: RBAC
	// grants add up, another test's grants to the same user would leak.
	user := env.name("reaper")
	cfg := env.AddUser(t, user)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"list"}},
		{APIGroups: []string{"example.org"}, Resources: []string{"widgets"}, Verbs: []string{"patch", "delete"}}, // no get
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		env.Create(t, o)
	}
	r, err := backend.NewReaper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Grace = time.Second
	stale := func() bool { return true }
	backendtest.Eventually(t, settle, "the copy marked (RBAC takes a moment)", func() error {
		if _, err := r.Pass(context.Background(), consumerA, stale); err != nil {
			return err
		}
		if mark, found, _ := markOf(t, env, "Widget", teamA, "db"); !found || mark == "" {
			return fmt.Errorf("found=%v mark=%q", found, mark)
		}
		return nil
	})
	backendtest.Consistently(t, 3*r.Grace, "a copy that cannot be read again is never deleted", func() error {
		v, err := r.Pass(context.Background(), consumerA, stale)
		if err != nil {
			return err
		}
		if v != reaper.Waiting {
			return fmt.Errorf("verdict %v, want waiting", v)
		}
		if _, found, terminating := markOf(t, env, "Widget", teamA, "db"); !found || terminating {
			return fmt.Errorf("deleted without a read (found=%v terminating=%v)", found, terminating)
		}
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: kbind, Name: "a-1"}, l); err != nil {
			return fmt.Errorf("the Lease: %v", err)
		}
		return nil
	})
}
