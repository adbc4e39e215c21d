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

package mutation

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkApply is one set rule on a small object: the cost the syncer
// adds per object and direction for a binding with one rule. The figure is
// recorded in the package doc.
func BenchmarkApply(b *testing.B) {
	p, err := Compile(Up, []Rule{set(".spec.tenant", "object.metadata.namespace")})
	if err != nil {
		b.Fatal(err)
	}
	object := obj(b, consumerWidget)
	target := obj(b, `{"metadata": {"name": "team-a.w1"}, "spec": {"size": 3, "note": "text"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Apply(target, object, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyWorstNamespaced is the costliest a namespace user's
// Binding can make one object at one Apply, under NamespacedLimits (each
// op fails the object, but mapkeys): the figure behind NamespacedPerCallCostLimit and
// NamespacedCostBudget. "filter" and "nested" are 32 of worstRules on the
// largest list, the first stopped at the per-call limit; "spread" is the
// worst case of the per-object budget: 32 filter rules over a list just
// short enough for each to finish under the per-call limit, run until the
// budget is spent and the next one is stopped.
func BenchmarkApplyWorstNamespaced(b *testing.B) {
	largest := largestList()
	cases := map[string]struct {
		rules  []Rule
		object map[string]any
	}{}
	for name, expr := range worstRules {
		cases[name] = struct {
			rules  []Rule
			object map[string]any
		}{rulesOf(32, expr), largest}
	}
	spread := rulesOf(32, worstRules["filter"])
	cases["spread"] = struct {
		rules  []Rule
		object map[string]any
	}{spread, justUnder(b, spread[0], NamespacedPerCallCostLimit)}
	// mapKeys is no comprehension that costs much: it stops at the first
	// key. But cel-go copies a map's keys before iterating it, uncharged,
	// and every rule does so again: the floor no budget reaches.
	cases["mapkeys"] = struct {
		rules  []Rule
		object map[string]any
	}{rulesOf(32, `object.spec.m.exists(k, true)`), largestMap()}
	// results costs 2 per rule to evaluate; its value is the largest
	// list, which the rule writes.
	cases["results"] = struct {
		rules  []Rule
		object map[string]any
	}{rulesOf(32, `object.spec.items`), largest}
	// call is a library function on the largest string: charged when it
	// ends, so the first rule runs it whole (and fails the object).
	cases["call"] = struct {
		rules  []Rule
		object map[string]any
	}{rulesOf(32, `object.spec.s.matches("(a|b)*c")`), largestString()}
	for name, c := range cases {
		b.Run(name, func(b *testing.B) {
			p, err := CompileWithin(Up, c.rules, NamespacedLimits)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				_ = p.Apply(map[string]any{"spec": map[string]any{}}, c.object, nil)
			}
		})
	}
}

// largestMap is an object whose .spec.m has as many keys as etcd lets an
// object hold: 1.5 MiB of `"abc":0,` (8 bytes) is 196,608 keys.
func largestMap() map[string]any {
	m := map[string]any{}
	for i := range etcdMaxRequestBytes / 8 {
		m[strconv.FormatInt(int64(i), 36)] = int64(0)
	}
	return map[string]any{"spec": map[string]any{"m": m}}
}

// largestString is an object whose .spec.s is as long as etcd lets an
// object be.
func largestString() map[string]any {
	return map[string]any{"spec": map[string]any{"s": strings.Repeat("ab", etcdMaxRequestBytes/2)}}
}
