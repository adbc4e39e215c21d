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
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecide(t *testing.T) {
	desired := Stamp("widgets.example.org", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org"}, "p")
	ours := desired.DeepCopy()
	stale := desired.DeepCopy()
	stale.Annotations[kbindv1alpha1.SchemaHashAnnotation] = "sha256:0000000000000000"
	foreign := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"}}
	otherConn := desired.DeepCopy()
	otherConn.Annotations[kbindv1alpha1.ConnectionAnnotation] = "q"
	// Stamped under pullPolicy None (markers, no schema hash): the user's.
	stamped := foreign.DeepCopy()
	stamped.Labels = map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}
	stamped.Annotations = map[string]string{kbindv1alpha1.ConnectionAnnotation: "p"}

	clusterScoped := desired.DeepCopy()
	clusterScoped.Spec.Scope, clusterScoped.Spec.Names.Kind = apiextensionsv1.ClusterScoped, "Widget"
	clusterScoped.Annotations[kbindv1alpha1.SchemaHashAnnotation] = "sha256:1111111111111111"
	namespacedOurs := ours.DeepCopy()
	namespacedOurs.Spec.Scope = apiextensionsv1.NamespaceScoped

	policy := func(pull kbindv1alpha1.PullPolicy, update kbindv1alpha1.UpdatePolicy) kbindv1alpha1.SchemaPolicy {
		return kbindv1alpha1.SchemaPolicy{PullPolicy: pull, UpdatePolicy: update}
	}
	const (
		bound, all, none = kbindv1alpha1.PullPolicyBound, kbindv1alpha1.PullPolicyAll, kbindv1alpha1.PullPolicyNone
		always, once     = kbindv1alpha1.UpdatePolicyAlways, kbindv1alpha1.UpdatePolicyOnce
		crdSrc, oapiSrc  = kbindv1alpha1.ActiveSchemaSourceCRD, kbindv1alpha1.ActiveSchemaSourceOpenAPI
	)
	cases := []struct {
		name     string
		existing *apiextensionsv1.CustomResourceDefinition
		desired  *apiextensionsv1.CustomResourceDefinition
		policy   kbindv1alpha1.SchemaPolicy
		source   kbindv1alpha1.ActiveSchemaSource
		want     Action
		problem  string
	}{
		{"absent, Bound: create", nil, desired, policy(bound, always), crdSrc, ActionCreate, ""},
		{"absent, All: create", nil, desired, policy(all, once), oapiSrc, ActionCreate, ""},
		{"absent, None: report", nil, nil, policy(none, always), crdSrc, ActionReport, "is not present; with pullPolicy None"},
		{"ours, same hash", ours, desired, policy(bound, always), crdSrc, ActionNone, ""},
		{"ours, the provider changed the scope: report", namespacedOurs, clusterScoped, policy(bound, always), crdSrc, ActionReport,
			"serves widgets.example.org Cluster-scoped now, the consumer CRD is Namespaced-scoped"},
		{"ours, scope changed, Once: report too", namespacedOurs, clusterScoped, policy(bound, once), crdSrc, ActionReport, "delete the consumer CRD widgets.example.org — which deletes every Widget"},
		{"ours, stale, Always: update", stale, desired, policy(bound, always), crdSrc, ActionUpdate, ""},
		{"ours, stale, Always, OpenAPI: update", stale, desired, policy(all, always), oapiSrc, ActionUpdate, ""},
		{"ours, stale, Once: keep", stale, desired, policy(bound, once), crdSrc, ActionNone, ""},
		{"ours, None: external manager updates", stale, nil, policy(none, always), crdSrc, ActionNone, ""},
		{"another Connection's: report", otherConn, desired, policy(bound, always), crdSrc, ActionReport, `supplied by Connection "q"`},
		{"another Connection's, None: report", otherConn, nil, policy(none, always), crdSrc, ActionReport, `supplied by Connection "q"`},
		{"foreign, Bound: never take over", foreign, desired, policy(bound, always), crdSrc, ActionReport, "was not created by kbind"},
		{"foreign, All: never take over", foreign, desired, policy(all, always), crdSrc, ActionReport, "was not created by kbind"},
		{"foreign, None, CRD source: stamp", foreign, nil, policy(none, always), crdSrc, ActionStamp, ""},
		{"stamped under None, now Bound: used as it is, never updated", stamped, desired, policy(bound, always), crdSrc, ActionNone, ""},
		{"stamped under None, now All: used as it is, never updated", stamped, desired, policy(all, always), oapiSrc, ActionNone, ""},
		{"stamped under None, still None", stamped, nil, policy(none, always), crdSrc, ActionNone, ""},
		{"foreign, None, OpenAPI: needs the user's markers", foreign, nil, policy(none, always), oapiSrc, ActionReport, "add the label core.kbind.io/managed=true and the annotation core.kbind.io/connection=p"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.existing, tc.desired, "widgets.example.org", "p", tc.policy, tc.source)
			if d.Action != tc.want || !strings.Contains(d.Problem, tc.problem) {
				t.Errorf("Decide = %+v, want %s with %q", d, tc.want, tc.problem)
			}
		})
	}
}

// A ClusterBinding's Connection "p" takes over kbind's CRD of Connection
// "q" that only namespaced Bindings hold (BIND-3) — and nothing else: a
// CRD stamped for q that kbind did not create, one of a third Connection,
// and one that is not there are left to Decide (SCHEMA-5).
func TestDecideTakeOver(t *testing.T) {
	desired := Stamp("widgets.example.org", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org", Scope: apiextensionsv1.NamespaceScoped}, "p")
	ofQ := Stamp("widgets.example.org", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org", Scope: apiextensionsv1.NamespaceScoped, Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget"}}, "q")
	stampedForQ := ofQ.DeepCopy() // under pullPolicy None: no schema hash
	delete(stampedForQ.Annotations, kbindv1alpha1.SchemaHashAnnotation)
	ofR := Stamp("widgets.example.org", ofQ.Spec, "r")
	clusterScoped := desired.DeepCopy()
	clusterScoped.Spec.Scope, clusterScoped.Spec.Names.Kind = apiextensionsv1.ClusterScoped, "Widget"
	policy := func(pull kbindv1alpha1.PullPolicy, update kbindv1alpha1.UpdatePolicy) kbindv1alpha1.SchemaPolicy {
		return kbindv1alpha1.SchemaPolicy{PullPolicy: pull, UpdatePolicy: update}
	}
	bound := policy(kbindv1alpha1.PullPolicyBound, kbindv1alpha1.UpdatePolicyAlways)
	cases := []struct {
		name     string
		existing *apiextensionsv1.CustomResourceDefinition
		desired  *apiextensionsv1.CustomResourceDefinition
		from     string
		policy   kbindv1alpha1.SchemaPolicy
		ok       bool
		want     Action
		problem  string
	}{
		{"kbind's CRD of q: take over with p's schema", ofQ, desired, "q", bound, true, ActionTakeOver, ""},
		{"under updatePolicy Once too (p's first install)", ofQ, desired, "q", policy(kbindv1alpha1.PullPolicyBound, kbindv1alpha1.UpdatePolicyOnce), true, ActionTakeOver, ""},
		{"under p's pullPolicy None: restamp, the schema as it is", ofQ, nil, "q", policy(kbindv1alpha1.PullPolicyNone, kbindv1alpha1.UpdatePolicyAlways), true, ActionRestamp, ""},
		{"p's provider serves it with another scope: report", ofQ, clusterScoped, "q", bound, true, ActionReport, "Cluster-scoped now, the consumer CRD is Namespaced-scoped"},
		{"stamped for q, not created by kbind: never", stampedForQ, desired, "q", bound, false, "", ""},
		{"another Connection's than the one found: never", ofR, desired, "q", bound, false, "", ""},
		{"no takeover asked", ofQ, desired, "", bound, false, "", ""},
		{"already p's", desired, desired, "p", bound, false, "", ""},
		{"absent", nil, desired, "q", bound, false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := DecideTakeOver(tc.existing, tc.desired, "widgets.example.org", "p", tc.from, tc.policy)
			if ok != tc.ok || d.Action != tc.want || !strings.Contains(d.Problem, tc.problem) {
				t.Errorf("DecideTakeOver = %+v, %v; want %s with %q, %v", d, ok, tc.want, tc.problem, tc.ok)
			}
		})
	}
}

func TestInSync(t *testing.T) {
	desired := Stamp("w", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org"}, "p")
	stale := desired.DeepCopy()
	stale.Annotations[kbindv1alpha1.SchemaHashAnnotation] = "sha256:0000000000000000"
	stamped := desired.DeepCopy()
	delete(stamped.Annotations, kbindv1alpha1.SchemaHashAnnotation)
	always := kbindv1alpha1.SchemaPolicy{PullPolicy: kbindv1alpha1.PullPolicyBound, UpdatePolicy: kbindv1alpha1.UpdatePolicyAlways}
	once := kbindv1alpha1.SchemaPolicy{PullPolicy: kbindv1alpha1.PullPolicyBound, UpdatePolicy: kbindv1alpha1.UpdatePolicyOnce}
	none := kbindv1alpha1.SchemaPolicy{PullPolicy: kbindv1alpha1.PullPolicyNone, UpdatePolicy: kbindv1alpha1.UpdatePolicyAlways}
	cases := []struct {
		name     string
		existing *apiextensionsv1.CustomResourceDefinition
		policy   kbindv1alpha1.SchemaPolicy
		want     bool
	}{
		{"absent", nil, always, false},
		{"ours, desired hash", desired, always, true},
		{"ours, stale hash, Always", stale, always, false},
		{"ours, stale hash, Once", stale, once, true},
		{"stamped (not created by kbind), Always: never updated, so it lags", stamped, always, false},
		{"stamped, None", stamped, none, true},
	}
	for _, tc := range cases {
		if got := InSync(tc.existing, desired, "p", tc.policy); got != tc.want {
			t.Errorf("%s: InSync = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUpdated(t *testing.T) {
	version := func(name string, served, storage bool, field string) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}}}}}
	}
	existing := Stamp("w.example.org", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org",
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1alpha1", true, true, "old")}}, "p")
	existing.Labels["user"] = "kept"
	existing.Status.StoredVersions = []string{"v1alpha1"}
	desired := Stamp("w.example.org", apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.org",
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true, true, "new")}}, "p")

	got := Updated(existing, desired)
	if len(got.Spec.Versions) != 2 || got.Spec.Versions[0].Name != "v1" || !got.Spec.Versions[0].Storage {
		t.Fatalf("versions %+v", got.Spec.Versions)
	}
	old := got.Spec.Versions[1]
	if old.Name != "v1alpha1" || old.Served || old.Storage || old.Schema.OpenAPIV3Schema.Properties["old"].Type != "string" {
		t.Errorf("the stored version must stay, unserved, with its own schema: %+v", old)
	}
	if got.Labels["user"] != "kept" || got.Annotations[kbindv1alpha1.SchemaHashAnnotation] != desired.Annotations[kbindv1alpha1.SchemaHashAnnotation] {
		t.Errorf("metadata %v %v", got.Labels, got.Annotations)
	}
	if existing.Spec.Versions[0].Name != "v1alpha1" || len(existing.Spec.Versions) != 1 {
		t.Error("Updated must not modify its input")
	}

	// A stored version that is still desired is not duplicated; one the
	// existing spec lost gets desired's storage schema under its name.
	existing.Status.StoredVersions = []string{"v1", "v0"}
	got = Updated(existing, desired)
	if len(got.Spec.Versions) != 2 || got.Spec.Versions[1].Name != "v0" || got.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["new"].Type != "string" {
		t.Errorf("versions %+v", got.Spec.Versions)
	}

	// No labels or annotations at all (stripped by hand): no panic.
	bare := existing.DeepCopy()
	bare.Labels, bare.Annotations = nil, nil
	if got := Updated(bare, desired); got.Labels[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue {
		t.Errorf("labels %v", got.Labels)
	}
}

func TestCreatedByKbind(t *testing.T) {
	created := Stamp("w", apiextensionsv1.CustomResourceDefinitionSpec{}, "p")
	stamped := created.DeepCopy()
	delete(stamped.Annotations, kbindv1alpha1.SchemaHashAnnotation) // pullPolicy None stamps no hash
	if !CreatedByKbind(created, "p") || CreatedByKbind(created, "q") || CreatedByKbind(stamped, "p") {
		t.Error("CreatedByKbind must require kbind's markers, this Connection and a schema hash")
	}
}

func TestFromCRD(t *testing.T) {
	provider := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "multis.example.org", UID: "u", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{kbindv1alpha1.ExportedLabel: "true"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.org", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "multis", Kind: "Multi"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: true},
				{Name: "v1", Served: true, Storage: true, AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "A", Type: "string", JSONPath: ".a"}}},
				{Name: "v2", Served: false},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
	crd, reduced, err := FromCRD(provider, "p")
	if err != nil {
		t.Fatal(err)
	}
	if crd.UID != "" || crd.ResourceVersion != "" || crd.Generation != 0 || crd.ManagedFields != nil || len(crd.Status.StoredVersions) != 0 {
		t.Errorf("server fields kept: %+v", crd.ObjectMeta)
	}
	if crd.Labels[kbindv1alpha1.ExportedLabel] != "" {
		t.Error("the export label is the provider's, not the consumer's")
	}
	// Webhook conversion: the storage version only, and said so.
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" || len(crd.Spec.Versions[0].AdditionalPrinterColumns) != 1 ||
		crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("spec %+v", crd.Spec)
	}
	if !strings.Contains(reduced, "multis.example.org is served at v1 only, not at v1alpha1") || !strings.Contains(reduced, "webhook") {
		t.Errorf("reduced %q", reduced)
	}
	// Conversion None: every served version, the same storage version, the
	// unserved one left out.
	provider.Spec.Conversion.Strategy = apiextensionsv1.NoneConverter
	crd, reduced, _ = FromCRD(provider, "p")
	if got := versionSummary(crd.Spec.Versions); got != "v1alpha1 v1(storage)" || reduced != "" {
		t.Errorf("with conversion None: %s, reduced %q", got, reduced)
	}
	if len(crd.Spec.Versions[1].AdditionalPrinterColumns) != 1 || len(crd.Spec.Versions[0].AdditionalPrinterColumns) != 0 {
		t.Errorf("each version keeps its own printer columns: %+v", crd.Spec.Versions)
	}
	provider.Spec.Versions[0].Served, provider.Spec.Versions[1].Served = false, false
	if _, _, err := FromCRD(provider, "p"); err == nil {
		t.Error("a CRD serving nothing must be refused")
	}
}

// versionSummary is "name[(storage)][(unserved)] ..." of CRD versions.
func versionSummary(versions []apiextensionsv1.CustomResourceDefinitionVersion) string {
	var out []string
	for _, v := range versions {
		s := v.Name
		if v.Storage {
			s += "(storage)"
		}
		if !v.Served {
			s += "(unserved)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestPlanVersions(t *testing.T) {
	type v struct {
		name            string
		served, storage bool
	}
	none := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	webhook := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
	cases := []struct {
		name       string
		versions   []v
		conversion *apiextensionsv1.CustomResourceConversion
		// want is "served... | storage | omitted...", or "error".
		want string
	}{
		{"one version", []v{{"v1", true, true}}, nil, "v1 | v1 | "},
		{"None: every served version, the provider's storage",
			[]v{{"v1alpha1", true, false}, {"v1beta1", true, false}, {"v1", true, true}}, none, "v1alpha1 v1beta1 v1 | v1 | "},
		{"conversion unset is None", []v{{"v1", true, true}, {"v2", true, false}}, nil, "v1 v2 | v1 | "},
		{"empty strategy is None", []v{{"v1", true, true}, {"v2", true, false}}, &apiextensionsv1.CustomResourceConversion{}, "v1 v2 | v1 | "},
		{"None: unserved versions stay out", []v{{"v1alpha1", false, false}, {"v1", true, true}}, none, "v1 | v1 | "},
		{"None: storage not served, the first served stores", []v{{"v1alpha1", true, false}, {"v1", false, true}, {"v2", true, false}}, none, "v1alpha1 v2 | v1alpha1 | "},
		{"Webhook: the storage version only", []v{{"v1alpha1", true, false}, {"v1", true, true}, {"v2", true, false}}, webhook, "v1 | v1 | v1alpha1 v2"},
		{"Webhook, one served version: nothing omitted", []v{{"v1alpha1", false, false}, {"v1", true, true}}, webhook, "v1 | v1 | "},
		{"Webhook, storage not served: the first served", []v{{"v1", false, true}, {"v2", true, false}, {"v3", true, false}}, webhook, "v2 | v2 | v3"},
		{"nothing served", []v{{"v1", false, true}}, none, "error"},
		{"no versions", nil, none, "error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "multis.example.org"}}
			crd.Spec.Conversion = tc.conversion
			for _, version := range tc.versions {
				crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: version.name, Served: version.served, Storage: version.storage})
			}
			plan, err := PlanVersions(crd)
			got := "error"
			if err == nil {
				got = strings.Join(plan.Served, " ") + " | " + plan.Storage + " | " + strings.Join(plan.Omitted, " ")
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if reduced := plan.Reduced(crd.Name); (reduced != "") != (len(plan.Omitted) > 0) {
				t.Errorf("Reduced %q with omitted %v", reduced, plan.Omitted)
			}
		})
	}
}
