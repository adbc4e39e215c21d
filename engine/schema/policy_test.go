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
		{"ours, stale, Always: update", stale, desired, policy(bound, always), crdSrc, ActionUpdate, ""},
		{"ours, stale, Always, OpenAPI: update", stale, desired, policy(all, always), oapiSrc, ActionUpdate, ""},
		{"ours, stale, Once: keep", stale, desired, policy(bound, once), crdSrc, ActionNone, ""},
		{"ours, None: external manager updates", stale, nil, policy(none, always), crdSrc, ActionNone, ""},
		{"another Connection's: report", otherConn, desired, policy(bound, always), crdSrc, ActionReport, `supplied by Connection "q"`},
		{"another Connection's, None: report", otherConn, nil, policy(none, always), crdSrc, ActionReport, `supplied by Connection "q"`},
		{"foreign, Bound: never take over", foreign, desired, policy(bound, always), crdSrc, ActionReport, "was not created by kbind"},
		{"foreign, All: never take over", foreign, desired, policy(all, always), crdSrc, ActionReport, "was not created by kbind"},
		{"foreign, None, CRD source: stamp", foreign, nil, policy(none, always), crdSrc, ActionStamp, ""},
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
	crd, err := FromCRD(provider, "p")
	if err != nil {
		t.Fatal(err)
	}
	if crd.UID != "" || crd.ResourceVersion != "" || crd.Generation != 0 || crd.ManagedFields != nil || len(crd.Status.StoredVersions) != 0 {
		t.Errorf("server fields kept: %+v", crd.ObjectMeta)
	}
	if crd.Labels[kbindv1alpha1.ExportedLabel] != "" {
		t.Error("the export label is the provider's, not the consumer's")
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" || len(crd.Spec.Versions[0].AdditionalPrinterColumns) != 1 ||
		crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("spec %+v", crd.Spec)
	}
	// No storage version: the first served one.
	provider.Spec.Versions[1].Storage = false
	if crd, _ = FromCRD(provider, "p"); crd.Spec.Versions[0].Name != "v1alpha1" || !crd.Spec.Versions[0].Storage {
		t.Errorf("without a storage version: %+v", crd.Spec.Versions)
	}
	provider.Spec.Versions[0].Served, provider.Spec.Versions[1].Served = false, false
	if _, err := FromCRD(provider, "p"); err == nil {
		t.Error("a CRD serving nothing must be refused")
	}
}
