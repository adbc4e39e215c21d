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

// Package fieldpath parses and reads the field paths of related resources
// by reference (relatedResources[].reference.fieldPath): a dotted path of
// field names under .spec, such as ".spec.writeConnectionSecretToRef.name".
// The API server validates the same syntax; parsing again here keeps an
// object stored before that validation from doing anything surprising.
package fieldpath

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Path is a parsed field path: the field names from the object's root,
// the first one always "spec".
type Path []string

// String is the path as written: ".spec.a.b".
func (p Path) String() string { return "." + strings.Join(p, ".") }

// Parse parses a dotted path of field names under .spec. It refuses list
// indexes, wildcards, brackets, filters, empty segments and paths outside
// .spec, with a message that says what is allowed.
func Parse(path string) (Path, error) {
	const hint = "a dotted path of field names under .spec, such as .spec.writeConnectionSecretToRef.name"
	rest, ok := strings.CutPrefix(path, ".")
	if !ok {
		return nil, fmt.Errorf("fieldPath %q must start with \".\": use %s", path, hint)
	}
	parts := strings.Split(rest, ".")
	if parts[0] != "spec" || len(parts) < 2 {
		return nil, fmt.Errorf("fieldPath %q must name a field under .spec: use %s", path, hint)
	}
	for _, p := range parts[1:] {
		if !validField(p) {
			return nil, fmt.Errorf("fieldPath %q has an invalid segment %q (only field names: letters, digits, _ and -, not starting with a digit or -; no list indexes, wildcards or brackets): use %s", path, p, hint)
		}
	}
	return Path(parts), nil
}

func validField(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && (r == '-' || (r >= '0' && r <= '9')):
		default:
			return false
		}
	}
	return true
}

// Name reads the object name the field at p holds: "" when the field (or
// an object on the way) is absent, null or empty — the object names
// nothing. A field that is not a string, or a string that is not a valid
// object name, is an error: the object names something kbind cannot copy.
func Name(obj *unstructured.Unstructured, p Path) (string, error) {
	if obj == nil || len(p) == 0 {
		return "", nil
	}
	var cur any = obj.Object
	for i, f := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			if cur == nil {
				return "", nil
			}
			return "", fmt.Errorf("%s is not an object", Path(p[:i]))
		}
		if cur, ok = m[f]; !ok || cur == nil {
			return "", nil
		}
	}
	s, ok := cur.(string)
	if !ok {
		return "", fmt.Errorf("%s is a %T, not a string", p, cur)
	}
	if s == "" {
		return "", nil
	}
	if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
		return "", fmt.Errorf("%s holds %q, which is not a valid object name: %s", p, s, strings.Join(errs, "; "))
	}
	return s, nil
}

// Set sets the string field at p of obj to value, when the field is a
// non-empty string (it leaves anything else untouched).
func Set(obj *unstructured.Unstructured, p Path, value string) {
	if obj == nil || len(p) == 0 {
		return
	}
	var cur any = obj.Object
	for _, f := range p[:len(p)-1] {
		m, ok := cur.(map[string]any)
		if !ok {
			return
		}
		cur = m[f]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return
	}
	if s, ok := m[p[len(p)-1]].(string); ok && s != "" {
		m[p[len(p)-1]] = value
	}
}
