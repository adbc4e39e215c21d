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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// StorageVersion is the version crd stores its objects at; nil when it has
// none (a CRD the API server accepted has exactly one).
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Storage {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

// StorageGVK is the group, storage version and kind of crd's objects, the
// version empty and ok false when crd has no storage version.
func StorageGVK(crd *apiextensionsv1.CustomResourceDefinition) (gvk schema.GroupVersionKind, ok bool) {
	gvk = schema.GroupVersionKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	if v := StorageVersion(crd); v != nil {
		gvk.Version, ok = v.Name, true
	}
	return gvk, ok
}

// FromCRD derives the consumer CRD from a provider CRD (SCHEMA-1): the
// versions PlanVersions picks, each with its schema, printer columns,
// subresources and selectable fields, the same storage version,
// conversion None, every server-populated field dropped, and kbind's
// markers — with the provider's conversion strategy, which the consumer
// does not use, recorded in core.kbind.io/provider-conversion (a storage
// switch the provider converts by webhook is refused: DecideStorageSwitch). reduced is "" when the consumer serves every version the
// provider serves, else a sentence saying which it serves and why (the
// binding reports it).
func FromCRD(provider *apiextensionsv1.CustomResourceDefinition, connection string) (crd *apiextensionsv1.CustomResourceDefinition, reduced string, err error) {
	plan, err := PlanVersions(provider)
	if err != nil {
		return nil, "", err
	}
	serve := map[string]bool{}
	for _, name := range plan.Served {
		serve[name] = true
	}
	var versions []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range provider.Spec.Versions {
		if !serve[v.Name] {
			continue
		}
		v = *v.DeepCopy()
		v.Served, v.Storage = true, v.Name == plan.Storage
		versions = append(versions, v)
	}
	spec := apiextensionsv1.CustomResourceDefinitionSpec{
		Group:      provider.Spec.Group,
		Names:      *provider.Spec.Names.DeepCopy(),
		Scope:      provider.Spec.Scope,
		Versions:   versions,
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
	}
	crd = Stamp(provider.Name, spec, connection)
	crd.Annotations[kbindv1alpha1.ProviderConversionAnnotation] = string(apiextensionsv1.NoneConverter)
	if c := provider.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter {
		crd.Annotations[kbindv1alpha1.ProviderConversionAnnotation] = string(apiextensionsv1.WebhookConverter)
	}
	return crd, plan.Reduced(provider.Name), nil
}

// VersionPlan is which of a provider CRD's versions its consumer CRD
// serves.
type VersionPlan struct {
	// Served lists the versions the consumer CRD serves, in the provider's
	// order.
	Served []string
	// Storage is the consumer's storage version, one of Served.
	Storage string
	// Omitted lists versions the provider serves and the consumer does not.
	Omitted []string
}

// PlanVersions decides which versions a provider CRD's consumer CRD serves.
// The consumer always converts with None: the provider's conversion
// webhook never reaches it. So with conversion None (or unset) on the
// provider, every version the provider serves is served — the consumer
// then converts exactly as the provider does — and with a webhook only one
// is, since a None conversion between versions the provider converts with
// code would hand objects to the provider with fields in the wrong shape.
// The storage version is the provider's when served (the syncer reads and
// writes the provider at the consumer's storage version), else the first
// served one.
func PlanVersions(provider *apiextensionsv1.CustomResourceDefinition) (VersionPlan, error) {
	var plan VersionPlan
	var served []string
	for _, v := range provider.Spec.Versions {
		if !v.Served {
			continue
		}
		served = append(served, v.Name)
		if v.Storage {
			plan.Storage = v.Name
		}
	}
	if len(served) == 0 {
		return VersionPlan{}, fmt.Errorf("provider CRD %s serves no version", provider.Name)
	}
	if plan.Storage == "" {
		plan.Storage = served[0]
	}
	if c := provider.Spec.Conversion; c == nil || c.Strategy == "" || c.Strategy == apiextensionsv1.NoneConverter {
		plan.Served = served
		return plan, nil
	}
	plan.Served = []string{plan.Storage}
	for _, name := range served {
		if name != plan.Storage {
			plan.Omitted = append(plan.Omitted, name)
		}
	}
	return plan, nil
}

// Reduced is "" when the consumer CRD of crd serves every version the
// provider serves, else a sentence for the binding saying what it serves
// and why.
func (p VersionPlan) Reduced(crd string) string {
	if len(p.Omitted) == 0 {
		return ""
	}
	return fmt.Sprintf("%s is served at %s only, not at %s: the provider converts between its versions with a conversion webhook, which kbind cannot run on the consumer",
		crd, p.Storage, strings.Join(p.Omitted, ", "))
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
