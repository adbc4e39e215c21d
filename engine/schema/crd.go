package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// SpecHash is the schema hash of a CRD spec: "sha256:" and 16 hex
// characters of its JSON encoding (map keys sorted, so deterministic).
func SpecHash(spec *apiextensionsv1.CustomResourceDefinitionSpec) string {
	data, err := json.Marshal(spec)
	if err != nil {
		// A CRD spec always encodes; keep the hash total anyway.
		data = []byte(fmt.Sprintf("%#v", spec))
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])[:16]
}

// FromCRD derives the consumer CRD from a provider CRD (SCHEMA-1): one
// version (the storage version, else the first served one) served and
// stored, conversion None, every server-populated field dropped, the
// version's schema, printer columns, subresources and selectable fields
// kept, and kbind's markers.
func FromCRD(provider *apiextensionsv1.CustomResourceDefinition, connection string) (*apiextensionsv1.CustomResourceDefinition, error) {
	version, err := pickVersion(provider)
	if err != nil {
		return nil, err
	}
	v := *version.DeepCopy()
	v.Served, v.Storage = true, true
	spec := apiextensionsv1.CustomResourceDefinitionSpec{
		Group:      provider.Spec.Group,
		Names:      *provider.Spec.Names.DeepCopy(),
		Scope:      provider.Spec.Scope,
		Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{v},
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
	}
	return Stamp(provider.Name, spec, connection), nil
}

func pickVersion(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinitionVersion, error) {
	for i := range crd.Spec.Versions {
		if v := &crd.Spec.Versions[i]; v.Storage && v.Served {
			return v, nil
		}
	}
	for i := range crd.Spec.Versions {
		if v := &crd.Spec.Versions[i]; v.Served {
			return v, nil
		}
	}
	return nil, fmt.Errorf("provider CRD %s serves no version", crd.Name)
}

// Stamp builds a consumer CRD named name with spec and kbind's markers:
// the managed label, the connection annotation and the schema hash.
func Stamp(name string, spec apiextensionsv1.CustomResourceDefinitionSpec, connection string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue},
			Annotations: map[string]string{
				kbindv1alpha1.ConnectionAnnotation: connection,
				kbindv1alpha1.SchemaHashAnnotation: SpecHash(&spec),
			},
		},
		Spec: spec,
	}
}
