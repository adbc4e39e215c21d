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

package isolation

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

var (
	none       = For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone})
	confined   = For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"})
	withPrefix = For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"})
)

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func TestObject(t *testing.T) {
	long63 := strings.Repeat("n", 63)
	long253 := strings.Repeat("x", 253)
	cases := []struct {
		name    string
		m       Mapping
		in      types.NamespacedName
		want    types.NamespacedName
		wantErr error
	}{
		{"None keeps namespace and name", none, key("team-a", "w1"), key("team-a", "w1"), nil},
		{"None keeps cluster-scoped names", none, key("", "c1"), key("", "c1"), nil},
		{"zero Mapping is None", Mapping{}, key("default", "db"), key("default", "db"), nil},
		{"Namespace joins with a dot", confined, key("team-a", "w1"), key("tenant-a", "team-a.w1"), nil},
		{"Namespace: a-b/c", confined, key("a-b", "c"), key("tenant-a", "a-b.c"), nil},
		{"Namespace: a/b-c", confined, key("a", "b-c"), key("tenant-a", "a.b-c"), nil},
		{"Namespace: dotted name", confined, key("a", "b.c"), key("tenant-a", "a.b.c"), nil},
		{"Namespace refuses cluster-scoped", confined, key("", "c1"), types.NamespacedName{}, ErrClusterScoped},
		{"Prefixed namespace", withPrefix, key("team-a", "w1"), key("a-team-a", "w1"), nil},
		{"Prefixed cluster-scoped name", withPrefix, key("", "c1"), key("", "a-c1"), nil},
		{"Prefixed keeps long names", withPrefix, key("default", long253), key("a-default", long253), nil},
		{"Prefixed hashes a long namespace", withPrefix, key(long63, "w1"), key("a--"+strings.Repeat("n", 43)+"-"+hashOf(long63), "w1"), nil},
		{"Namespace hashes a long name", confined, key("team-a", long253), key("tenant-a", "team-a-"+strings.Repeat("x", 229)+"-"+hashOf("team-a/"+long253)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.m.Object(tc.in)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("Object(%v) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.wantErr)
			}
			if err == nil {
				assertValid(t, got)
			}
		})
	}
}

func hashOf(s string) string { return hashed("", s, hashLen+1) }

func TestLeaseNamespace(t *testing.T) {
	cases := []struct {
		m       Mapping
		context string
		want    string
	}{
		{none, "", "kbind"},
		{none, "ops", "ops"},
		{confined, "ops", "tenant-a"},
		{withPrefix, "ops", "a"},
	}
	for _, tc := range cases {
		if got := tc.m.LeaseNamespace(tc.context); got != tc.want {
			t.Errorf("%s LeaseNamespace(%q) = %q, want %q", tc.m, tc.context, got, tc.want)
		}
	}
	// The bare prefix is never the mapping of a consumer namespace.
	for _, ns := range []string{"", "a", "default"} {
		if ns != "" && withPrefix.Namespace(ns) == "a" {
			t.Errorf("consumer namespace %q maps onto the Lease namespace", ns)
		}
	}
}

// TestHashedNeverReadable: the hashed form of a too-long key cannot be the
// readable form of another (the ambiguity a plain "-" join would have).
func TestHashedNeverReadable(t *testing.T) {
	long := strings.Repeat("y", 250)
	hashedKey, _ := confined.Object(key("team-a", long))
	if strings.Contains(hashedKey.Name, ".") {
		t.Fatalf("hashed Namespace-mode name %q contains a dot", hashedKey.Name)
	}
	ns := strings.Repeat("z", 62)
	p := withPrefix.Namespace(ns)
	if !strings.HasPrefix(p, "a--") {
		t.Fatalf("hashed Prefixed namespace %q does not start with the prefix and --", p)
	}
}

func TestOriginRoundTrip(t *testing.T) {
	for _, m := range []Mapping{confined, withPrefix} {
		for _, k := range []types.NamespacedName{key("team-a", "w1"), key("default", strings.Repeat("d", 253))} {
			got, ok := Origin(m.Markers("uid", k, "obj").Annotations)
			if !ok || got != k {
				t.Errorf("%s: Origin of %v = %v, %v", m, k, got, ok)
			}
		}
	}
	if _, ok := Origin(none.Markers("uid", key("a", "b"), "obj").Annotations); ok {
		t.Error("None copies carry no origin: they keep their consumer name")
	}
}

func assertValid(t testing.TB, k types.NamespacedName) {
	t.Helper()
	if k.Namespace != "" {
		if errs := validation.IsDNS1123Label(k.Namespace); len(errs) > 0 {
			t.Fatalf("provider namespace %q is invalid: %v", k.Namespace, errs)
		}
	}
	if errs := validation.IsDNS1123Subdomain(k.Name); len(errs) > 0 {
		t.Fatalf("provider name %q is invalid: %v", k.Name, errs)
	}
}

// TestPrefixLabel: under Prefixed isolation, and only then, what kbind
// writes outside any consumer namespace's mapping — a cluster-scoped copy,
// a provider namespace, the Lease namespace — carries core.kbind.io/prefix
// with the prefix, so that an admission policy can confine each consumer
// to what carries its own prefix (prefixes "a" and "a-b" extend each
// other; a label value does not).
func TestPrefixLabel(t *testing.T) {
	cases := []struct {
		name    string
		markers kbindv1alpha1.Markers
		want    string // "" when the label must be absent
	}{
		{"Prefixed cluster-scoped copy", withPrefix.Markers("uid", key("", "c1"), "obj"), "a"},
		{"Prefixed namespaced copy: its namespace carries it", withPrefix.Markers("uid", key("team-a", "w1"), "obj"), ""},
		{"Prefixed namespace", withPrefix.NamespaceMarkers("uid", "team-a"), "a"},
		{"Prefixed Lease namespace", withPrefix.LeaseNamespaceMarkers("uid"), "a"},
		{"None cluster-scoped copy", none.Markers("uid", key("", "c1"), "obj"), ""},
		{"None namespace", none.NamespaceMarkers("uid", "team-a"), ""},
		{"None Lease namespace", none.LeaseNamespaceMarkers("uid"), ""},
		{"Namespace copy", confined.Markers("uid", key("team-a", "w1"), "obj"), ""},
		{"Namespace Lease namespace", confined.LeaseNamespaceMarkers("uid"), ""},
	}
	for _, tc := range cases {
		got, ok := tc.markers.Labels[kbindv1alpha1.PrefixLabel]
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %s = %q (present %v), want %q", tc.name, kbindv1alpha1.PrefixLabel, got, ok, tc.want)
		}
		if tc.markers.Labels[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue || tc.markers.Labels[kbindv1alpha1.ConsumerClusterUIDLabel] != "uid" {
			t.Errorf("%s: not marked as kbind's: %v", tc.name, tc.markers.Labels)
		}
	}
	if m := withPrefix.NamespaceMarkers("uid", "team-a"); m.Annotations[kbindv1alpha1.ConsumerNamespaceAnnotation] != "team-a" {
		t.Errorf("a Prefixed namespace lacks its consumer namespace: %v", m.Annotations)
	}
}
