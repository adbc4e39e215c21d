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

package routing

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus some minutes.
func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

// cb is a ClusterBinding claim without selectors.
func cb(name, connection string, created time.Time) Claim {
	return Claim{Kind: KindClusterBinding, Name: name, Connection: connection, Created: created}
}

// b is a Binding claim without an object selector.
func b(namespace, name, connection string, created time.Time) Claim {
	return Claim{Kind: KindBinding, Namespace: namespace, Name: name, Connection: connection, Created: created}
}

// withNS sets a claim's namespace selector.
func withNS(c Claim, s *metav1.LabelSelector) Claim { c.NamespaceSelector = s; return c }

// withObjects sets a claim's object selector.
func withObjects(c Claim, s *metav1.LabelSelector) Claim { c.ObjectSelector = s; return c }

// refusedBy renders Refusals as refused key -> refusing claim's name.
func refusedBy(claims []Claim) map[ClaimKey]string {
	out := map[ClaimKey]string{}
	for k, c := range Refusals(claims) {
		out[k] = c.String()
	}
	return out
}

func TestClaimString(t *testing.T) {
	if got := cb("east-dbs", "east", t0).String(); got != "ClusterBinding east-dbs" {
		t.Errorf("got %q", got)
	}
	if got := b("team-a", "dbs", "east", t0).String(); got != "Binding team-a/dbs" {
		t.Errorf("got %q", got)
	}
	want := ClaimKey{Kind: KindBinding, Namespace: "team-a", Name: "dbs"}
	if got := b("team-a", "dbs", "east", t0).Key(); got != want {
		t.Errorf("Key() = %v, want %v", got, want)
	}
}

func TestEarlier(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then Claim
	}{
		{"older first", cb("z", "east", at(0)), cb("a", "west", at(1))},
		{"same time: namespace", b("a", "z", "east", t0), b("b", "a", "west", t0)},
		{"same time and namespace: name", b("a", "x", "east", t0), b("a", "y", "west", t0)},
		{"same time: cluster-scoped before namespaced", cb("z", "east", t0), b("a", "a", "west", t0)},
		{"same time, no namespace, same name: ClusterBinding first", cb("x", "east", t0), Claim{Kind: KindBinding, Name: "x", Connection: "west", Created: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !Earlier(tc.first, tc.then) || Earlier(tc.then, tc.first) {
				t.Errorf("want %v strictly before %v", tc.first, tc.then)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	teamA := sel(req("team", in, "a"))
	teamB := sel(req("team", in, "b"))
	for _, tc := range []struct {
		name string
		a, b Claim
		want bool
	}{
		{"ClusterBindings, no selectors", cb("e", "east", t0), cb("w", "west", t0), true},
		{"ClusterBindings, same connection", cb("e", "east", t0), cb("e2", "east", t0), false},
		{"ClusterBindings, disjoint namespace selectors", withNS(cb("e", "east", t0), teamA), withNS(cb("w", "west", t0), teamB), false},
		{"ClusterBindings, disjoint object selectors", withObjects(withNS(cb("e", "east", t0), teamA), teamA), withObjects(withNS(cb("w", "west", t0), teamA), teamB), false},
		{"ClusterBindings, one namespace selector", withNS(cb("e", "east", t0), teamA), cb("w", "west", t0), true},
		{"Bindings, one namespace", b("ns", "e", "east", t0), b("ns", "w", "west", t0), true},
		{"Bindings, one namespace, same connection", b("ns", "e", "east", t0), b("ns", "w", "east", t0), false},
		{"Bindings, different namespaces", b("a", "e", "east", t0), b("b", "w", "west", t0), false},
		{"Bindings, disjoint object selectors", withObjects(b("ns", "e", "east", t0), teamA), withObjects(b("ns", "w", "west", t0), teamB), false},
		{"ClusterBinding and Binding", cb("e", "east", t0), b("ns", "w", "west", t0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overlap(tc.a, tc.b); got != tc.want {
				t.Errorf("Overlap(a, b) = %v, want %v", got, tc.want)
			}
			if got := Overlap(tc.b, tc.a); got != tc.want {
				t.Errorf("Overlap(b, a) = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	teamA := sel(req("team", in, "a"))
	teamB := sel(req("team", in, "b"))
	gold := sel(req("tier", in, "gold"))
	silver := sel(req("tier", in, "silver"))
	for _, tc := range []struct {
		name   string
		claims []Claim
		want   map[ClaimKey]string
	}{
		{
			name:   "two ClusterBindings without selectors: the later is refused",
			claims: []Claim{cb("west-dbs", "west", at(1)), cb("east-dbs", "east", at(0))},
			want:   map[ClaimKey]string{cb("west-dbs", "", t0).Key(): "ClusterBinding east-dbs"},
		},
		{
			name:   "same connection: none",
			claims: []Claim{cb("a", "east", at(0)), cb("b", "east", at(1))},
			want:   map[ClaimKey]string{},
		},
		{
			name:   "disjoint namespace selectors: none",
			claims: []Claim{withNS(cb("a", "east", at(0)), teamA), withNS(cb("b", "west", at(1)), teamB)},
			want:   map[ClaimKey]string{},
		},
		{
			name:   "same namespace selector, disjoint object selectors: none",
			claims: []Claim{withObjects(withNS(cb("a", "east", at(0)), teamA), gold), withObjects(withNS(cb("b", "west", at(1)), teamA), silver)},
			want:   map[ClaimKey]string{},
		},
		{
			name:   "Bindings in different namespaces: none",
			claims: []Claim{b("team-a", "dbs", "east", at(0)), b("team-b", "dbs", "west", at(1))},
			want:   map[ClaimKey]string{},
		},
		{
			name:   "two Bindings in one namespace through different connections: the later is refused",
			claims: []Claim{b("team-a", "late", "west", at(1)), b("team-a", "early", "east", at(0))},
			want:   map[ClaimKey]string{b("team-a", "late", "", t0).Key(): "Binding team-a/early"},
		},
		{
			name:   "ClusterBinding and Binding: none",
			claims: []Claim{cb("all", "east", at(0)), b("team-a", "dbs", "west", at(1))},
			want:   map[ClaimKey]string{},
		},
		{
			name: "a refused claim blocks nothing",
			claims: []Claim{
				withObjects(cb("first", "east", at(0)), gold),
				cb("middle", "west", at(1)),
				withObjects(cb("third", "north", at(2)), silver),
			},
			want: map[ClaimKey]string{cb("middle", "", t0).Key(): "ClusterBinding first"},
		},
		{
			name:   "equal timestamps: Binding name decides",
			claims: []Claim{b("team-a", "x", "west", t0), b("team-a", "y", "east", t0)},
			want:   map[ClaimKey]string{b("team-a", "y", "", t0).Key(): "Binding team-a/x"},
		},
		{
			name:   "equal timestamps: ClusterBinding name decides",
			claims: []Claim{cb("b", "west", t0), cb("a", "east", t0)},
			want:   map[ClaimKey]string{cb("b", "", t0).Key(): "ClusterBinding a"},
		},
		{
			name: "refused by the earliest overlapping accepted claim",
			claims: []Claim{
				withNS(cb("a", "east", at(0)), teamA),
				withNS(cb("b", "west", at(1)), teamB),
				cb("c", "north", at(2)),
			},
			want: map[ClaimKey]string{cb("c", "", t0).Key(): "ClusterBinding a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusedBy(tc.claims); !maps.Equal(got, tc.want) {
				t.Errorf("Refusals = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRefusalsOrderIndependent: every permutation of the input gives the
// same refusals.
func TestRefusalsOrderIndependent(t *testing.T) {
	gold := sel(req("tier", in, "gold"))
	claims := []Claim{
		withObjects(cb("first", "east", at(0)), gold),
		cb("middle", "west", at(1)),
		cb("third", "north", at(1)),
		b("team-a", "x", "east", at(0)),
		b("team-a", "y", "west", at(0)),
		b("team-b", "z", "west", at(2)),
	}
	want := refusedBy(claims)
	if len(want) != 3 {
		t.Fatalf("want 3 refusals in the reference order, got %v", want)
	}
	permute(claims, 0, func(p []Claim) {
		if got := refusedBy(p); !maps.Equal(got, want) {
			t.Fatalf("order %v: Refusals = %v, want %v", p, got, want)
		}
	})
}

// permute calls f with every permutation of c[i:] (c[:i] fixed), in place.
func permute(c []Claim, i int, f func([]Claim)) {
	if i == len(c) {
		f(c)
		return
	}
	for j := i; j < len(c); j++ {
		c[i], c[j] = c[j], c[i]
		permute(c, i+1, f)
		c[i], c[j] = c[j], c[i]
	}
}
