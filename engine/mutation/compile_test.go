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

// set and del build rules.
func set(path, expr string) Rule { return Rule{Path: path, Expression: expr} }
func del(path string) Rule       { return Rule{Path: path, Delete: true} }

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dir   Direction
		rules []Rule
		// bad is the index of the rule refused, -1 if none; says is part
		// of its message.
		bad  int
		says string
	}{
		// Validation.
		{"no rules", Up, nil, -1, ""},
		{"set from the namespace", Up, []Rule{set(".spec.tenant", "object.metadata.namespace")}, -1, ""},
		{"delete", Up, []Rule{del(".spec.debug")}, -1, ""},
		{"Kubernetes libraries", Up, []Rule{set(".spec.cpu", `quantity("500m").asApproximateFloat()`), set(".spec.host", `url("https://a.example/x").getHost()`), set(".spec.ok", `"a-b".matches("^[a-z-]+$")`)}, -1, ""},
		{"metadata refused", Up, []Rule{set(".metadata.labels.team", `"a"`)}, 0, "may only change fields under .spec, not .metadata"},
		{"second rule refused", Down, []Rule{set(".status.a", "1"), set(".metadata.name", `"x"`)}, 1, "not .metadata"},
		{"status up refused", Up, []Rule{del(".status.x")}, 0, ".status belongs to down rules"},
		{"bare spec refused", Up, []Rule{set(".spec", "{}")}, 0, "the whole .spec"},
		{"list index refused", Up, []Rule{set(".spec.items[0]", "1")}, 0, "list indexes"},
		{"both expression and delete", Up, []Rule{{Path: ".spec.a", Expression: "1", Delete: true}}, 0, "not both"},
		{"neither expression nor delete", Up, []Rule{{Path: ".spec.a"}}, 0, "needs an expression"},
		{"blank expression", Up, []Rule{{Path: ".spec.a", Expression: "  "}}, 0, "needs an expression"},
		{"syntax error", Up, []Rule{set(".spec.a", "object.")}, 0, "does not compile"},
		{"unknown function", Up, []Rule{set(".spec.a", "nosuch(object)")}, 0, "undeclared reference to 'nosuch'"},
		{"consumer in up refused", Up, []Rule{set(".spec.a", "consumer.spec.a")}, 0, "consumer exists only in down rules"},
		{"consumer in down", Down, []Rule{set(".status.name", "consumer.metadata.name")}, -1, ""},
		{"self is not a variable", Up, []Rule{set(".spec.a", "self.spec.a")}, 0, "undeclared reference to 'self'"},
		{"conditions to a flag", Down, []Rule{set(".status.ready", `object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`)}, -1, ""},
		{"too expensive refused", Up, []Rule{set(".spec.same", "object.spec.items.all(x, object.spec.items.all(y, x == y))")}, 0, "estimated cost"},

		// Loops: a down rule reading what a down rule writes.
		{"reads own output", Down, []Rule{set(".status.count", "consumer.status.count + 1")}, 0, "reads consumer.status.count, and mutations.down[0] writes .status.count"},
		{"reads a written field's parent", Down, []Rule{set(".status.a.b", "1"), set(".status.c", "size(consumer.status.a)")}, 1, "reads consumer.status.a, and mutations.down[0] writes .status.a.b"},
		{"reads below a written field", Down, []Rule{set(".status.a", "{}"), set(".status.c", "consumer.status.a.b")}, 1, "reads consumer.status.a.b, and mutations.down[0] writes .status.a"},
		{"reads the whole status", Down, []Rule{set(".status.c", "consumer.status")}, 0, "reads consumer.status,"},
		{"a later rule's output", Down, []Rule{set(".status.c", "consumer.status.d"), set(".status.d", "1")}, 0, "mutations.down[1] writes .status.d"},
		{"presence test", Down, []Rule{set(".status.a", "has(consumer.status.a) ? 1 : 2")}, 0, "reads consumer.status.a,"},
		{"constant index", Down, []Rule{set(".status.a", `consumer["status"]["a"]`)}, 0, "reads consumer.status.a,"},
		{"optional select", Down, []Rule{set(".status.a", `consumer.?status.a.orValue(0)`)}, 0, "reads consumer.status.a,"},
		{"optional index", Down, []Rule{set(".status.a", `consumer[?"status"].orValue({})`)}, 0, "reads consumer.status,"},
		{"a deleted field", Down, []Rule{del(".status.secret"), set(".status.a", "has(consumer.status.secret)")}, 1, "mutations.down[0] deletes .status.secret"},
		{"in a comprehension", Down, []Rule{set(".status.n", `consumer.status.items.filter(i, i.on).size()`), set(".status.items", "[]")}, 0, "reads consumer.status.items,"},
		{"in an index", Down, []Rule{set(".status.a", `object.status[consumer.status.key]`), set(".status.key", `"k"`)}, 0, "reads consumer.status.key,"},
		{"consumer whole", Down, []Rule{set(".status.a", "consumer == object")}, 0, "reads the consumer object as a whole"},
		{"consumer in a list", Down, []Rule{set(".status.a", "[consumer].map(c, c.metadata.name)")}, 0, "as a whole"},
		{"non-constant index", Down, []Rule{set(".status.a", `consumer[object.kind]`)}, 0, "as a whole"},
		{"non-constant index below status", Down, []Rule{set(".status.a", `consumer.status[object.spec.k]`)}, 0, "reads consumer.status,"},
		{"shadowing comprehension variable", Down, []Rule{set(".status.a", `object.spec.items.map(consumer, consumer)`)}, 0, "as a whole"},
		{"other status fields", Down, []Rule{set(".status.a", "consumer.status.b"), set(".status.c", "has(consumer.status.d)")}, -1, ""},
		{"metadata and spec", Down, []Rule{set(".status.a", `consumer["metadata"]["name"] + consumer.spec.x`), set(".status.b", "consumer.metadata.finalizers[0]")}, -1, ""},
		{"a sibling with a common prefix", Down, []Rule{set(".status.ab", "consumer.status.a")}, -1, ""},
		{"the provider's own value", Down, []Rule{set(".status.count", "object.status.count + 1")}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.dir, tc.rules)
			if tc.bad < 0 {
				if err != nil || p == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("got %v (%T), want a *RuleError", err, err)
			}
			prefix := fmt.Sprintf("mutations.%s[%d] (%s): ", tc.dir, tc.bad, tc.rules[tc.bad].Path)
			if re.Index != tc.bad || re.Direction != tc.dir || !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

func TestCompileUnknownDirection(t *testing.T) {
	_, err := Compile("sideways", []Rule{del(".spec.a")})
	var re *RuleError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("got %v, want a plain error", err)
	}
}
