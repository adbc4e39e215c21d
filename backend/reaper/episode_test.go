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

package reaper

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestSigns(t *testing.T) {
	widgets := Resource{GVR: schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}, Phase: PhaseCopies}
	obj := func(uid, mark string, terminating bool) Object {
		return Object{Resource: widgets, Namespace: "team-a", Name: uid, UID: types.UID(uid), MarkedAt: mark, Terminating: terminating}
	}
	seen := func(uid string, marked, terminating bool) Seen {
		return Seen{Key: obj(uid, "", false).String(), Marked: marked, Terminating: terminating}
	}
	const mark = "2026-12-07T21:09:19Z"
	for _, tc := range []struct {
		name    string
		prev    map[types.UID]Seen
		listed  []Object
		deleted map[types.UID]bool
		want    string // a fragment of the sign; "" for none
	}{
		{"the episode's first pass has nothing to compare with", nil, []Object{obj("db", "", false)}, nil, ""},
		{"nothing changed", map[types.UID]Seen{"db": seen("db", true, false)}, []Object{obj("db", mark, false)}, nil, ""},
		{"a mark cleared", map[types.UID]Seen{"db": seen("db", true, false)}, []Object{obj("db", "", false)}, nil, "the mark of widgets.example.org team-a/db cleared"},
		{"never marked (the mark was refused), still unmarked", map[types.UID]Seen{"db": seen("db", false, false)}, []Object{obj("db", "", false)}, nil, ""},
		{"a copy gone, not deleted by the reaper", map[types.UID]Seen{"db": seen("db", true, false), "orphan": seen("orphan", true, false)},
			[]Object{obj("orphan", mark, false)}, nil, "widgets.example.org team-a/db deleted by someone else"},
		{"a copy the reaper deleted, gone", map[types.UID]Seen{"db": seen("db", true, false)}, nil, map[types.UID]bool{"db": true}, ""},
		{"a copy being deleted by someone else", map[types.UID]Seen{"db": seen("db", true, false)}, []Object{obj("db", mark, true)}, nil, "deleted by someone else"},
		{"a copy already terminating, gone", map[types.UID]Seen{"db": seen("db", true, true)}, nil, nil, ""},
		{"a new copy", map[types.UID]Seen{}, []Object{obj("db", "", false)}, nil, "a new copy widgets.example.org team-a/db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Signs(tc.prev, tc.listed, tc.deleted)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Signs = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQuiet(t *testing.T) {
	now := time.Date(2026, 12, 7, 21, 10, 36, 0, time.UTC)
	grace := 15 * time.Second
	for _, tc := range []struct {
		name string
		sign time.Time
		want bool
	}{
		{"no sign ever", time.Time{}, true},
		{"a sign 5 s ago", now.Add(-5 * time.Second), false},
		{"a sign just under the grace ago", now.Add(-grace + time.Millisecond), false},
		{"a sign a grace ago", now.Add(-grace), true},
	} {
		if got := Quiet(tc.sign, now, grace); got != tc.want {
			t.Errorf("%s: Quiet = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// judge is a Judge whose Unseen says what unseen says.
type judge struct {
	last   time.Time
	unseen bool
}

func (j judge) LastRenewal(string) time.Time      { return j.last }
func (j judge) Unseen(*coordinationv1.Lease) bool { return j.unseen }

// scriptedLeases lists consumer A's Lease kbind/a-1 with the renewTime of
// the call (the last one for later calls), or fails the calls in fail.
type scriptedLeases struct {
	mu     sync.Mutex
	calls  int
	renews []time.Time
	fail   map[int]error
}

func (s *scriptedLeases) List(context.Context, metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.calls
	s.calls++
	if err := s.fail[n]; err != nil {
		return nil, err
	}
	renewed := metav1.NewMicroTime(s.renews[min(n, len(s.renews)-1)])
	holder := "A"
	l := meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A")
	return &coordinationv1.LeaseList{Items: []coordinationv1.Lease{{ObjectMeta: l.ObjectMeta,
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed}}}}, nil
}

// TestPassReadsTheLeasesBeforeDeleting: before a pass deletes anything —
// copies, then namespaces and Leases — it reads the consumer's Leases from
// the API server (never the cache). A read that fails, a renewal since the
// pass began, or one the judge's cache has not shown yet deletes nothing.
func TestPassReadsTheLeasesBeforeDeleting(t *testing.T) {
	objUID := "core.kbind.io/consumer-object-uid"
	t0 := time.Date(2026, 12, 7, 21, 10, 31, 0, time.UTC)
	world := func(withCopy bool) []runtime.Object {
		objs := []runtime.Object{
			meta("v1", "Namespace", "", "team-a", "A"),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}
		if withCopy {
			objs = append(objs, meta("example.org/v1alpha1", "Widget", "team-a", "a-w1", "A", objUID, "o1"))
		}
		return objs
	}
	unavailable := apierrors.NewServiceUnavailable("the API server is overloaded")
	for _, tc := range []struct {
		name     string
		withCopy bool
		leases   *scriptedLeases
		judge    Judge
		want     Verdict
	}{
		{"the Leases cannot be read when the pass begins", true, &scriptedLeases{renews: []time.Time{t0}, fail: map[int]error{0: unavailable}}, nil, Waiting},
		{"the Leases cannot be read before the copies go", true, &scriptedLeases{renews: []time.Time{t0}, fail: map[int]error{1: unavailable}}, nil, Waiting},
		{"the Leases cannot be read before the namespaces and Leases go", false, &scriptedLeases{renews: []time.Time{t0}, fail: map[int]error{1: unavailable}}, nil, Waiting},
		{"renewed since the pass began, before the copies go", true, &scriptedLeases{renews: []time.Time{t0, t0.Add(time.Second)}}, nil, Stopped},
		{"renewed since the pass began, before the namespaces and Leases go", false, &scriptedLeases{renews: []time.Time{t0, t0.Add(time.Second)}}, nil, Stopped},
		{"a renewal the judge's cache has not shown yet", true, &scriptedLeases{renews: []time.Time{t0}}, judge{unseen: true}, Stopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := metadatafake.NewTestScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := metadatafake.NewSimpleMetadataClient(scheme, world(tc.withCopy)...)
			r := &Reaper{Metadata: c, Leases: tc.leases, Discovery: fakeDiscovery(), Judge: tc.judge}
			v, err := r.Pass(context.Background(), "A", func() bool { return true })
			if err != nil || v != tc.want {
				t.Fatalf("verdict %v (%v), want %v", v, err, tc.want)
			}
			for _, o := range []struct {
				gvr      schema.GroupVersionResource
				ns, name string
			}{
				{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "team-a"},
				{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "kbind", "a-1"},
				{schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}, "team-a", "a-w1"},
			} {
				if o.name == "a-w1" && !tc.withCopy {
					continue
				}
				var err error
				if o.ns == "" {
					_, err = c.Resource(o.gvr).Get(context.Background(), o.name, metav1.GetOptions{})
				} else {
					_, err = c.Resource(o.gvr).Namespace(o.ns).Get(context.Background(), o.name, metav1.GetOptions{})
				}
				if err != nil {
					t.Errorf("%s %s/%s: %v (deleted without a fresh read of the Leases that shows the consumer stale)", o.gvr.Resource, o.ns, o.name, err)
				}
			}
		})
	}
	// The same passes delete when every read succeeds and shows nothing new.
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := metadatafake.NewSimpleMetadataClient(scheme, world(true)...)
	r := &Reaper{Metadata: c, Leases: &scriptedLeases{renews: []time.Time{t0}}, Discovery: fakeDiscovery(), Judge: judge{}}
	if v, err := r.Pass(context.Background(), "A", func() bool { return true }); err != nil || v != Done {
		t.Fatalf("every read succeeds: %v (%v), want done", v, err)
	}
}

// TestPassWaitsAGraceAfterASign: a copy deleted by someone else between
// two passes (a live konnector deleting a copy whose object was deleted)
// keeps everything of the consumer for a grace period, on the backend's
// clock — the copy left with a mark long past the grace, the namespace and
// the Lease.
func TestPassWaitsAGraceAfterASign(t *testing.T) {
	objUID := "core.kbind.io/consumer-object-uid"
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	fresh := MarkValue(time.Now())
	c := metadatafake.NewSimpleMetadataClient(scheme,
		meta("v1", "Namespace", "", "team-a", "A"),
		meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		meta("example.org/v1alpha1", "Widget", "team-a", "orphan", "A", objUID, "o1"),
		meta("example.org/v1alpha1", "Widget", "team-a", "db", "A", objUID, "o2", "core.kbind.io/reap-marked-at", fresh),
	)
	clk := &fakeClock{now: time.Now()}
	r := &Reaper{Metadata: c, Leases: leasesOf{md: c}, Discovery: fakeDiscovery(), Clock: clk, Grace: time.Minute}
	ctx := context.Background()
	stale := func() bool { return true }
	if v, err := r.Pass(ctx, "A", stale); err != nil || v != Waiting {
		t.Fatalf("first pass (db's mark young): %v %v, want waiting", v, err)
	}
	widgets := schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}
	if err := c.Resource(widgets).Namespace("team-a").Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(time.Second)
	if v, err := r.Pass(ctx, "A", stale); err != nil || v != Waiting {
		t.Fatalf("db deleted by someone else: %v %v, want waiting", v, err)
	}
	if _, err := c.Resource(widgets).Namespace("team-a").Get(ctx, "orphan", metav1.GetOptions{}); err != nil {
		t.Fatalf("the orphan copy went right after a sign of a live konnector: %v", err)
	}
	clk.now = clk.now.Add(time.Minute)
	if v, err := r.Pass(ctx, "A", stale); err != nil || v != Done {
		t.Fatalf("a quiet grace later: %v %v, want done", v, err)
	}
}

type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time                  { return f.now }
func (f *fakeClock) Since(t time.Time) time.Duration { return f.now.Sub(t) }
