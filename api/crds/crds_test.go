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

package crds

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// field is what the API reference says about one schema property (the
// defaults, enums and validation rules docs/connections.md and
// docs/bindings.md describe).
type field struct {
	path        string // dot path below openAPIV3Schema; [] steps into items
	typ         string
	def         string // JSON of the default, "" for none
	enum        []string
	minLength   *int64
	minItems    *int64
	required    bool
	listType    string
	listMapKeys []string
	rules       []string
}

func i64(v int64) *int64 { return &v }

var connectionFields = []field{
	{path: "spec.kubeconfigSecretRef", typ: "object", required: true, rules: []string{"self == oldSelf"}},
	{path: "spec.kubeconfigSecretRef.namespace", typ: "string", required: true, minLength: i64(1)},
	{path: "spec.kubeconfigSecretRef.name", typ: "string", required: true, minLength: i64(1)},
	{path: "spec.kubeconfigSecretRef.key", typ: "string", def: `"kubeconfig"`},
	{path: "spec.schema", typ: "object", def: `{}`},
	{path: "spec.schema.source", typ: "string", def: `"Auto"`, enum: []string{"Auto", "CRD", "OpenAPI"}},
	{path: "spec.schema.pullPolicy", typ: "string", def: `"Bound"`, enum: []string{"Bound", "All", "None"}},
	{path: "spec.schema.updatePolicy", typ: "string", def: `"Always"`, enum: []string{"Always", "Once"}},
	{path: "spec.autoBind", typ: "boolean", def: `false`},
	{path: "spec.allowInsecure", typ: "array", listType: "set"},
	{path: "spec.allowInsecure[]", typ: "string", enum: []string{"SkipTLSVerify", "ProxyURL", "PlainHTTP"}},
	{path: "spec.isolation", typ: "object", def: `{"mode":"None"}`, rules: []string{
		"self == oldSelf",
		"self.mode == 'Namespace' ? has(self.__namespace__) : !has(self.__namespace__)",
		"self.mode == 'Prefixed' ? has(self.prefix) : !has(self.prefix)",
	}},
	{path: "spec.isolation.mode", typ: "string", def: `"None"`, enum: []string{"None", "Namespace", "Prefixed"}},
	{path: "spec.isolation.namespace", typ: "string", minLength: i64(1)},
	{path: "spec.isolation.prefix", typ: "string", minLength: i64(1)},
	{path: "spec.namespacedBindings", typ: "object", def: `{"from":"None"}`, rules: []string{
		"(has(self.from) && self.from == 'Selector') == has(self.selector)",
	}},
	{path: "spec.namespacedBindings.from", typ: "string", def: `"None"`, enum: []string{"None", "All", "Selector"}},
	{path: "spec.namespacedBindings.selector", typ: "object"},
	{path: "status", typ: "object", rules: []string{
		"!has(oldSelf.remoteClusterUID) || has(self.remoteClusterUID)",
		"!has(oldSelf.localClusterUID) || has(self.localClusterUID)",
	}},
	{path: "status.remoteClusterUID", typ: "string", rules: []string{"oldSelf == '' || self == oldSelf"}},
	{path: "status.localClusterUID", typ: "string", rules: []string{"oldSelf == '' || self == oldSelf"}},
	{path: "status.activeSchemaSource", typ: "string", enum: []string{"CRD", "OpenAPI"}},
	{path: "status.exportedAPIs", typ: "array", listType: "map", listMapKeys: []string{"name"}},
	{path: "status.exportedAPIs[].name", typ: "string", required: true},
	{path: "status.exportedAPIs[].group", typ: "string", required: true},
	{path: "status.exportedAPIs[].resource", typ: "string", required: true},
	{path: "status.exportedAPIs[].scope", typ: "string", required: true, enum: []string{"Namespaced", "Cluster"}},
	{path: "status.exportedAPIs[].versions", typ: "array", listType: "atomic"},
	{path: "status.conditions", typ: "array", listType: "map", listMapKeys: []string{"type"}},
	{path: "status.conditions[].observedGeneration", typ: "integer"},
}

var bindingFields = []field{
	{path: "spec", typ: "object", required: true, rules: []string{
		"!has(self.relatedResources) || self.relatedResources.all(r, !has(r.reference) || self.apis.exists(a, a.name == r.reference.api))",
	}},
	{path: "spec.connectionRef", typ: "object", required: true, rules: []string{"self == oldSelf"}},
	{path: "spec.connectionRef.name", typ: "string", required: true, minLength: i64(1)},
	{path: "spec.apis", typ: "array", required: true, minItems: i64(1), listType: "map", listMapKeys: []string{"name"}},
	{path: "spec.apis[].name", typ: "string", required: true, minLength: i64(1)},
	{path: "spec.conflictPolicy", typ: "string", def: `"Fail"`, enum: []string{"Fail", "Adopt"}},
	{path: "spec.relatedResources", typ: "array", listType: "atomic"},
	{path: "spec.relatedResources[]", typ: "object", rules: []string{
		"has(self.reference) || (has(self.selector) && ((has(self.selector.labelSelector) && ((has(self.selector.labelSelector.matchLabels) && size(self.selector.labelSelector.matchLabels) > 0) || (has(self.selector.labelSelector.matchExpressions) && size(self.selector.labelSelector.matchExpressions) > 0))) || (has(self.selector.names) && size(self.selector.names) > 0)))",
		"!has(self.reference) || !has(self.selector) || (!has(self.selector.labelSelector) && (!has(self.selector.names) || size(self.selector.names) == 0))",
	}},
	{path: "spec.relatedResources[].group", typ: "string", def: `""`, rules: []string{"self == ''"}},
	{path: "spec.relatedResources[].resource", typ: "string", required: true, enum: []string{"secrets", "configmaps"}},
	{path: "spec.relatedResources[].direction", typ: "string", required: true, enum: []string{"FromProvider", "FromConsumer"}},
	{path: "spec.relatedResources[].selector.labelSelector", typ: "object"},
	{path: "spec.relatedResources[].selector.names", typ: "array", listType: "set"},
	{path: "spec.relatedResources[].reference.api", typ: "string", required: true, minLength: i64(1)},
	{path: "spec.relatedResources[].reference.fieldPath", typ: "string", required: true, rules: []string{"self.matches('^[.]spec([.][A-Za-z_][A-Za-z0-9_-]*)+$')"}},
	{path: "status.boundAPIs", typ: "array", listType: "map", listMapKeys: []string{"name"}},
	{path: "status.boundAPIs[].name", typ: "string", required: true},
	{path: "status.boundAPIs[].crdHash", typ: "string"},
	{path: "status.boundAPIs[].conflictCount", typ: "integer"},
	{path: "status.boundAPIs[].instances.total", typ: "integer", required: true},
	{path: "status.boundAPIs[].instances.synced", typ: "integer", required: true},
	{path: "status.boundAPIs[].instances.pending", typ: "integer", required: true},
	{path: "status.boundAPIs[].instances.failed", typ: "integer", required: true},
	{path: "status.relatedResources.copies", typ: "integer", required: true},
	{path: "status.relatedResources.conflicts", typ: "integer", required: true},
	{path: "status.relatedResources.skipped", typ: "integer", required: true},
	{path: "status.conditions", typ: "array", listType: "map", listMapKeys: []string{"type"}},
}

type column struct{ name, path string }

var (
	connectionColumns = []column{
		{"Ready", `.status.conditions[?(@.type=="Ready")].status`},
		{"Source", ".status.activeSchemaSource"},
		{"Secret", ".spec.kubeconfigSecretRef.name"},
		{"Isolation", ".spec.isolation.mode"},
		{"Bindings From", ".spec.namespacedBindings.from"},
		{"Expires", ".status.credentials.expiresAt"},
		{"Age", ".metadata.creationTimestamp"},
	}
	bindingColumns = []column{
		{"Connection", ".spec.connectionRef.name"},
		{"Ready", `.status.conditions[?(@.type=="Ready")].status`},
		{"Conflicts", `.status.conditions[?(@.type=="Conflicts")].status`},
		{"Age", ".metadata.creationTimestamp"},
	}
)

func TestCRDsMatchSpec(t *testing.T) {
	all, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range all {
		byName[crd.Name] = crd
	}
	cases := []struct {
		name    string
		kind    string
		scope   apiextensionsv1.ResourceScope
		fields  []field
		columns []column
	}{
		{"connections.core.kbind.io", "Connection", apiextensionsv1.ClusterScoped, connectionFields, connectionColumns},
		{"clusterbindings.core.kbind.io", "ClusterBinding", apiextensionsv1.ClusterScoped, bindingFields, bindingColumns},
		{"bindings.core.kbind.io", "Binding", apiextensionsv1.NamespaceScoped, bindingFields, bindingColumns},
	}
	if len(all) != len(cases) {
		t.Errorf("got %d CRDs, want %d", len(all), len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			crd := byName[tc.name]
			if crd == nil {
				t.Fatalf("CRD %s missing", tc.name)
			}
			if crd.Spec.Names.Kind != tc.kind || crd.Spec.Scope != tc.scope {
				t.Errorf("kind/scope = %s/%s, want %s/%s", crd.Spec.Names.Kind, crd.Spec.Scope, tc.kind, tc.scope)
			}
			if !reflect.DeepEqual(crd.Spec.Names.Categories, []string{"kbind"}) {
				t.Errorf("categories = %v, want [kbind]", crd.Spec.Names.Categories)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("want exactly one version, got %d", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1alpha1" || !v.Served || !v.Storage {
				t.Errorf("version %s served=%v storage=%v", v.Name, v.Served, v.Storage)
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Error("status subresource missing")
			}
			var cols []column
			for _, c := range v.AdditionalPrinterColumns {
				cols = append(cols, column{c.Name, c.JSONPath})
			}
			if !reflect.DeepEqual(cols, tc.columns) {
				t.Errorf("printer columns = %v, want %v", cols, tc.columns)
			}
			for _, f := range tc.fields {
				checkField(t, v.Schema.OpenAPIV3Schema, f)
			}
		})
	}
}

// lookup walks a dot path ("a.b[].c") and reports whether the last step is
// required by its parent.
func lookup(root *apiextensionsv1.JSONSchemaProps, path string) (*apiextensionsv1.JSONSchemaProps, bool) {
	cur := root
	required := false
	for _, step := range strings.Split(path, ".") {
		items := strings.HasSuffix(step, "[]")
		step = strings.TrimSuffix(step, "[]")
		next, ok := cur.Properties[step]
		if !ok {
			return nil, false
		}
		required = false
		for _, r := range cur.Required {
			if r == step {
				required = true
			}
		}
		cur = &next
		if items {
			if cur.Items == nil || cur.Items.Schema == nil {
				return nil, false
			}
			cur = cur.Items.Schema
		}
	}
	return cur, required
}

func checkField(t *testing.T, root *apiextensionsv1.JSONSchemaProps, f field) {
	t.Helper()
	p, required := lookup(root, f.path)
	if p == nil {
		t.Errorf("%s: missing from the schema", f.path)
		return
	}
	if p.Type != f.typ {
		t.Errorf("%s: type %q, want %q", f.path, p.Type, f.typ)
	}
	def := ""
	if p.Default != nil {
		def = string(p.Default.Raw)
	}
	if def != f.def {
		t.Errorf("%s: default %s, want %s", f.path, def, f.def)
	}
	var enum []string
	for _, e := range p.Enum {
		var s string
		_ = json.Unmarshal(e.Raw, &s)
		enum = append(enum, s)
	}
	if !reflect.DeepEqual(enum, f.enum) {
		t.Errorf("%s: enum %v, want %v", f.path, enum, f.enum)
	}
	if !reflect.DeepEqual(p.MinLength, f.minLength) {
		t.Errorf("%s: minLength %v, want %v", f.path, p.MinLength, f.minLength)
	}
	if !reflect.DeepEqual(p.MinItems, f.minItems) {
		t.Errorf("%s: minItems %v, want %v", f.path, p.MinItems, f.minItems)
	}
	if required != f.required {
		t.Errorf("%s: required %v, want %v", f.path, required, f.required)
	}
	listType := ""
	if p.XListType != nil {
		listType = *p.XListType
	}
	if listType != f.listType {
		t.Errorf("%s: list type %q, want %q", f.path, listType, f.listType)
	}
	if !reflect.DeepEqual(p.XListMapKeys, f.listMapKeys) {
		t.Errorf("%s: list map keys %v, want %v", f.path, p.XListMapKeys, f.listMapKeys)
	}
	var rules []string
	for _, r := range p.XValidations {
		rules = append(rules, r.Rule)
	}
	if !reflect.DeepEqual(rules, f.rules) {
		t.Errorf("%s: CEL rules %q, want %q", f.path, rules, f.rules)
	}
}
