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
	"slices"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		dir    Direction
		path   string
		fields []string // nil: refused
		says   string   // part of the refusal
	}{
		{Up, ".spec.tenant", []string{"spec", "tenant"}, ""},
		{Up, ".spec.a.b_c.D-9", []string{"spec", "a", "b_c", "D-9"}, ""},
		{Up, "._x", nil, "not ._x"},
		{Up, ".spec._private", []string{"spec", "_private"}, ""},
		{Down, ".status.ready", []string{"status", "ready"}, ""},
		{Down, ".status.conditions.summary", []string{"status", "conditions", "summary"}, ""},

		{Up, "", nil, "path is empty"},
		{Up, ".spec", nil, "the whole .spec cannot be set"},
		{Down, ".status", nil, "the whole .status cannot be set"},
		{Up, ".metadata.labels.x", nil, "not .metadata"},
		{Up, ".metadata", nil, "not .metadata"},
		{Down, ".metadata.annotations.a", nil, "not .metadata"},
		{Up, ".apiVersion", nil, "not .apiVersion"},
		{Up, ".kind", nil, "not .kind"},
		{Up, ".status.ready", nil, "up rules may only change .spec; .status belongs to down rules"},
		{Down, ".spec.a", nil, "down rules may only change .status; .spec belongs to up rules"},
		{Up, ".spec.items[0].name", nil, "list indexes, wildcards and brackets"},
		{Up, ".spec.items[*]", nil, "list indexes, wildcards and brackets"},
		{Up, ".spec.*", nil, "list indexes, wildcards and brackets"},
		{Up, "spec.a", nil, "must start with a dot"},
		{Up, ".spec.", nil, "empty field name"},
		{Up, ".spec..a", nil, "empty field name"},
		{Up, ".spec.9a", nil, `"9a" is not a field name`},
		{Up, ".spec.a b", nil, `"a b" is not a field name`},
		{Up, ".spec.a/b", nil, `"a/b" is not a field name`},
		{Up, ".spec.ä", nil, `"ä" is not a field name`},
		{Up, ".Spec.a", nil, "not .Spec"},
	} {
		fields, err := parsePath(tc.dir, tc.path)
		switch {
		case tc.fields != nil && (err != nil || !slices.Equal(fields, tc.fields)):
			t.Errorf("%s %q: got %q, %v; want %q", tc.dir, tc.path, fields, err, tc.fields)
		case tc.fields == nil && err == nil:
			t.Errorf("%s %q: accepted as %q, want refused", tc.dir, tc.path, fields)
		case tc.fields == nil && !strings.Contains(err.Error(), tc.says):
			t.Errorf("%s %q: error %q does not say %q", tc.dir, tc.path, err, tc.says)
		}
	}
}
