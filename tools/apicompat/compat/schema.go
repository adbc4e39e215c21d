package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CompareCRDs compares the baseline's CRDs (old) with the working tree's
// (new), both keyed by CRD name, and returns the changes ordered by CRD name.
// A CRD that is gone loses every version it served.
func CompareCRDs(old, new map[string]*apiextensionsv1.CustomResourceDefinition) []Change {
	var changes []Change
	for _, name := range sortedKeys(old) {
		n, ok := new[name]
		if !ok {
			n = &apiextensionsv1.CustomResourceDefinition{}
			n.Name = name
		}
		changes = append(changes, CompareCRD(old[name], n)...)
	}
	for _, name := range sortedKeys(new) {
		if _, ok := old[name]; !ok {
			changes = append(changes, Change{Message: name + ": CRD added"})
		}
	}
	return changes
}

// CompareCRD compares one CRD's versions: a served version that is gone or no
// longer served is breaking, and so is any breaking change of the
// openAPIV3Schema of a version both have (see compareSchema).
func CompareCRD(old, new *apiextensionsv1.CustomResourceDefinition) []Change {
	var changes []Change
	for _, ov := range old.Spec.Versions {
		prefix := old.Name + " " + ov.Name
		nv := findVersion(new, ov.Name)
		switch {
		case nv == nil && ov.Served:
			changes = append(changes, Change{Message: prefix + ": served version removed", Breaking: true})
			continue
		case nv == nil:
			continue
		case ov.Served && !nv.Served:
			changes = append(changes, Change{Message: prefix + ": no longer served", Breaking: true})
		}
		w := &schemaWalker{prefix: prefix}
		w.compare("", versionSchema(ov), versionSchema(*nv))
		changes = append(changes, w.changes...)
	}
	for _, nv := range new.Spec.Versions {
		if findVersion(old, nv.Name) == nil {
			changes = append(changes, Change{Message: new.Name + " " + nv.Name + ": version added"})
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
// that lost a value or appeared. A new subtree is reported once, where it
// starts, and not walked: nothing below it existed before.
func (w *schemaWalker) compare(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	switch {
	case old == nil && new == nil:
		return
	case old == nil:
		w.add(path, false, "added")
		return
	case new == nil:
		w.add(path, true, "removed")
		return
	case old.Type != new.Type:
		w.add(path, true, "type changed from %s to %s", typeName(old.Type), typeName(new.Type))
		return
	}
	w.compareEnum(path, old.Enum, new.Enum)
	w.compareRequired(path, old.Required, new.Required)
	for _, name := range unionKeys(old.Properties, new.Properties) {
		w.compare(path+"."+name, property(old.Properties, name), property(new.Properties, name))
	}
	w.compare(path+"[*]", itemsSchema(old.Items), itemsSchema(new.Items))
	w.compare(path+"{*}", additionalSchema(old.AdditionalProperties), additionalSchema(new.AdditionalProperties))
}

func (w *schemaWalker) compareEnum(path string, old, new []apiextensionsv1.JSON) {
	oldValues, newValues := enumValues(old), enumValues(new)
	switch {
	case len(new) == 0:
		if len(old) > 0 {
			w.add(path, false, "enum removed (any value allowed)")
		}
	case len(old) == 0:
		w.add(path, true, "enum added (only %s allowed)", strings.Join(newValues, ", "))
	default:
		for _, v := range oldValues {
			if !slices.Contains(newValues, v) {
				w.add(path, true, "enum value %s removed", v)
			}
		}
		for _, v := range newValues {
			if !slices.Contains(oldValues, v) {
				w.add(path, false, "enum value %s added", v)
			}
		}
	}
}

func (w *schemaWalker) compareRequired(path string, old, new []string) {
	for _, name := range new {
		if !slices.Contains(old, name) {
			w.add(path+"."+name, true, "newly required")
		}
	}
	for _, name := range old {
		if !slices.Contains(new, name) {
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
