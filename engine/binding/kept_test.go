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

package binding

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/syncer"
)

func TestKeptCandidates(t *testing.T) {
	bound := []kbindv1alpha1.BoundAPI{{Name: "a.x.io"}, {Name: "p.x.io", ProviderAPI: "dbs.y.io"}}
	before := &kbindv1alpha1.BindingStatus{
		BoundAPIs:  []kbindv1alpha1.BoundAPI{{Name: "a.x.io"}, {Name: "gone.x.io", ProviderAPI: "g.y.io"}, {Name: "kept.x.io"}},
		KeptCopies: []kbindv1alpha1.KeptCopies{{Name: "kept.x.io", Count: 2}, {Name: "old.x.io", Count: 1}},
	}
	listed := []string{"a.x.io", "p.x.io"}
	cases := []struct {
		name      string
		protected bool
		want      string
	}{
		{"protected: the bound APIs, those that left spec.apis (the one just drained has no entry yet), those with an entry", true,
			"[{a.x.io  true false} {gone.x.io g.y.io false true} {kept.x.io  false false} {old.x.io  false false} {p.x.io dbs.y.io true false}]"},
		{"unprotected: only those with an entry (turning protection off deletes no kept copy)", false,
			"[{kept.x.io  false false} {old.x.io  false false}]"},
	}
	for _, tc := range cases {
		if got := fmt.Sprint(keptCandidates(tc.protected, listed, bound, before)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestMergeKept(t *testing.T) {
	boom := errors.New("boom")
	before := []kbindv1alpha1.KeptCopies{{Name: "b.x.io", Count: 4, Namespaces: []string{"n"}}, {Name: "c.x.io", Count: 1}}
	cases := []struct {
		name    string
		results []keptResult
		want    string
		failed  int
		lost    bool
	}{
		{"counts above 0 are the entries, sorted; 0 drops an entry", []keptResult{
			{keptCandidate: keptCandidate{Name: "c.x.io"}},
			{keptCandidate: keptCandidate{Name: "b.x.io", Listed: true}, Count: syncer.KeptCount{Count: 5, Namespaces: []string{"m", "n"}}},
			{keptCandidate: keptCandidate{Name: "a.x.io", ProviderAPI: "p.y.io"}, Count: syncer.KeptCount{Count: 1}},
		}, "[{a.x.io p.y.io 1 []} {b.x.io  5 [m n]}]", 0, false},
		{"a failed count keeps the last entry, never 0, and is reported", []keptResult{
			{keptCandidate: keptCandidate{Name: "b.x.io"}, Err: boom},
			{keptCandidate: keptCandidate{Name: "c.x.io"}, Count: syncer.KeptCount{Count: 1}},
		}, "[{b.x.io  4 [n]} {c.x.io  1 []}]", 1, false},
		{"a failed count without an entry: nothing shown, reported", []keptResult{
			{keptCandidate: keptCandidate{Name: "d.x.io", Listed: true}, Err: boom},
		}, "[]", 1, false},
		{"not readable yet (a CRD not established), nothing known: nothing shown, nothing reported", []keptResult{
			{keptCandidate: keptCandidate{Name: "d.x.io", Listed: true}, Err: fmt.Errorf("x: %w", syncer.ErrKeptNotReadable)},
		}, "[]", 0, false},
		{"not readable, with an entry: the last count, reported", []keptResult{
			{keptCandidate: keptCandidate{Name: "c.x.io"}, Err: fmt.Errorf("x: %w", syncer.ErrKeptNotReadable)},
		}, "[{c.x.io  1 []}]", 1, false},
		{"a failed count of an API that just left status.boundAPIs: the reconcile fails (nothing else remembers it)", []keptResult{
			{keptCandidate: keptCandidate{Name: "d.x.io", DroppedNow: true}, Err: boom},
		}, "[]", 1, true},
	}
	for _, tc := range cases {
		o := mergeKept(tc.results, before)
		if got := fmt.Sprint(o.Entries); got != tc.want || len(o.Failed) != tc.failed || (o.Lost != nil) != tc.lost {
			t.Errorf("%s: %s, failed %v, lost %v; want %s, %d failed, lost %t", tc.name, got, o.Failed, o.Lost, tc.want, tc.failed, tc.lost)
		}
	}
}

func TestKeptMessage(t *testing.T) {
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	nb := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"}}
	if got := keptCommand(cb); got != "kubectl kbind kept clusterbinding/db" {
		t.Errorf("ClusterBinding: %q", got)
	}
	if got := keptCommand(nb); got != "kubectl kbind kept binding/db -n team" {
		t.Errorf("Binding: %q", got)
	}
	ten := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	cases := []struct {
		name    string
		o       keptOutcome
		want    []string
		notWant []string
	}{
		{"deselected and removed, with where and how to delete", keptOutcome{
			Entries: []kbindv1alpha1.KeptCopies{{Name: "a.x.io", Count: 2, Namespaces: []string{"p", "q"}}, {Name: "b.x.io", ProviderAPI: "dbs.y.io", Count: 1}},
			Listed:  map[string]bool{"a.x.io": true},
		}, []string{
			"3 provider cop(ies) kept by spec.deletionProtection instead of deleted, no longer synced",
			"2 of a.x.io in p, q: objects no longer selected",
			"1 of b.x.io (the provider's dbs.y.io): the API was removed from spec.apis (its consumer CRD and objects stay)",
			"kubectl kbind kept clusterbinding/db --delete (without --delete it lists them)",
			"select their objects again",
		}, []string{"possibly more", "count failed"}},
		{"ten namespaces of more copies: possibly more", keptOutcome{
			Entries: []kbindv1alpha1.KeptCopies{{Name: "a.x.io", Count: 11, Namespaces: ten}}, Listed: map[string]bool{"a.x.io": true},
		}, []string{"in n0, n1", "n9 and possibly more namespaces"}, nil},
		{"a failed count: the last count, and why", keptOutcome{
			Entries: []kbindv1alpha1.KeptCopies{{Name: "a.x.io", Count: 1}}, Failed: []string{"a.x.io: boom"},
		}, []string{"1 of a.x.io: the API was removed", "the last count is shown where a count failed: a.x.io: boom"}, nil},
	}
	for _, tc := range cases {
		msg := keptMessage(keptCommand(cb), tc.o)
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(msg, w) {
				t.Errorf("%s: %q says %q", tc.name, msg, w)
			}
		}
	}
}

// The Event goes when the total grows, over the status the reconcile
// read and over the last total this process wrote (the cache may lag).
func TestKeptGrew(t *testing.T) {
	k := func(n ...int32) []kbindv1alpha1.KeptCopies {
		var out []kbindv1alpha1.KeptCopies
		for i, c := range n {
			out = append(out, kbindv1alpha1.KeptCopies{Name: fmt.Sprintf("a%d.x.io", i), Count: c})
		}
		return out
	}
	cases := []struct {
		name        string
		before, now []kbindv1alpha1.KeptCopies
		known       int64
		want        bool
	}{
		{"first copies kept", nil, k(1), -1, true},
		{"grew in another API", k(2), k(2, 1), 2, true},
		{"unchanged (a resync)", k(2, 1), k(2, 1), 3, false},
		{"fewer", k(3), k(2), 3, false},
		{"a stale status: the total written already", nil, k(3), 3, false},
		{"grew again after shrinking", k(2), k(3), 2, true},
	}
	for _, tc := range cases {
		if got := keptGrew(tc.before, tc.now, tc.known); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}
