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
	"regexp"
	"strings"
)

// fieldName is one path segment, the same grammar as a relatedResources
// fieldPath (api/core/v1alpha1 binding_types.go).
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// root is the one top-level field rules of a direction may change: the
// spec of the provider copy going up, the status going down. Everything
// else (metadata with kbind's markers, name and namespace, apiVersion,
// kind) is out of reach by construction.
func (d Direction) root() string {
	if d == Down {
		return "status"
	}
	return "spec"
}

// parsePath checks a rule path against the grammar of its direction,
//
//	up:   ^[.]spec([.][A-Za-z_][A-Za-z0-9_-]*)+$
//	down: ^[.]status([.][A-Za-z_][A-Za-z0-9_-]*)+$
//
// and returns its field names, root included (["spec", "a", "b"] for
// .spec.a.b). The error says what is wrong in words an operator can act on.
func parsePath(dir Direction, path string) ([]string, error) {
	switch {
	case path == "":
		return nil, errors.New("path is empty; name a field such as ." + dir.root() + ".x")
	case strings.ContainsAny(path, "[]*"):
		return nil, errors.New("list indexes, wildcards and brackets are not supported; a path is a dotted list of field names such as ." + dir.root() + ".a.b")
	case !strings.HasPrefix(path, "."):
		return nil, fmt.Errorf("path must start with a dot, as in .%s", path)
	}
	fields := strings.Split(path[1:], ".")
	if fields[0] != dir.root() {
		return nil, outsideRoot(dir, fields[0])
	}
	if len(fields) == 1 {
		return nil, fmt.Errorf("the whole .%s cannot be set or deleted; name a field under it, such as .%s.x", dir.root(), dir.root())
	}
	for _, f := range fields[1:] {
		if !fieldName.MatchString(f) {
			return nil, badField(f)
		}
	}
	return fields, nil
}

// outsideRoot explains why a path outside the direction's root is refused.
func outsideRoot(dir Direction, top string) error {
	other := Up
	if dir == Up {
		other = Down
	}
	if top == other.root() {
		return fmt.Errorf("%s rules may only change .%s; .%s belongs to %s rules", dir, dir.root(), top, other)
	}
	return fmt.Errorf("%s rules may only change fields under .%s, not .%s (metadata, name, namespace, apiVersion and kind are kbind's)", dir, dir.root(), top)
}

// badField explains why one segment is not a field name.
func badField(f string) error {
	if f == "" {
		return errors.New("path has an empty field name (two dots in a row, or a trailing dot)")
	}
	return fmt.Errorf("%q is not a field name: it must start with a letter or underscore and hold only letters, digits, _ and -", f)
}

// pathString renders a parsed path as written in a rule.
func pathString(fields []string) string {
	return "." + strings.Join(fields, ".")
}
