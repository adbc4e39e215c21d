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

package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CompareCRDs compares the baseline's CRDs (before) with the working tree's
// (after), both keyed by CRD name, and returns the changes ordered by CRD name.
// A CRD that is gone loses every version it served.
func CompareCRDs(before, after map[string]*apiextensionsv1.CustomResourceDefinition) []Change {
	var changes []Change
	for _, name := range sortedKeys(before) {
		n, ok := after[name]
		if !ok {
			n = &apiextensionsv1.CustomResourceDefinition{}
			n.Name = name
		}
		changes = append(changes, CompareCRD(before[name], n)...)
	}
	for _, name := range sortedKeys(after) {
		if _, ok := before[name]; !ok {
			changes = append(changes, Change{Message: name + ": CRD added"})
		}
	}
	return changes
}

// CompareCRD compares one CRD's versions: a served version that is gone or no
// longer served is breaking, and so is any breaking change of the
// openAPIV3Schema of a version both have (see schemaWalker.compare).
func CompareCRD(before, after *apiextensionsv1.CustomResourceDefinition) []Change {
	var changes []Change
	for _, bv := range before.Spec.Versions {
		prefix := before.Name + " " + bv.Name
		av := findVersion(after, bv.Name)
		switch {
		case av == nil && bv.Served:
			changes = append(changes, Change{Message: prefix + ": served version removed", Breaking: true})
			continue
		case av == nil:
			continue
		case bv.Served && !av.Served:
			changes = append(changes, Change{Message: prefix + ": no longer served", Breaking: true})
		}
		w := &schemaWalker{prefix: prefix}
		w.compare("", versionSchema(bv), versionSchema(*av))
		changes = append(changes, w.changes...)
	}
	for _, av := range after.Spec.Versions {
		if findVersion(before, av.Name) == nil {
			changes = append(changes, Change{Message: after.Name + " " + av.Name + ": version added"})
		}
	}
	return changes
}

// schemaWalker walks two schemas of one CRD version side by side and
// collects the changes, each named by its JSON path under prefix.
type schemaWalker struct {
	prefix  string
	changes []Change
}

func (w *schemaWalker) add(path string, breaking bool, format string, args ...any) {
	if path == "" {
		path = "."
	}
	msg := fmt.Sprintf("%s: %s: %s", w.prefix, path, fmt.Sprintf(format, args...))
	w.changes = append(w.changes, Change{Message: msg, Breaking: breaking})
}

// compare walks properties, items and additionalProperties. Breaking: a
// schema that is gone, a changed type, a newly required property, an enum
// that lost a value or appeared. A after subtree is reported once, where it
// starts, and not walked: nothing below it existed before.
func (w *schemaWalker) compare(path string, before, after *apiextensionsv1.JSONSchemaProps) {
	switch {
	case before == nil && after == nil:
		return
	case before == nil:
		w.add(path, false, "added")
		return
	case after == nil:
		w.add(path, true, "removed")
		return
	case before.Type != after.Type:
		w.add(path, true, "type changed from %s to %s", typeName(before.Type), typeName(after.Type))
		return
	}
	w.compareEnum(path, before.Enum, after.Enum)
	w.compareRequired(path, before.Required, after.Required)
	for _, name := range unionKeys(before.Properties, after.Properties) {
		w.compare(path+"."+name, property(before.Properties, name), property(after.Properties, name))
	}
	w.compare(path+"[*]", itemsSchema(before.Items), itemsSchema(after.Items))
	w.compare(path+"{*}", additionalSchema(before.AdditionalProperties), additionalSchema(after.AdditionalProperties))
}

func (w *schemaWalker) compareEnum(path string, before, after []apiextensionsv1.JSON) {
	beforeValues, afterValues := enumValues(before), enumValues(after)
	switch {
	case len(after) == 0:
		if len(before) > 0 {
			w.add(path, false, "enum removed (any value allowed)")
		}
	case len(before) == 0:
		w.add(path, true, "enum added (only %s allowed)", strings.Join(afterValues, ", "))
	default:
		for _, v := range beforeValues {
			if !slices.Contains(afterValues, v) {
				w.add(path, true, "enum value %s removed", v)
			}
		}
		for _, v := range afterValues {
			if !slices.Contains(beforeValues, v) {
				w.add(path, false, "enum value %s added", v)
			}
		}
	}
}

func (w *schemaWalker) compareRequired(path string, before, after []string) {
	for _, name := range after {
		if !slices.Contains(before, name) {
			w.add(path+"."+name, true, "newly required")
		}
	}
	for _, name := range before {
		if !slices.Contains(after, name) {
			w.add(path+"."+name, false, "no longer required")
		}
	}
}

func findVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func versionSchema(v apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

func property(props map[string]apiextensionsv1.JSONSchemaProps, name string) *apiextensionsv1.JSONSchemaProps {
	p, ok := props[name]
	if !ok {
		return nil
	}
	return &p
}

func itemsSchema(items *apiextensionsv1.JSONSchemaPropsOrArray) *apiextensionsv1.JSONSchemaProps {
	if items == nil {
		return nil
	}
	return items.Schema
}

func additionalSchema(ap *apiextensionsv1.JSONSchemaPropsOrBool) *apiextensionsv1.JSONSchemaProps {
	if ap == nil {
		return nil
	}
	return ap.Schema
}

func typeName(t string) string {
	if t == "" {
		return "(none)"
	}
	return t
}

// enumValues renders each value as compact JSON, so that "a" and 1 compare
// by value and print unambiguously.
func enumValues(values []apiextensionsv1.JSON) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v.Raw); err != nil {
			out = append(out, string(v.Raw))
			continue
		}
		out = append(out, buf.String())
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := sortedKeys(a)
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
