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

// dnsLabel turns fuzz input into a valid DNS label of 1..63 characters.
func dnsLabel(s string, maxLen int) string {
	return validName(s, maxLen, false)
}

// dnsSubdomain turns fuzz input into a valid DNS subdomain of 1..253
// characters.
func dnsSubdomain(s string) string {
	return validName(s, 253, true)
}

func validName(s string, maxLen int, dots bool) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == '.' && dots:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > maxLen {
		out = out[:maxLen]
	}
	// Every dot-separated part starts and ends with a letter or digit.
	parts := strings.Split(out, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p = strings.Trim(p, "-"); p != "" {
			kept = append(kept, p)
		}
	}
	out = strings.Join(kept, ".")
	if out == "" {
		return "x"
	}
	return out
}

// FuzzMapping checks, for any two consumer keys and each mode: the
// provider key is a valid namespace and name, different keys never map to
// one provider key, and the origin markers lead back to the consumer key.
func FuzzMapping(f *testing.F) {
	f.Add("a-b", "c", "a", "b-c", "tenant")
	f.Add("team-a", "w1", "team-a", "w1", "p")
	f.Add(strings.Repeat("n", 63), strings.Repeat("x", 253), strings.Repeat("n", 62), strings.Repeat("x", 253), strings.Repeat("p", 30))
	f.Add("default", "db", "", "default-db", "a")
	f.Fuzz(func(t *testing.T, ns1, name1, ns2, name2, param string) {
		k1 := types.NamespacedName{Namespace: optionalLabel(ns1), Name: dnsSubdomain(name1)}
		k2 := types.NamespacedName{Namespace: optionalLabel(ns2), Name: dnsSubdomain(name2)}
		for _, m := range []Mapping{
			For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}),
			For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: dnsLabel(param, 63)}),
			For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: dnsLabel(param, 30)}),
		} {
			p1, err1 := m.Object(k1)
			p2, err2 := m.Object(k2)
			if err1 == nil {
				assertValid(t, p1)
				if back, ok := Origin(m.Markers("uid", k1, "obj").Annotations); m.Isolated() && (!ok || back != k1) {
					t.Fatalf("%s: %v does not round-trip: %v", m, k1, back)
				}
				if k1.Namespace != "" && m.Namespace(k1.Namespace) == m.LeaseNamespace("") && m.Mode() == kbindv1alpha1.IsolationPrefixed {
					t.Fatalf("%s: consumer namespace %q maps onto the Lease namespace", m, k1.Namespace)
				}
			} else if !errors.Is(err1, ErrClusterScoped) || k1.Namespace != "" || m.AllowsClusterScoped() {
				t.Fatalf("%s: %v: unexpected error %v", m, k1, err1)
			}
			if err1 == nil && err2 == nil && k1 != k2 && p1 == p2 {
				t.Fatalf("%s: %v and %v both map to %v", m, k1, k2, p1)
			}
			if err1 == nil && k1.Namespace != "" {
				if errs := validation.IsDNS1123Label(m.Namespace(k1.Namespace)); len(errs) > 0 {
					t.Fatalf("%s: namespace of %q is invalid: %v", m, k1.Namespace, errs)
				}
			}
		}
	})
}

// FuzzConsumer checks the way back from a provider place (Consumer): a
// consumer key whose provider name is readable comes back as itself, and
// any provider place — valid names or not — that comes back at all comes
// back as a key that maps forward to that very place: only canonical names
// invert, and two places never invert to one key.
func FuzzConsumer(f *testing.F) {
	f.Add("team-a", "db", "kbind-a", "team-a.db", "kbind-a")
	f.Add("a", "b.c", "p-a", "b.c", "p")
	f.Add("", "w", "", "p-w", "p")
	f.Add("x", strings.Repeat("y", 253), "p--x", "db", "p")
	f.Add("b-x", "o", "a-b-x", "o", "a-b")
	f.Add("UPPER", "db", "kbind-a", "UPPER.db", "kbind-a")
	f.Fuzz(func(t *testing.T, ns, name, pns, pname, param string) {
		key := types.NamespacedName{Namespace: optionalLabel(ns), Name: dnsSubdomain(name)}
		raw := types.NamespacedName{Namespace: pns, Name: pname}
		for _, m := range []Mapping{
			For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}),
			For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: dnsLabel(param, 63)}),
			For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: dnsLabel(param, 30)}),
		} {
			if p, err := m.Object(key); err == nil {
				back, ok := m.Consumer(p)
				readable := !strings.Contains(p.Name+"/"+p.Namespace, "--") && (m.Mode() != kbindv1alpha1.IsolationNamespace || strings.Contains(p.Name, "."))
				if readable && (!ok || back != key) {
					t.Fatalf("%s: %v maps to %v, which comes back as %v, %v", m, key, p, back, ok)
				}
				if ok && back != key {
					t.Fatalf("%s: %v maps to %v, which comes back as another key %v", m, key, p, back)
				}
			}
			if back, ok := m.Consumer(raw); ok {
				if forward, err := m.Object(back); err != nil || forward != raw {
					t.Fatalf("%s: %v comes back as %v, which maps forward to %v, %v", m, raw, back, forward, err)
				}
			}
		}
	})
}

// optionalLabel makes an empty input a cluster-scoped key.
func optionalLabel(s string) string {
	if s == "" {
		return ""
	}
	return dnsLabel(s, 63)
}
