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
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// grammar is the path grammar of each direction, written out independently
// of parsePath.
var grammar = map[Direction]*regexp.Regexp{
	Up:   regexp.MustCompile(`^[.]spec([.][A-Za-z_][A-Za-z0-9_-]*)+$`),
	Down: regexp.MustCompile(`^[.]status([.][A-Za-z_][A-Za-z0-9_-]*)+$`),
}

// fuzzDirection maps fuzz input to up, down or an unknown direction.
func fuzzDirection(d uint8) Direction {
	switch d % 3 {
	case 0:
		return Up
	case 1:
		return Down
	default:
		return Direction(fmt.Sprintf("dir%d", d))
	}
}

// FuzzCompile checks, for any one rule: Compile does not panic; an unknown
// direction is a plain error; a refusal is the *RuleError of rule 0 with
// the rule's path in its message; an accepted rule's path matches its
// direction's grammar and has exactly one of expression and delete; and
// applying an accepted rule either succeeds or fails with a *RuleError and
// leaves the target exactly as it was, and never changes object or
// consumer.
func FuzzCompile(f *testing.F) {
	f.Add(uint8(0), ".spec.tenant", "object.metadata.namespace", false)
	f.Add(uint8(0), ".spec.debug", "", true)
	f.Add(uint8(0), ".spec.a", "consumer.spec.a", false)
	f.Add(uint8(0), ".metadata.labels.x", `"a"`, false)
	f.Add(uint8(0), ".spec.items[0]", "1", false)
	f.Add(uint8(0), ".spec", "{}", false)
	f.Add(uint8(0), ".spec.x.y", `object.spec.size * 2`, false)
	f.Add(uint8(0), ".spec.note.x", "1", true)
	f.Add(uint8(1), ".status.ready", `object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`, false)
	f.Add(uint8(1), ".status.count", "consumer.status.count + 1", false)
	f.Add(uint8(1), ".status.a", `consumer["status"][object.kind]`, false)
	f.Add(uint8(1), ".status.a", `has(consumer.metadata.name) ? [b"x"] : {1: 2}`, false)
	f.Add(uint8(1), ".status.x", "object.spec.items.all(x, object.spec.items.all(y, x == y))", false)
	f.Add(uint8(2), ".spec.a", "1", false)
	f.Fuzz(func(t *testing.T, d uint8, path, expr string, del bool) {
		dir := fuzzDirection(d)
		rule := Rule{Path: path, Expression: expr, Delete: del}
		p, err := Compile(dir, []Rule{rule})
		if dir != Up && dir != Down {
			var re *RuleError
			if err == nil || errors.As(err, &re) {
				t.Fatalf("direction %q: got %v, want a plain error", dir, err)
			}
			return
		}
		if err != nil {
			assertFuzzRuleError(t, err, dir, path)
			return
		}
		if !grammar[dir].MatchString(path) {
			t.Fatalf("%s accepted path %q outside the grammar", dir, path)
		}
		if hasExpr := strings.TrimSpace(expr) != ""; hasExpr == del {
			t.Fatalf("accepted a rule with expression %q and delete %v", expr, del)
		}
		applyFuzzed(t, p, dir, path)
	})
}

// assertFuzzRuleError checks a refusal names rule 0 and its path.
func assertFuzzRuleError(t *testing.T, err error, dir Direction, path string) {
	t.Helper()
	var re *RuleError
	if !errors.As(err, &re) || re.Index != 0 || re.Path != path || re.Direction != dir {
		t.Fatalf("got %#v, want the *RuleError of rule 0", err)
	}
	if prefix := fmt.Sprintf("mutations.%s[0] (%s): ", dir, path); !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("message %q does not start with %q", err, prefix)
	}
}

// applyFuzzed applies an accepted program to fixed objects.
func applyFuzzed(t *testing.T, p *Program, dir Direction, path string) {
	t.Helper()
	object := map[string]any{
		"metadata": map[string]any{"name": "w1", "namespace": "team-a"},
		"spec":     map[string]any{"size": int64(3), "note": "text", "items": []any{int64(1), int64(2)}},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}
	consumer := runtime.DeepCopyJSON(object)
	target := map[string]any{"spec": object["spec"], "status": map[string]any{"note": "text"}}
	before := runtime.DeepCopyJSON(map[string]any{"target": target, "object": object, "consumer": consumer})
	err := p.Apply(target, object, consumer)
	if !reflect.DeepEqual(before["object"], object) || !reflect.DeepEqual(before["consumer"], consumer) {
		t.Fatalf("Apply changed object or consumer")
	}
	if err == nil {
		if bad := notJSON(target); bad != "" {
			t.Fatalf("Apply wrote a %s", bad)
		}
		return
	}
	assertFuzzRuleError(t, err, dir, path)
	if !reflect.DeepEqual(before["target"], target) {
		t.Fatalf("a failed Apply changed the target: %v", target)
	}
}

// notJSON returns the type of the first value in v that unstructured
// content cannot hold, or "".
func notJSON(v any) string {
	switch v := v.(type) {
	case nil, string, int64, float64, bool:
		return ""
	case []any:
		for _, e := range v {
			if bad := notJSON(e); bad != "" {
				return bad
			}
		}
		return ""
	case map[string]any:
		for _, e := range v {
			if bad := notJSON(e); bad != "" {
				return bad
			}
		}
		return ""
	default:
		return fmt.Sprintf("%T", v)
	}
}
