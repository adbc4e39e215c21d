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
	"errors"
	"fmt"
	"strings"
	"testing"
)

// worstRules are the costliest up rules a namespace user can write: 32
// (the CRD's maxItems) that each pass the static check on the largest
// object, over a list as long as the object allows. They are what
// BenchmarkApplyWorstNamespaced and the attack suite run.
//   - filter: the comprehension that spends the most time per unit of
//     cost found (the cost tracker's value stack keeps growing with a
//     ternary in the predicate, and each step searches it);
//   - nested: a comprehension nested in one over a constant list (an
//     outer loop over the object's list would not compile).
var worstRules = map[string]string{
	"filter": `object.spec.items.filter(x, x == 0 ? (x == 1 ? false : false) : false)`,
	"nested": `[1, 2].all(y, object.spec.items.exists(x, x == -y))`,
}

// rulesOf is n up rules with expression expr, each its own field.
func rulesOf(n int, expr string) []Rule {
	out := make([]Rule, n)
	for i := range out {
		out[i] = set(fmt.Sprintf(".spec.r%d", i), expr)
	}
	return out
}

// largestList is an object whose .spec.items is as long as etcd lets an
// object be: 1.5 MiB of "0," is 786,432 items.
func largestList() map[string]any {
	items := make([]any, etcdMaxRequestBytes/2)
	for i := range items {
		items[i] = int64(1)
	}
	return map[string]any{"metadata": map[string]any{"name": "w", "namespace": "team-a"}, "spec": map[string]any{"items": items}}
}

// The namespaced limits are far below a ClusterBinding's, and a program
// can never run an evaluation longer than its object's budget.
func TestLimits(t *testing.T) {
	if NamespacedPerCallCostLimit > NamespacedCostBudget || NamespacedCostBudget*100 > RuntimeCostBudget || NamespacedPerCallCostLimit*100 > PerCallCostLimit {
		t.Errorf("namespaced limits %d per call, %d per object: want per call <= per object, both at most a hundredth of the cluster's", NamespacedPerCallCostLimit, NamespacedCostBudget)
	}
	for _, l := range []Limits{{PerCall: 0, PerObject: 10}, {PerCall: 11, PerObject: 10}} {
		if _, err := CompileWithin(Up, []Rule{del(".spec.a")}, l); err == nil {
			t.Errorf("limits %+v accepted", l)
		}
	}
}

// Ordinary rules — the docs' examples and the tests' — pass the namespaced
// limits with a wide margin: each costs under a fifth of the per-call limit
// on a realistic object (most under a fiftieth), and even 32 of the
// costliest (a map over 10 objects) fit the per-object budget.
func TestNamespacedLimitsPassOrdinaryRules(t *testing.T) {
	conditions := make([]any, 10)
	items := make([]any, 10)
	for i := range conditions {
		conditions[i] = map[string]any{"type": fmt.Sprint("T", i), "status": "True", "reason": "AsExpected", "message": "a message"}
		items[i] = map[string]any{"name": fmt.Sprint("item-", i), "value": int64(i)}
	}
	object := map[string]any{
		"metadata": map[string]any{"namespace": "team-a", "name": "w1", "labels": map[string]any{"tier": "gold"}},
		"spec":     map[string]any{"team": "blue", "size": int64(3), "items": items},
		"status":   map[string]any{"conditions": conditions},
	}
	var total uint64
	for _, expr := range []string{
		`object.metadata.namespace`,
		`object.spec.team + '-owner'`,
		`object.metadata.namespace + "/" + object.metadata.name + "-" + object.spec.team`,
		`object.metadata.labels["tier"]`,
		`"tier" in object.metadata.labels ? object.metadata.labels["tier"] : "bronze"`,
		`object.spec.size * 2`,
		`quantity("500m").asApproximateFloat()`,
		`object.metadata.name.matches("^[a-z0-9-]+$")`,
		`has(object.status.conditions) && object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`,
		`object.spec.items.map(i, i.name)`,
	} {
		p, err := CompileWithin(Up, rulesOf(32, expr), NamespacedLimits)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		target := map[string]any{"spec": map[string]any{}}
		if err := p.Apply(target, object, nil); err != nil {
			t.Errorf("32 × %s: %v", expr, err)
		}
		_, details, err := p.steps[0].prog.Eval(map[string]any{objectVar: object})
		if err != nil {
			t.Fatal(err)
		}
		cost := *details.ActualCost()
		if cost*5 > NamespacedPerCallCostLimit {
			t.Errorf("%s costs %d, over a fifth of the per-call limit %d", expr, cost, NamespacedPerCallCostLimit)
		}
		total = max(total, cost*32)
	}
	if total > NamespacedCostBudget {
		t.Errorf("32 of the costliest ordinary rule cost %d, over the per-object budget %d", total, NamespacedCostBudget)
	}
}

// The worst rules stop at the namespaced per-call limit on the first rule:
// the object fails with an error naming the namespaced limit and what to
// do, and nothing is written. The same rules under a ClusterBinding's
// limits are not stopped there (they run on, for seconds: not run here).
func TestNamespacedLimitsStopTheWorstRules(t *testing.T) {
	object := largestList()
	for name, expr := range worstRules {
		t.Run(name, func(t *testing.T) {
			p, err := CompileWithin(Up, rulesOf(32, expr), NamespacedLimits)
			if err != nil {
				t.Fatalf("the worst rules do not compile: %v", err)
			}
			target := map[string]any{"spec": map[string]any{}}
			err = p.Apply(target, object, nil)
			assertRuleError(t, err, Up, 0, ".spec.r0", fmt.Sprintf("exceeded the runtime cost limit of %d for one evaluation (a namespaced Binding's; a ClusterBinding's is %d): loop over fewer or shorter lists, or have an administrator bind the API with a ClusterBinding",
				NamespacedPerCallCostLimit, PerCallCostLimit))
			if len(target["spec"].(map[string]any)) != 0 {
				t.Errorf("target changed: %v", target)
			}
		})
	}
}

// Rules each under the per-call limit are stopped by the per-object
// budget, naming it: the rule that took the object over it fails.
func TestNamespacedBudgetStopsManyRules(t *testing.T) {
	rules := rulesOf(32, `object.spec.items.all(x, x >= 0)`)
	// Each evaluation costs about half the per-call limit; a dozen exceed
	// the per-object budget.
	object := justUnder(t, rules[0], NamespacedPerCallCostLimit/2)
	p, err := CompileWithin(Up, rules, NamespacedLimits)
	if err != nil {
		t.Fatal(err)
	}
	_, details, err := p.steps[0].prog.Eval(map[string]any{objectVar: object})
	if err != nil {
		t.Fatal(err)
	}
	cost := *details.ActualCost()
	err = p.Apply(map[string]any{}, object, nil)
	failing := int(NamespacedCostBudget / cost)
	assertRuleError(t, err, Up, failing, fmt.Sprintf(".spec.r%d", failing), fmt.Sprintf("exceeded the runtime cost budget of %d for one object (a namespaced Binding's; a ClusterBinding's is %d): loop over",
		NamespacedCostBudget, RuntimeCostBudget))
	var re *RuleError
	if !errors.As(err, &re) || strings.Contains(err.Error(), "for one evaluation") {
		t.Errorf("want the per-object budget named, got %v", err)
	}
}

// justUnder is an object whose .spec.items is the longest list on which
// rule costs at most limit.
func justUnder(t testing.TB, rule Rule, limit uint64) map[string]any {
	t.Helper()
	p, err := Compile(Up, []Rule{rule})
	if err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	for n := 1; ; n++ {
		items := make([]any, n)
		for i := range items {
			items[i] = int64(1)
		}
		object := map[string]any{"spec": map[string]any{"items": items}}
		_, details, err := p.steps[0].prog.Eval(map[string]any{objectVar: object})
		if err != nil {
			t.Fatal(err)
		}
		if *details.ActualCost() > limit {
			return last
		}
		last = object
	}
}

// Under the namespaced limits a rule's value costs what converting it
// takes: a large part of the object fails the object, naming the budget;
// a ClusterBinding's rule writes it as before.
func TestNamespacedLimitsChargeResults(t *testing.T) {
	items := make([]any, NamespacedCostBudget)
	for i := range items {
		items[i] = int64(i)
	}
	object := map[string]any{"spec": map[string]any{"items": items, "text": strings.Repeat("a", NamespacedCostBudget*10)}}
	for _, expr := range []string{`object.spec.items`, `object.spec.text`} {
		rules := []Rule{set(".spec.copy", expr)}
		p, err := CompileWithin(Up, rules, NamespacedLimits)
		if err != nil {
			t.Fatal(err)
		}
		target := map[string]any{}
		assertRuleError(t, p.Apply(target, object, nil), Up, 0, ".spec.copy", fmt.Sprintf("the expression's value is too large: the rules together exceeded the runtime cost budget of %d for one object (a namespaced Binding's", NamespacedCostBudget))
		if len(target) != 0 {
			t.Errorf("target changed: %v", target)
		}
		if p, err = Compile(Up, rules); err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(target, object, nil); err != nil {
			t.Errorf("under a ClusterBinding's limits: %v", err)
		}
	}
	// Values that fit are written, and their cost adds up: 32 rules each
	// writing 200 items (201 values) exceed the budget of 5000 at the
	// 25th.
	p, err := CompileWithin(Up, rulesOf(32, `object.spec.items`), NamespacedLimits)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Apply(map[string]any{}, map[string]any{"spec": map[string]any{"items": items[:200]}}, nil)
	var re *RuleError
	if !errors.As(err, &re) || re.Index != int(NamespacedCostBudget/201) || !strings.Contains(err.Error(), "exceeded the runtime cost budget") {
		t.Errorf("got %v, want rule %d over the budget", err, NamespacedCostBudget/201)
	}
}
