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

package liveness

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

type fakeReaper struct {
	calls []string
	stale []bool
}

func (f *fakeReaper) Reap(_ context.Context, uid string, stillStale func() bool) (bool, error) {
	f.calls = append(f.calls, uid)
	f.stale = append(f.stale, stillStale())
	return false, nil
}

func testLease(name, uid, renew string, annotate bool) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: name,
		Labels:      map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: uid},
		Annotations: map[string]string{}}}
	if annotate {
		l.Annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation] = uid
	}
	t, err := time.Parse(time.RFC3339, renew)
	if err != nil {
		panic(err)
	}
	mt := metav1.NewMicroTime(t)
	l.Spec.RenewTime = &mt
	l.Spec.HolderIdentity = &uid // as the konnector holds its Lease
	return l
}

// TestReconcileRequeuesExactlyAtTheTransition drives the controller with a
// fake clock: it requeues at the exact moment a Lease would turn stale,
// marks it with the backend's time, clears the mark on renewal, counts a
// consumer with one live Lease as live, ignores a Lease without both
// markers and hands an all-stale consumer to the reaper.
func TestReconcileRequeuesExactlyAtTheTransition(t *testing.T) {
	const window = 30 * time.Minute
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The holder's clock is far in the future: irrelevant to the verdict.
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		testLease("a-1", "A", "2999-01-01T00:00:00Z", true),
		testLease("b-1", "B", "2026-12-02T09:59:00Z", true),
		testLease("b-2", "B", "2026-12-02T09:59:00Z", true),
		testLease("c-1", "C", "2026-12-02T09:59:00Z", false), // no annotation: ignored
	).Build()
	reaper := &fakeReaper{}
	c := &Controller{Client: cl, Tracker: NewTracker(clk, window), Clock: clk, Reaper: reaper, ReapInterval: time.Minute}
	c.init()
	ctx := context.Background()
	reconcileUID := func(uid string) reconcile.Result {
		t.Helper()
		res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: uid}})
		if err != nil {
			t.Fatalf("reconcile %s: %v", uid, err)
		}
		return res
	}
	annotation := func(name string) (string, bool) {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: name}, l); err != nil {
			t.Fatal(err)
		}
		v, ok := l.Annotations[kbindv1alpha1.StaleSinceAnnotation]
		return v, ok
	}
	renew := func(name, at string) {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: name}, l); err != nil {
			t.Fatal(err)
		}
		ts, _ := time.Parse(time.RFC3339, at)
		mt := metav1.NewMicroTime(ts)
		l.Spec.RenewTime = &mt
		if err := cl.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}

	for _, uid := range []string{"A", "B"} {
		if res := reconcileUID(uid); res.RequeueAfter != window {
			t.Errorf("%s: first requeue after %v, want exactly %v", uid, res.RequeueAfter, window)
		}
	}
	if res := reconcileUID("C"); res.RequeueAfter != 0 {
		t.Errorf("C has no attributable Lease; requeue %v", res.RequeueAfter)
	}

	clk.Step(window - 10*time.Second)
	renew("b-1", "2026-12-02T10:29:00Z") // B renews one Lease
	if res := reconcileUID("A"); res.RequeueAfter != 10*time.Second {
		t.Errorf("A: requeue after %v, want exactly 10s", res.RequeueAfter)
	}
	if res := reconcileUID("B"); res.RequeueAfter != 10*time.Second {
		t.Errorf("B: requeue after %v, want 10s (b-2's transition)", res.RequeueAfter)
	}

	clk.Step(10 * time.Second)
	res := reconcileUID("A")
	if v, ok := annotation("a-1"); !ok || v != "2026-12-02T10:30:00Z" {
		t.Errorf("a-1 stale-since %q %v, want the backend's 10:30:00Z", v, ok)
	}
	if len(reaper.calls) != 1 || reaper.calls[0] != "A" || !reaper.stale[0] {
		t.Errorf("reaper calls %v (still stale %v), want one for A", reaper.calls, reaper.stale)
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("unfinished reaping requeues after %v, want the reap interval", res.RequeueAfter)
	}
	res = reconcileUID("B")
	if _, ok := annotation("b-2"); !ok {
		t.Error("b-2 is stale and not marked")
	}
	if _, ok := annotation("b-1"); ok {
		t.Error("b-1 renewed and is marked")
	}
	if len(reaper.calls) != 1 {
		t.Errorf("B has a live Lease and was handed to the reaper: %v", reaper.calls)
	}
	if want := window - 10*time.Second; res.RequeueAfter != want {
		t.Errorf("B: requeue after %v, want %v (b-1's transition)", res.RequeueAfter, want)
	}
	if v, _ := c.renewalAges()["A"]; v != window {
		t.Errorf("A renewal age %v, want %v", v, window)
	}

	// A comes back: the mark goes, reaping stops being asked for.
	renew("a-1", "2999-01-01T00:00:30Z")
	if res := reconcileUID("A"); res.RequeueAfter != window {
		t.Errorf("A after renewal: requeue %v, want %v", res.RequeueAfter, window)
	}
	if v, ok := annotation("a-1"); ok {
		t.Errorf("a-1 still marked %q after renewing", v)
	}
	if len(reaper.calls) != 1 {
		t.Errorf("reaper called for a live consumer: %v", reaper.calls)
	}
}

// TestTakenOverLeaseHoldsReaping: a consumer with one stale Lease it holds
// and one Lease someone else holds is judged by the first (stale) but not
// reaped while the takeover lasts; a Lease taken over mid-pass stops the
// pass; once the taken-over Lease is gone, reaping goes on.
func TestTakenOverLeaseHoldsReaping(t *testing.T) {
	const window = time.Minute
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	held := func(l *coordinationv1.Lease, holder string) *coordinationv1.Lease {
		l.Spec.HolderIdentity = &holder
		return l
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		held(testLease("a-1", "A", "2026-12-02T09:59:00Z", true), "A"),
		held(testLease("a-2", "A", "2026-12-02T09:59:00Z", true), "someone-else"),
	).Build()
	reaper := &fakeReaper{}
	c := &Controller{Client: cl, Tracker: NewTracker(clk, window), Clock: clk, Reaper: reaper, ReapInterval: time.Minute}
	c.init()
	ctx := context.Background()
	reconcileA := func() {
		t.Helper()
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "A"}}); err != nil {
			t.Fatal(err)
		}
	}
	reconcileA()
	clk.Step(window)
	reconcileA()
	if len(reaper.calls) != 0 {
		t.Fatalf("reaped while a Lease of the consumer is taken over: %v", reaper.calls)
	}
	if live, ok := c.live["A"]; !ok || live {
		t.Errorf("verdict %v (%v), want stale: the Lease A holds is stale", live, ok)
	}
	if got := c.takenOverCounts(); got["A"] != 1 {
		t.Errorf("taken-over counts %v, want A: 1", got)
	}

	// Resolved (the admin deleted it): reaping goes on.
	if err := cl.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "a-2"}}); err != nil {
		t.Fatal(err)
	}
	c.forgetTakenOver("kbind/a-2") // what the delete event does
	reconcileA()
	if len(reaper.calls) != 1 || !reaper.stale[0] {
		t.Fatalf("reaper calls %v (still stale %v), want one", reaper.calls, reaper.stale)
	}

	// Taken over while reaping: the pass is told to stop.
	a1 := &coordinationv1.Lease{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: "a-1"}, a1); err != nil {
		t.Fatal(err)
	}
	a1.Spec.HolderIdentity = ptr.To("someone-else")
	if err := cl.Update(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if c.stillStale(ctx, "A") {
		t.Error("stillStale with the consumer's only Lease taken over: reaping would go on")
	}
}

func TestLeaseInfo(t *testing.T) {
	long := strings.Repeat("v", 100)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        LeaseInfo
	}{
		{"written by the konnector", map[string]string{kbindv1alpha1.KonnectorVersionAnnotation: "0.4.0", kbindv1alpha1.APIVersionAnnotation: "core.kbind.io/v1alpha1"},
			LeaseInfo{Namespace: "kbind", Name: "l", Consumer: "A", KonnectorVersion: "0.4.0", APIVersion: "core.kbind.io/v1alpha1"}},
		{"an older konnector wrote none", nil, LeaseInfo{Namespace: "kbind", Name: "l", Consumer: "A", KonnectorVersion: "unknown", APIVersion: "unknown"}},
		{"a consumer's overlong or broken value is bounded", map[string]string{kbindv1alpha1.KonnectorVersionAnnotation: long, kbindv1alpha1.APIVersionAnnotation: "v\xff1"},
			LeaseInfo{Namespace: "kbind", Name: "l", Consumer: "A", KonnectorVersion: long[:maxInfoLabel], APIVersion: "v\uFFFD1"}},
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "l", Annotations: tc.annotations}}
		if got := InfoOf(l, "A"); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestConsumerInfoFollowsLeases: one info per attributable Lease, updated
// when its konnector writes another version, gone with the Lease.
func TestConsumerInfoFollowsLeases(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	a1 := testLease("a-1", "A", "2026-12-02T10:00:00Z", true)
	a1.Annotations[kbindv1alpha1.KonnectorVersionAnnotation] = "0.3.0"
	a2 := testLease("a-2", "A", "2026-12-02T10:00:00Z", true)
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a1, a2).Build()
	c := &Controller{Client: cl, Tracker: NewTracker(clk, time.Minute), Clock: clk}
	c.init()
	ctx := context.Background()
	reconcileA := func() {
		t.Helper()
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "A"}}); err != nil {
			t.Fatal(err)
		}
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, i := range c.leaseInfos() {
			out[i.Name] = i.KonnectorVersion
		}
		return out
	}
	reconcileA()
	if got := versions(); !reflect.DeepEqual(got, map[string]string{"a-1": "0.3.0", "a-2": "unknown"}) {
		t.Errorf("infos %v", got)
	}
	a1.Annotations[kbindv1alpha1.KonnectorVersionAnnotation] = "0.4.0"
	if err := cl.Update(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, a2); err != nil {
		t.Fatal(err)
	}
	reconcileA()
	if got := versions(); !reflect.DeepEqual(got, map[string]string{"a-1": "0.4.0"}) {
		t.Errorf("after the upgrade and a-2's deletion: %v", got)
	}
}

// TestJudgeForTheReaper: what the reaper asks the judge (issue #52) —
// LastRenewal is when the backend last saw a Lease of the consumer renew
// on its own clock (first saw it, before any renewal; now when it tracks
// none), and Unseen tells a Lease read from the API server whose
// renewTime the cache has not shown, or one it does not track.
func TestJudgeForTheReaper(t *testing.T) {
	start := time.Date(2026, 12, 7, 21, 10, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	l := testLease("a-1", "A", "2026-12-07T21:09:59Z", true)
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(l).Build()
	c := &Controller{Client: cl, Tracker: NewTracker(clk, 5*time.Second), Clock: clk}
	c.init()
	ctx := context.Background()
	if got := c.LastRenewal("A"); !got.Equal(start) {
		t.Errorf("LastRenewal before any Lease is tracked = %v, want now %v", got, start)
	}
	if !c.Unseen(l) {
		t.Error("a Lease the judge does not track must be unseen")
	}
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "A"}}); err != nil {
		t.Fatal(err)
	}
	if c.Unseen(l) {
		t.Error("the Lease as the judge saw it is not unseen")
	}
	clk.Step(30 * time.Second)
	if got := c.LastRenewal("A"); !got.Equal(start) {
		t.Errorf("LastRenewal = %v, want %v (first seen, never renewed since)", got, start)
	}
	renewed := l.DeepCopy()
	mt := metav1.NewMicroTime(start.Add(30 * time.Second))
	renewed.Spec.RenewTime = &mt
	if !c.Unseen(renewed) {
		t.Error("a renewal the cache has not shown must be unseen")
	}
	if err := cl.Update(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "A"}}); err != nil {
		t.Fatal(err)
	}
	if got := c.LastRenewal("A"); !got.Equal(start.Add(30 * time.Second)) {
		t.Errorf("LastRenewal after a renewal = %v, want %v", got, start.Add(30*time.Second))
	}
}
