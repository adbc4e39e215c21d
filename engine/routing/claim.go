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
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is the kind of binding a claim comes from.
type Kind string

// The binding kinds.
const (
	// KindClusterBinding is a cluster-scoped ClusterBinding.
	KindClusterBinding Kind = "ClusterBinding"
	// KindBinding is a namespaced Binding.
	KindBinding Kind = "Binding"
)

// Claim is one binding's API entry for the consumer API being routed: which
// binding, through which Connection, since when, and which consumer objects
// it selects.
type Claim struct {
	Kind       Kind
	Namespace  string // Bindings only
	Name       string
	Connection string
	Created    time.Time
	// NamespaceSelector selects the namespaces a ClusterBinding covers;
	// nil means every namespace. Bindings leave it nil.
	NamespaceSelector *metav1.LabelSelector
	// ObjectSelector is the API entry's object selector; nil means every
	// object.
	ObjectSelector *metav1.LabelSelector
}

// ClaimKey identifies the binding a claim comes from.
type ClaimKey struct {
	Kind      Kind
	Namespace string
	Name      string
}

// Key returns the key of the binding the claim comes from.
func (c Claim) Key() ClaimKey {
	return ClaimKey{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

// String names the binding: "ClusterBinding east-dbs" or
// "Binding team-a/dbs".
func (c Claim) String() string {
	if c.Kind == KindBinding {
		return string(c.Kind) + " " + c.Namespace + "/" + c.Name
	}
	return string(c.Kind) + " " + c.Name
}

// Overlap reports whether a and b could both claim one consumer object.
// Only claims through different Connections overlap: one Connection's
// bindings make one provider copy, and precedence orders them elsewhere.
//   - Two ClusterBindings overlap unless their namespace selectors or their
//     object selectors are Disjoint.
//   - Two Bindings overlap when they are in the same namespace and their
//     object selectors are not Disjoint.
//   - A ClusterBinding and a Binding never overlap: a ClusterBinding
//     covering a namespace takes precedence over a Binding there, a rule
//     handled elsewhere.
func Overlap(a, b Claim) bool {
	if a.Connection == b.Connection || a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KindClusterBinding:
		return !Disjoint(a.NamespaceSelector, b.NamespaceSelector) &&
			!Disjoint(a.ObjectSelector, b.ObjectSelector)
	case KindBinding:
		return a.Namespace == b.Namespace && !Disjoint(a.ObjectSelector, b.ObjectSelector)
	}
	return false
}

// Earlier reports whether a comes before b: earlier Created first, then
// Namespace, then Name lexically, then a ClusterBinding before a Binding,
// then Connection, so that claims of distinct bindings are totally ordered.
func Earlier(a, b Claim) bool {
	return compare(a, b) < 0
}

// compare orders claims as Earlier does.
func compare(a, b Claim) int {
	return cmp.Or(
		a.Created.Compare(b.Created),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)),
		cmp.Compare(a.Connection, b.Connection),
	)
}

// kindRank puts ClusterBindings before Bindings.
func kindRank(k Kind) int {
	if k == KindClusterBinding {
		return 0
	}
	return 1
}

// Refusals returns, for each refused claim's key, the claim that refuses
// it. Claims are walked from the Earliest; a claim is refused by the
// earliest earlier claim it overlaps that is not itself refused, so a
// refused claim never blocks a later one. The result does not depend on
// the order of claims. Claims are expected to come from distinct bindings
// (distinct keys).
func Refusals(claims []Claim) map[ClaimKey]Claim {
	ordered := slices.Clone(claims)
	slices.SortFunc(ordered, compare)
	refused := map[ClaimKey]Claim{}
	var accepted []Claim
	for _, c := range ordered {
		if by, ok := firstOverlap(accepted, c); ok {
			refused[c.Key()] = by
			continue
		}
		accepted = append(accepted, c)
	}
	return refused
}

// firstOverlap returns the first of accepted that overlaps c.
func firstOverlap(accepted []Claim, c Claim) (Claim, bool) {
	for _, a := range accepted {
		if Overlap(a, c) {
			return a, true
		}
	}
	return Claim{}, false
}
