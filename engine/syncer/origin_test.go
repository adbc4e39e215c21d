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
	"testing"

	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
)

// TestOriginOf: a provider object stands for the consumer object its
// markers name only when it sits where that object's copy goes. Markers
// are anyone's to copy — under Prefixed isolation every consumer reads the
// bound APIs cluster-wide — a place is not: tenant B can write only under
// its own prefix, so a copy of A's markers on B's object maps nowhere.
func TestOriginOf(t *testing.T) {
	const uid = "uid-a"
	var (
		none     = isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone})
		confined = isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"})
		prefixed = isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"})
	)
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	// markers are what kbind stamps on the copy of consumer object ns/name.
	markers := func(m isolation.Mapping, ns, name string) kbindv1alpha1.Markers {
		return m.Markers(uid, key(ns, name), "object-uid")
	}
	cases := []struct {
		name    string
		iso     isolation.Mapping
		pkey    types.NamespacedName
		markers kbindv1alpha1.Markers
		want    types.NamespacedName
		ok      bool
	}{
		{"None: the same key, whatever the markers", none, key("team-a", "w1"), kbindv1alpha1.Markers{}, key("team-a", "w1"), true},
		{"Prefixed: the copy at its place", prefixed, key("a-default", "db"), markers(prefixed, "default", "db"), key("default", "db"), true},
		{"Prefixed: A's markers on B's object in B's namespace", prefixed, key("b-forge", "db"), markers(prefixed, "default", "db"), key("", ""), false},
		{"Prefixed: A's markers in another of A's namespaces", prefixed, key("a-team-a", "db"), markers(prefixed, "default", "db"), key("", ""), false},
		{"Prefixed: A's markers under another name", prefixed, key("a-default", "db2"), markers(prefixed, "default", "db"), key("", ""), false},
		{"Prefixed: a cluster-scoped copy at its place", prefixed, key("", "a-c1"), markers(prefixed, "", "c1"), key("", "c1"), true},
		{"Prefixed: A's cluster-scoped markers on B's name", prefixed, key("", "b-c1"), markers(prefixed, "", "c1"), key("", ""), false},
		{"Prefixed: namespaced markers on a cluster-scoped object", prefixed, key("", "a-db"), markers(prefixed, "default", "db"), key("", ""), false},
		{"Namespace: the copy at its place", confined, key("tenant-a", "default.db"), markers(confined, "default", "db"), key("default", "db"), true},
		{"Namespace: A's markers in another tenant namespace", confined, key("tenant-b", "default.db"), markers(confined, "default", "db"), key("", ""), false},
		{"Namespace: cluster-scoped markers map nowhere", confined, key("tenant-a", "c1"), markers(confined, "", "c1"), key("", ""), false},
		{"another consumer cluster's copy", prefixed, key("a-default", "db"), prefixed.Markers("uid-b", key("default", "db"), "o"), key("", ""), false},
		{"no origin markers", prefixed, key("a-default", "db"), kbindv1alpha1.CopyMarkers(uid, "o"), key("", ""), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := originOf(tc.iso, uid, tc.pkey, tc.markers.Labels, tc.markers.Annotations)
			if ok != tc.ok || got != tc.want {
				t.Errorf("originOf = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
