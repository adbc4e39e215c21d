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

package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Incompatibility returns "" when candidate (the desired consumer CRD
// computed from another provider's schema) may serve the objects of the
// installed consumer CRD installed, else the first difference, phrased for
// an operator as "<what>: <installed value> here (Connection <owner>),
// <candidate value> on the provider of Connection <candidateConn>", e.g.
// `version v1: .properties.spec.properties.size.type: integer here
// (Connection "west"), string on the provider of Connection "east"`.
// A nil installed CRD (none installed) is compatible with anything; a nil
// candidate (no schema) is not.
//
// The two must be structurally identical. In this order it compares:
// spec.group; names.kind; names.plural; scope; the set of served versions'
// names; the storage version's name; then, for each served version in
// name order, the presence of the status and of the scale subresource
// (not the scale's paths), and the openAPIV3Schema.
//
// Schemas are walked node by node; a path is the node's place in the
// openAPIV3Schema, in its JSON keys (".properties.spec.items",
// `.properties["a.b"]`, ".allOf[1]"; "" is the root). At each node it
// compares, in this order: type, format, nullable,
// x-kubernetes-preserve-unknown-fields (unset is false),
// x-kubernetes-int-or-string, x-kubernetes-embedded-resource,
// x-kubernetes-list-type, x-kubernetes-list-map-keys (as a set),
// x-kubernetes-map-type, required (as a set), enum (as a set of JSON
// values), default (as JSON: key order, spacing and 1 vs 1.0 do not
// matter), minimum, exclusiveMinimum, maximum, exclusiveMaximum,
// minLength, maxLength, pattern, minItems, maxItems, uniqueItems,
// minProperties, maxProperties, multipleOf, x-kubernetes-validations (as a
// set of rule and optionalOldSelf: what an object must satisfy), and the
// keywords a structural schema forbids (id, $schema, $ref,
// patternProperties, dependencies, additionalItems, definitions, as JSON);
// then properties (by sorted name, one only on one side named "absent"
// or "present"), items, additionalProperties, allOf, anyOf, oneOf and not,
// recursively.
//
// It ignores whatever does not decide which objects are valid or how
// they are stored: metadata (labels, annotations, kbind's schema hash and
// connection), status, conversion, names' singular, listKind, shortNames
// and categories, unserved versions, deprecated and deprecationWarning,
// additionalPrinterColumns, selectableFields, and in schemas description,
// title, example and externalDocs, and the message, messageExpression,
// reason and fieldPath of x-kubernetes-validations (they only word the
// refusal). Inputs are never modified.
func Incompatibility(installed, candidate *apiextensionsv1.CustomResourceDefinition, owner, candidateConn string) string {
	if installed == nil {
		return ""
	}
	d := crdDiff(installed, candidate)
	if d == nil {
		return ""
	}
	here := ""
	if owner != "" {
		here = fmt.Sprintf(" (Connection %q)", owner)
	}
	return fmt.Sprintf("%s: %s here%s, %s on the provider of Connection %q", d.what, d.here, here, d.there, candidateConn)
}

// difference is the first thing two CRDs disagree on: what it is, and
// its rendering on the installed CRD (here) and the candidate (there).
type difference struct {
	what, here, there string
}

// differs is a difference when the renderings differ, else nil.
func differs(what, here, there string) *difference {
	if here == there {
		return nil
	}
	return &difference{what: what, here: here, there: there}
}

// presence is the difference when only one side has something.
func presence(what string, here, there bool) *difference {
	if here == there {
		return nil
	}
	return &difference{what: what, here: present(here), there: present(there)}
}

func present(p bool) string {
	if p {
		return "present"
	}
	return "absent"
}

func crdDiff(installed, candidate *apiextensionsv1.CustomResourceDefinition) *difference {
	if candidate == nil {
		return &difference{what: "schema", here: "present", there: "absent"}
	}
	a, b := &installed.Spec, &candidate.Spec
	for _, d := range []*difference{
		differs("group", orUnset(a.Group), orUnset(b.Group)),
		differs("kind", orUnset(a.Names.Kind), orUnset(b.Names.Kind)),
		differs("plural", orUnset(a.Names.Plural), orUnset(b.Names.Plural)),
		differs("scope", orUnset(string(a.Scope)), orUnset(string(b.Scope))),
		differs("served versions", list(servedVersions(a)), list(servedVersions(b))),
		differs("storage version", orUnset(storageVersion(a)), orUnset(storageVersion(b))),
	} {
		if d != nil {
			return d
		}
	}
	for _, name := range servedVersions(a) {
		if d := versionDiff(servedVersion(a, name), servedVersion(b, name)); d != nil {
			d.what = "version " + name + ": " + d.what
			return d
		}
	}
	return nil
}

// servedVersions is the sorted names of spec's served versions.
func servedVersions(spec *apiextensionsv1.CustomResourceDefinitionSpec) []string {
	var names []string
	for _, v := range spec.Versions {
		if v.Served {
			names = append(names, v.Name)
		}
	}
	sort.Strings(names)
	return names
}

func servedVersion(spec *apiextensionsv1.CustomResourceDefinitionSpec, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range spec.Versions {
		if spec.Versions[i].Served && spec.Versions[i].Name == name {
			return &spec.Versions[i]
		}
	}
	return nil
}

func storageVersion(spec *apiextensionsv1.CustomResourceDefinitionSpec) string {
	for _, v := range spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// versionDiff compares two served versions of the same name (crdDiff
// checked that both sides serve it; nil is guarded all the same).
func versionDiff(a, b *apiextensionsv1.CustomResourceDefinitionVersion) *difference {
	if a == nil || b == nil {
		return presence("version", a != nil, b != nil)
	}
	if d := presence("status subresource", hasStatus(a), hasStatus(b)); d != nil {
		return d
	}
	if d := presence("scale subresource", hasScale(a), hasScale(b)); d != nil {
		return d
	}
	d := schemaDiff("", openAPISchema(a), openAPISchema(b))
	if d != nil && d.what == "" {
		d.what = "schema"
	}
	return d
}

func hasStatus(v *apiextensionsv1.CustomResourceDefinitionVersion) bool {
	return v.Subresources != nil && v.Subresources.Status != nil
}

func hasScale(v *apiextensionsv1.CustomResourceDefinitionVersion) bool {
	return v.Subresources != nil && v.Subresources.Scale != nil
}

func openAPISchema(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// schemaDiff is the first difference between two schema nodes at path,
// their own keywords before their children's.
func schemaDiff(path string, a, b *apiextensionsv1.JSONSchemaProps) *difference {
	if a == nil || b == nil {
		return presence(path, a != nil, b != nil)
	}
	for _, k := range keywords {
		if d := differs(path+"."+k.name, k.render(a), k.render(b)); d != nil {
			return d
		}
	}
	if d := propertiesDiff(path, a.Properties, b.Properties); d != nil {
		return d
	}
	if d := itemsDiff(path+".items", a.Items, b.Items); d != nil {
		return d
	}
	if d := additionalPropertiesDiff(path+".additionalProperties", a.AdditionalProperties, b.AdditionalProperties); d != nil {
		return d
	}
	for _, j := range []struct {
		name string
		a, b []apiextensionsv1.JSONSchemaProps
	}{{"allOf", a.AllOf, b.AllOf}, {"anyOf", a.AnyOf, b.AnyOf}, {"oneOf", a.OneOf, b.OneOf}} {
		if d := schemasDiff(path+"."+j.name, j.a, j.b); d != nil {
			return d
		}
	}
	return schemaDiff(path+".not", a.Not, b.Not)
}

// keyword is a schema node's own keyword, rendered so that two nodes
// agree on it exactly when their renderings are equal.
type keyword struct {
	name   string
	render func(*apiextensionsv1.JSONSchemaProps) string
}

// keywords are the compared keywords of a node, in the order they are
// compared (Incompatibility's doc lists them).
var keywords = []keyword{
	{"type", func(p *apiextensionsv1.JSONSchemaProps) string { return orUnset(p.Type) }},
	{"format", func(p *apiextensionsv1.JSONSchemaProps) string { return orUnset(p.Format) }},
	{"nullable", func(p *apiextensionsv1.JSONSchemaProps) string { return strconv.FormatBool(p.Nullable) }},
	{"x-kubernetes-preserve-unknown-fields", func(p *apiextensionsv1.JSONSchemaProps) string {
		return strconv.FormatBool(p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields)
	}},
	{"x-kubernetes-int-or-string", func(p *apiextensionsv1.JSONSchemaProps) string { return strconv.FormatBool(p.XIntOrString) }},
	{"x-kubernetes-embedded-resource", func(p *apiextensionsv1.JSONSchemaProps) string { return strconv.FormatBool(p.XEmbeddedResource) }},
	{"x-kubernetes-list-type", func(p *apiextensionsv1.JSONSchemaProps) string { return orUnset(deref(p.XListType)) }},
	{"x-kubernetes-list-map-keys", func(p *apiextensionsv1.JSONSchemaProps) string { return quotedSet(p.XListMapKeys) }},
	{"x-kubernetes-map-type", func(p *apiextensionsv1.JSONSchemaProps) string { return orUnset(deref(p.XMapType)) }},
	{"required", func(p *apiextensionsv1.JSONSchemaProps) string { return quotedSet(p.Required) }},
	{"enum", renderEnum},
	{"default", func(p *apiextensionsv1.JSONSchemaProps) string { return renderJSON(p.Default) }},
	{"minimum", func(p *apiextensionsv1.JSONSchemaProps) string { return renderFloat(p.Minimum) }},
	{"exclusiveMinimum", func(p *apiextensionsv1.JSONSchemaProps) string { return strconv.FormatBool(p.ExclusiveMinimum) }},
	{"maximum", func(p *apiextensionsv1.JSONSchemaProps) string { return renderFloat(p.Maximum) }},
	{"exclusiveMaximum", func(p *apiextensionsv1.JSONSchemaProps) string { return strconv.FormatBool(p.ExclusiveMaximum) }},
	{"minLength", func(p *apiextensionsv1.JSONSchemaProps) string { return renderInt(p.MinLength) }},
	{"maxLength", func(p *apiextensionsv1.JSONSchemaProps) string { return renderInt(p.MaxLength) }},
	{"pattern", func(p *apiextensionsv1.JSONSchemaProps) string { return quotedOrUnset(p.Pattern) }},
	{"minItems", func(p *apiextensionsv1.JSONSchemaProps) string { return renderInt(p.MinItems) }},
	{"maxItems", func(p *apiextensionsv1.JSONSchemaProps) string { return renderInt(p.MaxItems) }},
	{"uniqueItems", func(p *apiextensionsv1.JSONSchemaProps) string { return strconv.FormatBool(p.UniqueItems) }},
	{"minProperties", func(p *apiextensionsv1.JSONSchemaProps) string { return renderInt(p.MinProperties) }},
	{"maxProperties", func(p *apiextensionsv1.JSONSchemaProps) string { return renderInt(p.MaxProperties) }},
	{"multipleOf", func(p *apiextensionsv1.JSONSchemaProps) string { return renderFloat(p.MultipleOf) }},
	{"x-kubernetes-validations", renderRules},
	{"id", func(p *apiextensionsv1.JSONSchemaProps) string { return quotedOrUnset(p.ID) }},
	{"$schema", func(p *apiextensionsv1.JSONSchemaProps) string { return quotedOrUnset(string(p.Schema)) }},
	{"$ref", func(p *apiextensionsv1.JSONSchemaProps) string { return quotedOrUnset(deref(p.Ref)) }},
	{"patternProperties", func(p *apiextensionsv1.JSONSchemaProps) string {
		return renderAny(len(p.PatternProperties) == 0, p.PatternProperties)
	}},
	{"dependencies", func(p *apiextensionsv1.JSONSchemaProps) string {
		return renderAny(len(p.Dependencies) == 0, p.Dependencies)
	}},
	{"additionalItems", func(p *apiextensionsv1.JSONSchemaProps) string {
		return renderAny(p.AdditionalItems == nil, p.AdditionalItems)
	}},
	{"definitions", func(p *apiextensionsv1.JSONSchemaProps) string {
		return renderAny(len(p.Definitions) == 0, p.Definitions)
	}},
}

// propertiesDiff compares properties by sorted name.
func propertiesDiff(path string, a, b map[string]apiextensionsv1.JSONSchemaProps) *difference {
	names := make([]string, 0, len(a)+len(b))
	for name := range a {
		names = append(names, name)
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		pa, inA := a[name]
		pb, inB := b[name]
		child := path + ".properties" + pathKey(name)
		if !inA || !inB {
			return presence(child, inA, inB)
		}
		if d := schemaDiff(child, &pa, &pb); d != nil {
			return d
		}
	}
	return nil
}

func itemsDiff(path string, a, b *apiextensionsv1.JSONSchemaPropsOrArray) *difference {
	if a == nil || b == nil {
		return presence(path, a != nil, b != nil)
	}
	if d := schemaDiff(path, a.Schema, b.Schema); d != nil {
		return d
	}
	return schemasDiff(path, a.JSONSchemas, b.JSONSchemas)
}

func additionalPropertiesDiff(path string, a, b *apiextensionsv1.JSONSchemaPropsOrBool) *difference {
	if d := differs(path, renderOrBool(a), renderOrBool(b)); d != nil {
		return d
	}
	if a == nil || b == nil {
		return nil
	}
	return schemaDiff(path, a.Schema, b.Schema)
}

// renderOrBool is what additionalProperties allows: unset, false, true,
// or a schema (compared further by additionalPropertiesDiff).
func renderOrBool(p *apiextensionsv1.JSONSchemaPropsOrBool) string {
	switch {
	case p == nil:
		return "unset"
	case p.Schema != nil:
		return "a schema"
	default:
		return strconv.FormatBool(p.Allows)
	}
}

// schemasDiff compares lists of schemas (allOf, anyOf, oneOf, an items
// array) element by element.
func schemasDiff(path string, a, b []apiextensionsv1.JSONSchemaProps) *difference {
	if d := differs(path, count(len(a)), count(len(b))); d != nil {
		return d
	}
	for i := range a {
		if d := schemaDiff(fmt.Sprintf("%s[%d]", path, i), &a[i], &b[i]); d != nil {
			return d
		}
	}
	return nil
}

func count(n int) string {
	switch n {
	case 0:
		return "none"
	case 1:
		return "1 schema"
	default:
		return strconv.Itoa(n) + " schemas"
	}
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// pathKey is a property's step in a path: ".name", or `["a.b"]` for a
// name a dot would make ambiguous.
func pathKey(name string) string {
	if plainName.MatchString(name) {
		return "." + name
	}
	return "[" + strconv.Quote(name) + "]"
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

func quotedOrUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return strconv.Quote(s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// quotedSet renders a set of strings: sorted, quoted, "none" when empty.
func quotedSet(items []string) string {
	quoted := make([]string, 0, len(items))
	for _, s := range items {
		quoted = append(quoted, strconv.Quote(s))
	}
	sort.Strings(quoted)
	return list(quoted)
}

func renderFloat(f *float64) string {
	if f == nil {
		return "unset"
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

func renderInt(i *int64) string {
	if i == nil {
		return "unset"
	}
	return strconv.FormatInt(*i, 10)
}

// renderEnum renders enum as the sorted set of its canonical JSON values.
func renderEnum(p *apiextensionsv1.JSONSchemaProps) string {
	values := make([]string, 0, len(p.Enum))
	for i := range p.Enum {
		values = append(values, canonicalJSON(p.Enum[i].Raw))
	}
	sort.Strings(values)
	return list(values)
}

func renderJSON(j *apiextensionsv1.JSON) string {
	if j == nil || len(j.Raw) == 0 {
		return "unset"
	}
	return canonicalJSON(j.Raw)
}

// renderRules renders the rules of x-kubernetes-validations: the sorted
// set of each rule, quoted, marked when its oldSelf is optional.
func renderRules(p *apiextensionsv1.JSONSchemaProps) string {
	rules := make([]string, 0, len(p.XValidations))
	for _, r := range p.XValidations {
		s := strconv.Quote(r.Rule)
		if r.OptionalOldSelf != nil && *r.OptionalOldSelf {
			s += " (optionalOldSelf)"
		}
		rules = append(rules, s)
	}
	sort.Strings(rules)
	return list(rules)
}

// renderAny renders a keyword a structural schema forbids as JSON.
func renderAny(unset bool, v any) string {
	if unset {
		return "unset"
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return canonicalJSON(data)
}

// canonicalJSON is raw with object keys sorted, no spacing and numbers
// in one form (1.0 is 1); raw itself when it is not JSON.
func canonicalJSON(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	data, err := json.Marshal(canonicalNumbers(v))
	if err != nil {
		return string(raw)
	}
	return string(data)
}

// canonicalNumbers rewrites every number of a decoded JSON value into one
// form: an integer when it is one, else the shortest float.
func canonicalNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		f, err := v.Float64()
		if err != nil {
			return v
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case map[string]any:
		for k, e := range v {
			v[k] = canonicalNumbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = canonicalNumbers(e)
		}
		return v
	default:
		return v
	}
}
