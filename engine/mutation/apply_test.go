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
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
)

// obj decodes JSON into unstructured content (integers as int64).
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

const (
	consumerWidget = `{"apiVersion": "example.org/v1", "kind": "Widget",
		"metadata": {"name": "w1", "namespace": "team-a", "labels": {"tier": "gold"}},
		"spec": {"size": 3, "debug": true, "note": "text"}}`
	providerWidget = `{"apiVersion": "example.org/v1", "kind": "Widget",
		"metadata": {"name": "team-a.w1", "namespace": "kbind-tenant"},
		"spec": {"size": 3},
		"status": {"observedGeneration": 2, "conditions": [
			{"type": "Synced", "status": "True"},
			{"type": "Ready", "status": "True"}]}}`
	notReadyWidget = `{"metadata": {"name": "w2"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}`
)

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name           string
		dir            Direction
		rules          []Rule
		target, object string
		consumer       string
		want           string // the target afterwards; "" when the rules fail
		fails          int    // the failing rule's index when want is ""
		says           string // part of the failure
	}{
		{name: "set the tenant from the namespace", dir: Up,
			rules:  []Rule{set(".spec.tenant", "object.metadata.namespace")},
			target: `{"metadata": {"name": "team-a.w1"}, "spec": {"size": 3}}`, object: consumerWidget,
			want: `{"metadata": {"name": "team-a.w1"}, "spec": {"size": 3, "tenant": "team-a"}}`},
		{name: "delete a field", dir: Up,
			rules:  []Rule{del(".spec.debug")},
			target: `{"spec": {"size": 3, "debug": true}}`, object: consumerWidget,
			want: `{"spec": {"size": 3}}`},
		{name: "delete an absent field or below a scalar", dir: Up,
			rules:  []Rule{del(".spec.nothing"), del(".spec.none.deeper"), del(".spec.size.x")},
			target: `{"spec": {"size": 3}}`, object: consumerWidget,
			want: `{"spec": {"size": 3}}`},
		{name: "create intermediate objects", dir: Up,
			rules:  []Rule{set(".spec.a.b.c", "1"), set(".spec.a.d", `"x"`)},
			target: `{"metadata": {"name": "n"}}`, object: consumerWidget,
			want: `{"metadata": {"name": "n"}, "spec": {"a": {"b": {"c": 1}, "d": "x"}}}`},
		{name: "rules run in order", dir: Up,
			rules:  []Rule{set(".spec.a", `{"b": 1}`), set(".spec.a.c", "2"), set(".spec.gone", "1"), del(".spec.gone")},
			target: `{"spec": {}}`, object: consumerWidget,
			want: `{"spec": {"a": {"b": 1, "c": 2}}}`},
		{name: "expressions see object, not the target", dir: Up,
			rules:  []Rule{set(".spec.size", "object.spec.size * 2"), set(".spec.again", "object.spec.size * 2")},
			target: `{"spec": {"size": 3}}`, object: consumerWidget,
			want: `{"spec": {"size": 6, "again": 6}}`},
		{name: "JSON values", dir: Up,
			rules: []Rule{
				set(".spec.labels", "object.metadata.labels"), set(".spec.half", "double(object.spec.size) / 2.0"),
				set(".spec.none", "null"), set(".spec.list", `[{"k": [true]}, {}]`), set(".spec.u", "7u"),
				set(".spec.at", `timestamp("2026-01-02T03:04:05Z")`), set(".spec.d", `duration("90s")`),
				set(".spec.cpu", `quantity("1.5")`), set(".spec.ip", `string(ip("10.0.0.1"))`)},
			target: `{"spec": {}}`, object: consumerWidget,
			want: `{"spec": {"labels": {"tier": "gold"}, "half": 1.5, "none": null, "list": [{"k": [true]}, {}], "u": 7,
				"at": "2026-01-02T03:04:05Z", "d": "90s", "cpu": "1500m", "ip": "10.0.0.1"}}`},
		{name: "reshape a status field down", dir: Down,
			rules: []Rule{
				set(".status.ready", `object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`),
				set(".status.consumerName", "consumer.metadata.name"), del(".status.conditions")},
			target: `{"status": {"observedGeneration": 2, "conditions": []}}`, object: providerWidget, consumer: consumerWidget,
			want: `{"status": {"observedGeneration": 2, "ready": true, "consumerName": "w1"}}`},
		{name: "reshape a status field down, not ready", dir: Down,
			rules:  []Rule{set(".status.ready", `object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`)},
			target: `{"status": {}}`, object: notReadyWidget, consumer: consumerWidget,
			want: `{"status": {"ready": false}}`},

		// Failures leave the target as it was.
		{name: "no such key", dir: Up,
			rules:  []Rule{set(".spec.tenant", "object.metadata.namespace"), set(".spec.x", "object.spec.missing")},
			target: `{"spec": {"size": 3}}`, object: consumerWidget,
			fails: 1, says: "no such key: missing"},
		{name: "type error", dir: Up,
			rules:  []Rule{set(".spec.x", "object.metadata.namespace + 1")},
			target: `{"spec": {}}`, object: consumerWidget,
			fails: 0, says: "no such overload"},
		{name: "parent is not an object", dir: Up,
			rules:  []Rule{set(".spec.a", "1"), set(".spec.note.x", "1")},
			target: `{"spec": {"note": "text"}}`, object: consumerWidget,
			fails: 1, says: ".spec.note is a string, not an object"},
		{name: "parent set to a list by an earlier rule", dir: Up,
			rules:  []Rule{set(".spec.a", "[1]"), set(".spec.a.b", "1")},
			target: `{"spec": {}}`, object: consumerWidget,
			fails: 1, says: ".spec.a is a list, not an object"},
		{name: "bytes", dir: Up, rules: []Rule{set(".spec.x", `b"abc"`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: "returned bytes"},
		{name: "NaN", dir: Up, rules: []Rule{set(".spec.x", `0.0 / 0.0`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: "NaN"},
		{name: "uint out of range", dir: Up, rules: []Rule{set(".spec.x", `18446744073709551615u`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: "larger than"},
		{name: "optional", dir: Up, rules: []Rule{set(".spec.x", `object.spec.?size`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: ".orValue("},
		{name: "integer map key", dir: Up, rules: []Rule{set(".spec.x", `{"a": {1: 2}}`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: `key "a": a map key is a int`},
		{name: "a list item", dir: Up, rules: []Rule{set(".spec.x", `[[b"x"]]`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: "item 0: item 0: the expression returned bytes"},
		{name: "a library type", dir: Up, rules: []Rule{set(".spec.x", `ip("10.0.0.1")`)},
			target: `{"spec": {}}`, object: consumerWidget, fails: 0, says: "returned a net.IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.dir, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			target, object := obj(t, tc.target), obj(t, tc.object)
			var consumer map[string]any
			if tc.consumer != "" {
				consumer = obj(t, tc.consumer)
			}
			inputs := runtime.DeepCopyJSON(map[string]any{"target": target, "object": object, "consumer": consumer})
			err = p.Apply(target, object, consumer)
			if !reflect.DeepEqual(inputs["object"], object) || !reflect.DeepEqual(inputs["consumer"], map[string]any(consumer)) {
				t.Errorf("Apply changed object or consumer")
			}
			if tc.want != "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := obj(t, tc.want); !reflect.DeepEqual(target, want) {
					t.Errorf("target is\n%v\nwant\n%v", target, want)
				}
				return
			}
			assertRuleError(t, err, tc.dir, tc.fails, tc.rules[tc.fails].Path, tc.says)
			if !reflect.DeepEqual(inputs["target"], target) {
				t.Errorf("a failed Apply changed the target to\n%v", target)
			}
		})
	}
}

// assertRuleError checks err is the *RuleError of one rule and says what.
func assertRuleError(t *testing.T, err error, dir Direction, index int, path, says string) {
	t.Helper()
	var re *RuleError
	if !errors.As(err, &re) {
		t.Fatalf("got %v (%T), want a *RuleError", err, err)
	}
	prefix := fmt.Sprintf("mutations.%s[%d] (%s): ", dir, index, path)
	if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), says) {
		t.Errorf("error %q: want it to start with %q and say %q", err, prefix, says)
	}
}

// A rule failing on one object does not stop the program on the next.
func TestApplyFailsPerObject(t *testing.T) {
	p, err := Compile(Up, []Rule{set(".spec.tier", "object.metadata.labels.tier")})
	if err != nil {
		t.Fatal(err)
	}
	unlabelled, labelled := obj(t, `{"metadata": {"name": "a"}}`), obj(t, consumerWidget)
	t1, t2 := obj(t, `{"spec": {}}`), obj(t, `{"spec": {}}`)
	assertRuleError(t, p.Apply(t1, unlabelled, nil), Up, 0, ".spec.tier", "no such key: labels")
	if err := p.Apply(t2, labelled, nil); err != nil || t2["spec"].(map[string]any)["tier"] != "gold" {
		t.Errorf("second object: %v, %v", err, t2)
	}
	if len(t1["spec"].(map[string]any)) != 0 {
		t.Errorf("first object's target changed: %v", t1)
	}
}

// A target sharing maps with object (a shallow copy) leaves object alone.
func TestApplyCopiesOnWrite(t *testing.T) {
	p, err := Compile(Up, []Rule{set(".spec.tenant", `"t"`), set(".spec.nested.x", "1"), del(".spec.debug")})
	if err != nil {
		t.Fatal(err)
	}
	object := obj(t, `{"spec": {"debug": true, "nested": {"y": 2}}}`)
	target := map[string]any{"spec": object["spec"]}
	if err := p.Apply(target, object, nil); err != nil {
		t.Fatal(err)
	}
	if want := obj(t, `{"spec": {"debug": true, "nested": {"y": 2}}}`); !reflect.DeepEqual(object, want) {
		t.Errorf("object changed: %v", object)
	}
	if want := obj(t, `{"spec": {"tenant": "t", "nested": {"x": 1, "y": 2}}}`); !reflect.DeepEqual(target, want) {
		t.Errorf("target is %v, want %v", target, want)
	}
}

func TestApplyEdgeCases(t *testing.T) {
	var none *Program
	if err := none.Apply(nil, nil, nil); err != nil {
		t.Errorf("nil program: %v", err)
	}
	p, err := Compile(Up, []Rule{set(".spec.a", "1")})
	if err != nil {
		t.Fatal(err)
	}
	assertRuleError(t, p.Apply(nil, map[string]any{}, nil), Up, 0, ".spec.a", "no target")
	// A typed nil map on the way is written to as an empty one.
	target := map[string]any{"spec": map[string]any(nil)}
	if err := p.Apply(target, nil, nil); err != nil || target["spec"].(map[string]any)["a"] != int64(1) {
		t.Errorf("typed nil spec: %v, %v", err, target)
	}
	// A missing consumer reads as no fields.
	d, err := Compile(Down, []Rule{set(".status.seen", "has(consumer.metadata)")})
	if err != nil {
		t.Fatal(err)
	}
	target = map[string]any{}
	if err := d.Apply(target, map[string]any{}, nil); err != nil || target["status"].(map[string]any)["seen"] != false {
		t.Errorf("nil consumer: %v, %v", err, target)
	}
}

// items returns a list of n conditions.
func items(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"type": "Other", "status": "False"}
	}
	return out
}

// An expression cheap enough to compile is stopped at runtime when the
// object makes it too expensive: searching a string costs a tenth of its
// length, so 20 million characters cost 2 million, over the per-call limit.
// (A comprehension reaches the limit too, but slowly: see the package doc.)
func TestApplyPerCallCostLimit(t *testing.T) {
	p, err := Compile(Up, []Rule{set(".spec.hasX", `object.spec.text.contains("x")`)})
	if err != nil {
		t.Fatal(err)
	}
	target := map[string]any{"spec": map[string]any{}}
	if err := p.Apply(target, map[string]any{"spec": map[string]any{"text": "abc"}}, nil); err != nil {
		t.Fatalf("short text: %v", err)
	}
	target = map[string]any{"spec": map[string]any{}}
	err = p.Apply(target, map[string]any{"spec": map[string]any{"text": strings.Repeat("a", 20_000_000)}}, nil)
	assertRuleError(t, err, Up, 0, ".spec.hasX", "exceeded the runtime cost limit of 1000000 for one evaluation")
	if len(target["spec"].(map[string]any)) != 0 {
		t.Errorf("target changed: %v", target)
	}
}

// All rules on one object share one budget.
func TestApplyRuntimeBudget(t *testing.T) {
	rule := set(".status.n", `object.status.conditions.filter(c, c.type == "Other").size()`)
	p, err := Compile(Down, []Rule{rule, {Path: ".status.m", Expression: rule.Expression}})
	if err != nil {
		t.Fatal(err)
	}
	object := map[string]any{"status": map[string]any{"conditions": items(100)}}
	target := map[string]any{}
	if err := p.Apply(target, object, nil); err != nil {
		t.Fatal(err)
	}
	// Lower the budget to one and a half evaluations: the second rule fails.
	_, details, err := p.steps[0].prog.Eval(map[string]any{"object": object})
	if err != nil {
		t.Fatal(err)
	}
	p.limits.PerObject = *details.ActualCost() * 3 / 2
	target = map[string]any{}
	assertRuleError(t, p.Apply(target, object, nil), Down, 1, ".status.m", fmt.Sprintf("exceeded the runtime cost budget of %d for one object (the API server's", p.limits.PerObject))
	if len(target) != 0 {
		t.Errorf("target changed: %v", target)
	}
}
