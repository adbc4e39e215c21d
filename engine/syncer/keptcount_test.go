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

package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// keptObject is a provider copy in namespace ns with kbind's markers of
// consumer cluster uid (label and annotation), kept by keptBy.
func keptObject(ns, uid, labelUID, keptBy, kept string) metav1.Object {
	o := &metav1.PartialObjectMetadata{}
	o.SetNamespace(ns)
	o.SetLabels(map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: labelUID, kbindv1alpha1.KeptLabel: kept})
	o.SetAnnotations(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: uid, kbindv1alpha1.KeptByAnnotation: keptBy})
	return o
}

func TestTallyKept(t *testing.T) {
	const by, uid = "ClusterBinding/db", "uid-1"
	dp := kbindv1alpha1.KeptDeletionProtection
	many := make([]metav1.Object, 0, 12)
	for i := range 12 {
		many = append(many, keptObject(fmt.Sprintf("ns-%02d", i), uid, uid, by, dp))
	}
	cases := []struct {
		name  string
		objs  []metav1.Object
		count int32
		ns    []string
	}{
		{"none", nil, 0, nil},
		{"this binding's kept copies, namespaces sorted and once", []metav1.Object{
			keptObject("b", uid, uid, by, dp), keptObject("a", uid, uid, by, dp), keptObject("b", uid, uid, by, dp)}, 3, []string{"a", "b"}},
		{"cluster-scoped copies name no namespace", []metav1.Object{keptObject("", uid, uid, by, dp)}, 1, nil},
		{"another binding's copies are not counted", []metav1.Object{
			keptObject("a", uid, uid, "ClusterBinding/other", dp), keptObject("a", uid, uid, "Binding/team/db", dp)}, 0, nil},
		{"another consumer cluster's copies are not counted (annotation)", []metav1.Object{keptObject("a", "uid-2", uid, by, dp)}, 0, nil},
		{"another consumer cluster's copies are not counted (label)", []metav1.Object{keptObject("a", uid, "uid-2", by, dp)}, 0, nil},
		{"an Orphan release's copies are not counted", []metav1.Object{keptObject("a", uid, uid, by, kbindv1alpha1.KeptOrphan)}, 0, nil},
		{"at most ten namespaces, the first ones", many, 12, []string{"ns-00", "ns-01", "ns-02", "ns-03", "ns-04", "ns-05", "ns-06", "ns-07", "ns-08", "ns-09"}},
	}
	for _, tc := range cases {
		got := tallyKept(tc.objs, uid, by)
		if got.Count != tc.count || !slices.Equal(got.Namespaces, tc.ns) {
			t.Errorf("%s: %+v, want %d in %v", tc.name, got, tc.count, tc.ns)
		}
	}
	if got := tallyKept([]metav1.Object{keptObject("a", "", "", by, dp)}, "", by); got.Count != 0 {
		t.Errorf("no consumer cluster UID known: %+v, want nothing counted", got)
	}
}

// The counter reads the cache while a Syncer runs, and otherwise LISTs
// at most once per interval per route and binding, answering the last
// outcome (a failure included) in between.
func TestKeptCounterListsOncePerInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	running, lists := false, 0
	var fail error
	k := &KeptCounter{
		now: func() time.Time { return now },
		cached: func(context.Context, Route, string) (KeptCount, bool, error) {
			return KeptCount{Count: 7}, running, nil
		},
		listed: func(context.Context, Route, string) (KeptCount, error) {
			lists++
			if fail != nil {
				return KeptCount{}, fail
			}
			return KeptCount{Count: int32(lists)}, nil
		},
	}
	ctx := context.Background()
	count := func(by string) (int32, error) {
		c, err := k.KeptCopies(ctx, "widgets.example.org", "conn", by, time.Minute)
		return c.Count, err
	}
	steps := []struct {
		name    string
		advance time.Duration
		running bool
		fail    error
		by      string
		want    int32
		wantErr bool
		lists   int
	}{
		{"first count: one LIST", 0, false, nil, "ClusterBinding/a", 1, false, 1},
		{"within the interval: the last LIST's count", 30 * time.Second, false, nil, "ClusterBinding/a", 1, false, 1},
		{"another binding: its own LIST", 0, false, nil, "ClusterBinding/b", 2, false, 2},
		{"a Syncer runs: the cache, no LIST", 0, true, nil, "ClusterBinding/a", 7, false, 2},
		{"the interval over: a LIST", 31 * time.Second, false, nil, "ClusterBinding/a", 3, false, 3},
		{"the interval over, the LIST fails: the error", time.Minute, false, errors.New("boom"), "ClusterBinding/a", 0, true, 4},
		{"within the interval: the failure again, no LIST", time.Second, false, nil, "ClusterBinding/a", 0, true, 4},
		{"the interval over: a LIST again", time.Minute, false, nil, "ClusterBinding/a", 5, false, 5},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		running, fail = st.running, st.fail
		got, err := count(st.by)
		if (err != nil) != st.wantErr || (err == nil && got != st.want) || lists != st.lists {
			t.Fatalf("%s: count %d, error %v, %d LIST(s); want %d, error %t, %d LIST(s)", st.name, got, err, lists, st.want, st.wantErr, st.lists)
		}
	}
	k.ForgetKept("ClusterBinding/a")
	if _, err := count("ClusterBinding/a"); err != nil || lists != 6 {
		t.Fatalf("after ForgetKept: %v, %d LIST(s); want a LIST", err, lists)
	}
}
