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
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
)

// Maps iterated in place answer as cel-go's own: every comprehension over
// a map, at the top and nested in lists and maps, and the operations that
// do not iterate.
func TestObjectMaps(t *testing.T) {
	object := obj(t, `{"spec": {"m": {"k1": 1, "k2": 2, "k3": 3}, "l": [{"a": 1}, {"b": {"c": 2}}], "empty": {}}}`)
	for _, tc := range []struct{ expr, want string }{
		{`object.spec.m.map(k, k)`, "[k1 k2 k3]"}, // sorted below: map order is Go's
		{`object.spec.m.all(k, k.startsWith("k"))`, "true"},
		{`object.spec.m.exists(k, object.spec.m[k] == 2)`, "true"},
		{`object.spec.m.exists_one(k, k == "k1")`, "true"},
		{`object.spec.m.filter(k, object.spec.m[k] > 1).size()`, "2"},
		{`object.spec.m.all(k, v, v > 0)`, "true"},
		{`object.spec.m.exists(k, v, k == "k3" && v == 3)`, "true"},
		{`object.spec.empty.all(k, false)`, "true"},
		{`object.spec.empty.exists(k, true)`, "false"},
		{`object.spec.l[0].exists(k, k == "a")`, "true"},
		{`object.spec.l[1].b.map(k, k)`, "[c]"},
		{`object.spec.m == {"k1": 1, "k2": 2, "k3": 3}`, "true"},
		{`{"k3": 3, "k2": 2, "k1": 1} == object.spec.m`, "true"},
		{`object.spec.m != {"k1": 1}`, "true"},
		{`"k2" in object.spec.m && !("x" in object.spec.m)`, "true"},
		{`size(object.spec.m)`, "3"},
		{`has(object.spec.m.k1) && !has(object.spec.m.x)`, "true"},
		{`object.spec.?m.?k2.orValue(0)`, "2"},
		{`object.spec.m`, "map[k1:1 k2:2 k3:3]"},
		{`object.spec.l`, "[map[a:1] map[b:map[c:2]]]"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			p, err := Compile(Up, []Rule{set(".spec.out", tc.expr)})
			if err != nil {
				t.Fatal(err)
			}
			target := map[string]any{}
			if err := p.Apply(target, object, nil); err != nil {
				t.Fatal(err)
			}
			got := target["spec"].(map[string]any)["out"]
			if l, ok := got.([]any); ok && tc.expr == `object.spec.m.map(k, k)` {
				sort.Slice(l, func(i, j int) bool { return fmt.Sprint(l[i]) < fmt.Sprint(l[j]) })
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("got %v, want %s", got, tc.want)
			}
		})
	}
}

// The adapter reaches every map: in maps and in lists.
func TestObjectAdapterWrapsNestedMaps(t *testing.T) {
	a := objectAdapter{types.DefaultTypeAdapter}
	top := a.NativeToValue(map[string]any{"l": []any{map[string]any{"m": map[string]any{}}}})
	if _, ok := top.(objectMap); !ok {
		t.Fatalf("top is %T", top)
	}
	l := top.(traits.Mapper).Get(types.String("l")).(traits.Lister)
	inner := l.Get(types.Int(0))
	if _, ok := inner.(objectMap); !ok {
		t.Fatalf("a map in a list is %T", inner)
	}
	if m := inner.(traits.Mapper).Get(types.String("m")); reflect.TypeOf(m) != reflect.TypeOf(objectMap{}) {
		t.Errorf("a map in a map is %T", m)
	}
	it := objectMap{Mapper: a.NativeToValue(map[string]any{}).(traits.Mapper), native: map[string]any{}}.Iterator()
	if it.HasNext() != types.False || it.Next() != nil {
		t.Error("an empty map's iterator has a next key")
	}
}
