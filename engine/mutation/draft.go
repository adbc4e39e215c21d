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
	"maps"
	"strings"
)

// draft is the target as the rules applied so far leave it, built without
// touching the target: the top level and every map on a written path are
// copied the first time they are written below (copy on write), so an
// error halfway leaves the target as it was and committing is a top-level
// copy. Nothing else is copied: untouched subtrees stay shared.
type draft struct {
	root map[string]any
	// owned holds the paths (fields joined by ".") of the maps this draft
	// created or copied, which it may therefore change in place. A map
	// written later at such a path is fresh too (toJSON copies every
	// value), so an entry never goes stale.
	owned map[string]bool
}

// newDraft starts a draft of target.
func newDraft(target map[string]any) *draft {
	return &draft{root: maps.Clone(target), owned: map[string]bool{}}
}

// set writes value at fields, creating missing intermediate maps. A
// non-map on the way is an error naming it.
func (d *draft) set(fields []string, value any) error {
	parent, err := d.parent(fields, true)
	if err != nil {
		return err
	}
	parent[fields[len(fields)-1]] = value
	return nil
}

// remove deletes the field at fields. An absent field, or a non-map on the
// way (which cannot hold it), leaves nothing to delete.
func (d *draft) remove(fields []string) {
	parent, err := d.parent(fields, false)
	if err != nil || parent == nil {
		return
	}
	delete(parent, fields[len(fields)-1])
}

// parent returns the draft's own copy of the map holding the last field,
// copying every map on the way. Missing maps are created when create is
// set; otherwise a missing map returns nil.
func (d *draft) parent(fields []string, create bool) (map[string]any, error) {
	m := d.root
	for i, f := range fields[:len(fields)-1] {
		key := strings.Join(fields[:i+1], ".")
		next, err := d.child(m, f, key, create)
		if err != nil || next == nil {
			return nil, err
		}
		m = next
	}
	return m, nil
}

// child returns the draft's own copy of m[f], the map at path key.
func (d *draft) child(m map[string]any, f, key string, create bool) (map[string]any, error) {
	v, found := m[f]
	if !found {
		if !create {
			return nil, nil
		}
		c := map[string]any{}
		m[f], d.owned[key] = c, true
		return c, nil
	}
	c, isMap := v.(map[string]any)
	if !isMap {
		return nil, fmt.Errorf(".%s is %s, not an object, so no field can be set below it", key, describe(v))
	}
	if !d.owned[key] {
		if c = maps.Clone(c); c == nil {
			c = map[string]any{} // a typed nil map cannot be written to
		}
		m[f], d.owned[key] = c, true
	}
	return c, nil
}

// describe names a JSON value's kind without its content (which may be
// confidential).
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case int64, int32, int, float64, float32:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// commit writes the draft into target. Rules never delete a top-level
// field (a path names at least one field below .spec or .status), so
// copying the draft's top level over the target's is the whole change.
func (d *draft) commit(target map[string]any) {
	maps.Copy(target, d.root)
}
