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
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Project turns the consumer CRD derived from a provider API into the
// consumer API the entry projects it onto (docs/shaping.md#projection):
// named "<plural>.<group>" of the projection, with the projection's group
// and names, the provider's versions, schemas, subresources and printer
// columns, and the provider API and kind recorded in annotations (the
// syncers read the provider's objects there). An entry without a
// projection returns crd unchanged.
//
// Names: the kind is the projection's or the provider's; the plural the
// projection's, else the kind in lower case with "s" when the kind is
// projected, else the provider's; the singular and list kind follow a
// projected kind (lower case, and "List" appended) and are the provider's
// otherwise; short names and categories are the projection's only (none by
// default: the provider's could clash with the consumer's own APIs).
func Project(crd *apiextensionsv1.CustomResourceDefinition, ref kbindv1alpha1.APIReference, connection string) *apiextensionsv1.CustomResourceDefinition {
	p := ref.Projection
	if p == nil || crd == nil {
		return crd
	}
	spec := *crd.Spec.DeepCopy()
	providerKind := spec.Names.Kind
	if p.Group != "" {
		spec.Group = p.Group
	}
	if p.Kind != "" {
		spec.Names.Kind = p.Kind
		spec.Names.Singular = strings.ToLower(p.Kind)
		spec.Names.ListKind = p.Kind + "List"
		spec.Names.Plural = kbindv1alpha1.DefaultPlural(p.Kind)
	}
	if p.Plural != "" {
		spec.Names.Plural = p.Plural
	}
	spec.Names.ShortNames = append([]string(nil), p.ShortNames...)
	spec.Names.Categories = append([]string(nil), p.Categories...)
	out := Stamp(ref.ConsumerName(), spec, connection)
	out.Annotations[kbindv1alpha1.ProviderAPIAnnotation] = ref.Name
	out.Annotations[kbindv1alpha1.ProviderKindAnnotation] = providerKind
	if c, ok := crd.Annotations[kbindv1alpha1.ProviderConversionAnnotation]; ok {
		out.Annotations[kbindv1alpha1.ProviderConversionAnnotation] = c
	}
	return out
}

// ProviderAPI is the provider's "<plural>.<group>" a consumer CRD's
// objects sync to: the projected one, or the CRD's own name.
func ProviderAPI(crd *apiextensionsv1.CustomResourceDefinition) string {
	if api := crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation]; api != "" {
		return api
	}
	return crd.Name
}

// Projected reports whether a consumer CRD is a projection of a provider
// API.
func Projected(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation] != ""
}

// ProviderGVK is the provider's group, version and kind of a consumer CRD's
// objects at version: the consumer's own unless the CRD is projected, then
// the recorded provider API's group and kind (versions keep their names).
func ProviderGVK(crd *apiextensionsv1.CustomResourceDefinition, version string) schema.GroupVersionKind {
	if !Projected(crd) {
		return schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	}
	_, group, _ := strings.Cut(crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation], ".")
	return schema.GroupVersionKind{Group: group, Version: version, Kind: crd.Annotations[kbindv1alpha1.ProviderKindAnnotation]}
}

// Serves reports whether the consumer CRD crd is the consumer API the
// entry ref binds: the same provider API, projected (with the same kind,
// short names and categories) or not as ref says. A binding whose entry
// does not serve the CRD of its consumer name has that entry refused
// (Collision) and must not give the CRD's syncer its scope.
func Serves(ref kbindv1alpha1.APIReference, crd *apiextensionsv1.CustomResourceDefinition) bool {
	if ProviderAPI(crd) != ref.Name || ref.Projected() != Projected(crd) {
		return false
	}
	if !ref.Projected() {
		return true
	}
	kind := ref.Projection.Kind
	if kind == "" {
		kind = crd.Annotations[kbindv1alpha1.ProviderKindAnnotation]
	}
	names := crd.Spec.Names
	return names.Kind == kind && reflect.DeepEqual(nonNil(names.ShortNames), nonNil(ref.Projection.ShortNames)) &&
		reflect.DeepEqual(nonNil(names.Categories), nonNil(ref.Projection.Categories))
}

// Collision is why a kbind consumer CRD existing cannot become desired:
// it serves another provider API (another binding projects onto, or binds,
// the same consumer name), or the same one under other names (two
// projections of one provider API onto one consumer name), or — for a
// projection — it is not kbind's; "" when it can. An unprojected API at a
// CRD kbind did not create is Decide's to report, as it always was.
func Collision(existing, desired *apiextensionsv1.CustomResourceDefinition) string {
	if existing == nil || desired == nil {
		return ""
	}
	if existing.Labels[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue {
		if !Projected(desired) {
			return "" // Decide's to report, as always
		}
		return fmt.Sprintf("the consumer API %s collides with the CRD %s, which kbind did not create: project %s onto another group or kind",
			existing.Name, existing.Name, ProviderAPI(desired))
	}
	if from, want := ProviderAPI(existing), ProviderAPI(desired); from != want {
		return fmt.Sprintf("the consumer API %s collides: CRD %s serves the provider's %s (Connection %q), and this entry would make it serve %s; "+
			"project %s onto another group or kind", existing.Name, existing.Name, from, existing.Annotations[kbindv1alpha1.ConnectionAnnotation], want, want)
	}
	if (Projected(existing) || Projected(desired)) && !sameNames(existing.Spec.Names, desired.Spec.Names) {
		return fmt.Sprintf("the consumer API %s collides: CRD %s is %s's projection as kind %s, and this entry projects it as kind %s with other names; "+
			"give both entries the same projection, or project onto another name", existing.Name, existing.Name, ProviderAPI(existing),
			existing.Spec.Names.Kind, desired.Spec.Names.Kind)
	}
	return ""
}

// sameNames compares what a projection sets of a CRD's names (the API
// server fills in no other).
func sameNames(a, b apiextensionsv1.CustomResourceDefinitionNames) bool {
	return a.Kind == b.Kind && a.Plural == b.Plural && a.Singular == b.Singular && a.ListKind == b.ListKind &&
		reflect.DeepEqual(nonNil(a.ShortNames), nonNil(b.ShortNames)) && reflect.DeepEqual(nonNil(a.Categories), nonNil(b.Categories))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// reservedGroups are the groups no projection may use: Kubernetes' own
// (the API server serves them, or reserves them for approved APIs) and
// kbind's.
var reservedGroups = []string{"k8s.io", "kubernetes.io", "kbind.io"}

// ProjectionProblem is why an entry's projection cannot be installed, ""
// when it can: in a namespaced Binding (a projection names a cluster-wide
// consumer API: a namespace's user could otherwise squat API names a
// cluster admin's ClusterBinding needs), a reserved group (the CRD
// validation refuses both too; this also covers objects admitted before),
// or pullPolicy None (kbind never installs a CRD then, and a projected CRD
// is kbind's by construction).
func ProjectionProblem(ref kbindv1alpha1.APIReference, namespaced bool, pull kbindv1alpha1.PullPolicy) string {
	p := ref.Projection
	if p == nil {
		return ""
	}
	if namespaced {
		return fmt.Sprintf("%s has a projection, and a Binding cannot project: the consumer API's name is cluster-wide, a cluster admin's to choose in a ClusterBinding", ref.Name)
	}
	group := p.Group // "": the provider's own group, not checked
	for _, reserved := range reservedGroups {
		if group != "" && (group == reserved || strings.HasSuffix(group, "."+reserved)) {
			return fmt.Sprintf("%s cannot be projected onto group %s: Kubernetes' groups (k8s.io, kubernetes.io and their subdomains) and kbind's (kbind.io) are reserved", ref.Name, group)
		}
	}
	if group != "" && !strings.Contains(group, ".") {
		return fmt.Sprintf("%s cannot be projected onto group %q: a custom resource's group needs a dot, such as acme.io", ref.Name, group)
	}
	if pull == kbindv1alpha1.PullPolicyNone {
		return fmt.Sprintf("%s has a projection, and the Connection's pullPolicy is None: kbind installs a projected consumer CRD itself, so projection needs pullPolicy Bound or All", ref.Name)
	}
	return ""
}
