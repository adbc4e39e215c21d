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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConflictPolicy says what to do with a provider object of the same name that
// carries no kbind ownership markers.
// +kubebuilder:validation:Enum=Fail;Adopt
type ConflictPolicy string

const (
	// ConflictPolicyFail leaves the provider object alone and reports
	// ForeignObjectExists.
	ConflictPolicyFail ConflictPolicy = "Fail"
	// ConflictPolicyAdopt stamps ownership markers on a markerless provider
	// object and applies the consumer spec over it. Objects marked by another
	// consumer are never adopted.
	ConflictPolicyAdopt ConflictPolicy = "Adopt"
)

// ProviderEventsPolicy says what happens to the Events the provider
// records on the provider copies of a binding's objects.
// +kubebuilder:validation:Enum=Forward;Ignore
type ProviderEventsPolicy string

const (
	// ProviderEventsForward re-emits them on the consumer objects
	// (deduplicated and rate limited, docs/sync.md#provider-events).
	ProviderEventsForward ProviderEventsPolicy = "Forward"
	// ProviderEventsIgnore leaves them on the provider; kbind does not
	// watch the provider's Events for this binding.
	ProviderEventsIgnore ProviderEventsPolicy = "Ignore"
)

// DeletionPolicy says what deleting a consumer object does to its provider
// copy (docs/sync.md#deletion). The core.kbind.io/deletion-policy
// annotation on an object overrides its binding's spec.deletionPolicy.
// +kubebuilder:validation:Enum=Delete;Orphan;Foreground
type DeletionPolicy string

// RelatedResourceKind is a kind of related object kbind copies.
// +kubebuilder:validation:Enum=secrets;configmaps
type RelatedResourceKind string

// The related resource kinds.
const (
	RelatedResourceSecrets    RelatedResourceKind = "secrets"
	RelatedResourceConfigMaps RelatedResourceKind = "configmaps"
)

// RelatedResourceDirection says which side holds the source object.
// +kubebuilder:validation:Enum=FromProvider;FromConsumer
type RelatedResourceDirection string

const (
	// FromProvider means the source lives on the provider and is copied to the
	// consumer.
	FromProvider RelatedResourceDirection = "FromProvider"
	// FromConsumer means the source lives on the consumer and is copied to the
	// provider.
	FromConsumer RelatedResourceDirection = "FromConsumer"
)

// ConnectionReference names a Connection. Connections are cluster-scoped.
type ConnectionReference struct {
	// Name of the Connection.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// APIReference names one exported API, and how it appears on the
// consumer. The projection is immutable: a different projection is a new
// entry (docs/shaping.md#projection).
// +kubebuilder:validation:XValidation:rule="has(self.projection) == has(oldSelf.projection) && (!has(self.projection) || self.projection == oldSelf.projection)",message="projection is immutable: the consumer API it names holds the objects; remove this entry (it unbinds) and add a new one"
type APIReference struct {
	// Name is the provider's "<plural>.<group>", for example
	// "widgets.example.org" — not a Kind, a version or a URL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Projection makes the API appear on the consumer under another group,
	// kind and names; unset, the consumer API is the provider's.
	// ClusterBindings only: the consumer API's name is cluster-wide.
	// +optional
	Projection *Projection `json:"projection,omitempty"`

	// ObjectSelector selects the consumer objects of the API that sync, by
	// their labels; unset, every object in the binding's scope does. An
	// object that stops matching is released as if the API were removed
	// from the binding: its provider copy is deleted (kept with the
	// core.kbind.io/deletion-policy: Orphan annotation) and the finalizer
	// goes; it syncs again when it matches again
	// (docs/shaping.md#filters).
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`

	// Mutations change fields on the way: up (of the provider copy's
	// spec) and down (of the status written to the consumer object).
	// They shape data; they enforce nothing against the consumer
	// (docs/shaping.md#mutations).
	// +optional
	Mutations *Mutations `json:"mutations,omitempty"`

	// ProviderObjects says what happens to the provider's own objects of
	// the API in this consumer's scope — those kbind did not create from
	// this consumer: Ignore (unset: the default) leaves them on the
	// provider; Import brings them to the consumer, owned by the provider
	// (core.kbind.io/owner: provider): their spec and status follow the
	// provider. Import needs Namespace or Prefixed isolation and a
	// namespaced API (docs/import.md).
	// +optional
	ProviderObjects ProviderObjectsPolicy `json:"providerObjects,omitempty"`
}

// ProviderObjectsPolicy says whether the provider's own objects of an API
// appear on the consumer.
// +kubebuilder:validation:Enum=Ignore;Import
type ProviderObjectsPolicy string

const (
	// ProviderObjectsIgnore leaves the provider's own objects there.
	ProviderObjectsIgnore ProviderObjectsPolicy = "Ignore"
	// ProviderObjectsImport brings them to the consumer, owned by the
	// provider.
	ProviderObjectsImport ProviderObjectsPolicy = "Import"
)

// Mutations are ordered rules applied to each object of one bound API.
// An up rule's path must be under .spec and a down rule's under .status:
// the binding says InvalidMutation otherwise.
type Mutations struct {
	// Up rules shape the provider copy of each consumer object; their
	// paths are under .spec and their expressions see object, the
	// consumer object.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Up []MutationRule `json:"up,omitempty"`
	// Down rules shape the status written to each consumer object; their
	// paths are under .status and their expressions see object, the
	// provider object, and consumer, the consumer object.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Down []MutationRule `json:"down,omitempty"`
}

// MutationRule sets the field at path to the value of a CEL expression,
// or deletes it.
// +kubebuilder:validation:XValidation:rule="has(self.expression) != (has(self.delete) && self.delete)",message="give exactly one of expression and delete: true"
type MutationRule struct {
	// Path is a dotted path of field names: under .spec for up rules, under
	// .status for down rules (never .metadata: kbind's markers, the name
	// and the namespace are kbind's).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[.](spec|status)([.][A-Za-z_][A-Za-z0-9_-]*)+$`
	Path string `json:"path"`
	// Expression is a CEL expression (the Kubernetes API server's CEL
	// environment and cost limits) whose value the field is set to.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression,omitempty"`
	// Delete removes the field.
	// +optional
	Delete bool `json:"delete,omitempty"`
}

// Projection is how a provider API appears on the consumer: its consumer
// CRD is "<plural>.<group>" with the provider's versions, schemas,
// subresources and printer columns (docs/shaping.md#projection).
type Projection struct {
	// Group of the consumer API; default: the provider's. A Kubernetes
	// group (k8s.io, kubernetes.io and their subdomains) and kbind's own
	// (kbind.io and its subdomains) are refused.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+$')",message="group must be a DNS subdomain with at least one dot, such as acme.io"
	// +kubebuilder:validation:XValidation:rule="!(self in ['k8s.io', 'kubernetes.io', 'kbind.io'] || self.endsWith('.k8s.io') || self.endsWith('.kubernetes.io') || self.endsWith('.kbind.io'))",message="group is reserved: Kubernetes' own groups (k8s.io, kubernetes.io and their subdomains) and kbind's (kbind.io) cannot hold a projected API"
	Group string `json:"group,omitempty"`

	// Kind of the consumer API; default: the provider's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",message="kind must be CamelCase letters and digits starting with an upper-case letter, such as AcmeWidget"
	Kind string `json:"kind,omitempty"`

	// Plural resource name of the consumer API; default: the kind in lower
	// case with "s" appended when a kind is given, else the provider's.
	// The singular is the kind in lower case and the list kind the kind
	// with "List" appended.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="plural must be a lower-case DNS label, such as acmewidgets"
	Plural string `json:"plural,omitempty"`

	// ShortNames of the consumer API; default: none (the provider's could
	// clash with a consumer API's).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ShortNames []string `json:"shortNames,omitempty"`

	// Categories of the consumer API (such as "all"); default: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Categories []string `json:"categories,omitempty"`
}

// RelatedResourceSelector selects related objects. At least one of
// labelSelector (with at least one requirement) and names (with at least one
// name) is required; when both are given an object must match both.
type RelatedResourceSelector struct {
	// LabelSelector matches object labels, evaluated by the API server. An
	// empty labelSelector selects nothing on its own: give names too.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// Names matches object names, each watched by name: at most 32 (every
	// name is a watch of its own; select more objects with a
	// labelSelector, one watch). Under Namespace isolation a FromProvider
	// name is a consumer name in the Binding's namespace, read at its
	// mapped provider name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Names []string `json:"names,omitempty"`
}

// RelatedResource selects Secrets or ConfigMaps to copy between the clusters,
// keeping namespace and name. Objects in kube-system, kube-public,
// kube-node-lease and the konnector's kubeconfig Secret namespaces are never
// copied, nor objects kbind itself wrote.
// +kubebuilder:validation:XValidation:rule="has(self.reference) || (has(self.selector) && ((has(self.selector.labelSelector) && ((has(self.selector.labelSelector.matchLabels) && size(self.selector.labelSelector.matchLabels) > 0) || (has(self.selector.labelSelector.matchExpressions) && size(self.selector.labelSelector.matchExpressions) > 0))) || (has(self.selector.names) && size(self.selector.names) > 0)))",message="a selector is required: set selector.labelSelector (with at least one requirement) or selector.names, or a reference; kbind never copies every Secret or ConfigMap in scope"
// +kubebuilder:validation:XValidation:rule="!has(self.reference) || !has(self.selector) || (!has(self.selector.labelSelector) && (!has(self.selector.names) || size(self.selector.names) == 0))",message="set either selector or reference, not both: a reference entry copies exactly the object each bound object names"
type RelatedResource struct {
	// Group must be "" (the core group).
	// +optional
	// +kubebuilder:default=""
	// +kubebuilder:validation:XValidation:rule="self == ''",message="group must be empty: related resources are core Secrets and ConfigMaps"
	Group string `json:"group"`

	// Resource is secrets or configmaps.
	// +required
	Resource RelatedResourceKind `json:"resource"`

	// Direction says which side holds the source: FromProvider copies the
	// provider's objects to the consumer (such as a connection Secret the
	// provider's controller writes); FromConsumer copies the consumer's
	// objects up to the provider (such as credentials the provider's
	// controller needs).
	// +required
	Direction RelatedResourceDirection `json:"direction"`

	// Selector picks the source objects: labelSelector, names or both.
	// Exactly one of selector and reference is required (validated): there
	// is no "every object in scope".
	// +optional
	Selector RelatedResourceSelector `json:"selector,omitempty"`

	// Reference picks, for each object of one bound API, the object whose
	// name a field of it holds, in that object's namespace. The copy
	// belongs to that object: it follows the field and goes when the
	// object is deleted (unless it is annotated
	// core.kbind.io/deletion-policy: Orphan).
	// +optional
	Reference *RelatedResourceReference `json:"reference,omitempty"`
}

// RelatedResourceReference names the related object through a field of the
// bound objects of one API (docs/related.md#by-reference).
type RelatedResourceReference struct {
	// API is the bound API whose objects hold the field, as
	// "<plural>.<group>"; it must be listed in spec.apis and be namespaced.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	API string `json:"api"`

	// FieldPath is a dotted path under .spec to a string field holding the
	// name of the related object, such as
	// ".spec.writeConnectionSecretToRef.name". Only field names are
	// allowed: no list indexes, wildcards, brackets or JSONPath filters.
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[.]spec([.][A-Za-z_][A-Za-z0-9_-]*)+$')",message="fieldPath must be a dotted path of field names under .spec, such as .spec.writeConnectionSecretToRef.name (no list indexes, wildcards, brackets or filters)"
	FieldPath string `json:"fieldPath"`
}

// BindingSpec is the desired state shared by ClusterBinding and Binding.
// +kubebuilder:validation:XValidation:rule="!has(self.relatedResources) || self.relatedResources.all(r, !has(r.reference) || self.apis.exists(a, a.name == r.reference.api))",message="relatedResources[].reference.api must name an API listed in spec.apis"
type BindingSpec struct {
	// ConnectionRef names the Connection whose APIs are bound. Immutable:
	// a binding's objects belong to one provider; to move them, create a
	// new binding.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="connectionRef is immutable: the bound objects' provider copies belong to this Connection; delete this binding (it releases them) and create a new one"
	ConnectionRef ConnectionReference `json:"connectionRef"`

	// APIs to bind, each by "<plural>.<group>".
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +listType=map
	// +listMapKey=name
	APIs []APIReference `json:"apis"`

	// ConflictPolicy for a provider object of a bound object's name that
	// carries no ownership markers: Fail (the default) leaves it alone and
	// reports ForeignObjectExists on the consumer object; Adopt stamps
	// kbind's markers on it and syncs it from then on. A provider object
	// another consumer owns is never adopted (OwnedByAnother).
	// +optional
	// +kubebuilder:default=Fail
	ConflictPolicy ConflictPolicy `json:"conflictPolicy,omitempty"`

	// DeletionPolicy is what deleting one of the binding's objects (or
	// the binding, which releases them) does to its provider copy, unless
	// the object's core.kbind.io/deletion-policy annotation says
	// otherwise: Delete (unset: the default) deletes it with background
	// propagation and releases the object once the copy is gone; Orphan
	// keeps it; Foreground deletes it with foreground propagation, so the
	// object is released only once the provider's garbage collector has
	// deleted the copy's blocking dependents (docs/sync.md#deletion).
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// DeletionProtection, when true, keeps the binding from being deleted:
	// the konnector chart's admission policy refuses a DELETE of it, and
	// where that policy is not installed the konnector's cleanup finalizer
	// holds the deleting binding, drains nothing and reports
	// Ready=False/DeletionProtected. Set it to false to delete the binding
	// (a Terminating binding cannot be revived: turning protection off lets
	// its deletion proceed). Like the deletion protection of cloud
	// databases, it guards against deleting by accident (kubectl delete -f,
	// a GitOps prune), not against a namespace deletion or the garbage
	// collector. Defaults to false; the bundles kubectl kbind grant prints
	// set it (docs/bindings.md#deletion-protection).
	// +optional
	DeletionProtection bool `json:"deletionProtection,omitempty"`

	// RelatedResources are Secrets and ConfigMaps copied alongside the bound
	// APIs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	RelatedResources []RelatedResource `json:"relatedResources,omitempty"`

	// Metadata lists the labels and annotations of each bound object that
	// are copied to its provider copy (docs/sync.md#labels-and-annotations).
	// Nothing is copied when it is unset.
	// +optional
	Metadata *MetadataSync `json:"metadata,omitempty"`

	// NamespaceSelector (ClusterBindings only) selects the consumer
	// namespaces whose objects sync, by the namespaces' labels; unset,
	// every namespace. Objects of a namespace that stops matching are
	// released like objects leaving an objectSelector
	// (docs/shaping.md#filters).
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ProviderEvents: Forward (the default) re-emits the Events the
	// provider records on each object's provider copy on the consumer
	// object, so that kubectl describe shows why the provider's controller
	// is unhappy; Ignore leaves them on the provider
	// (docs/sync.md#provider-events).
	// +optional
	// +kubebuilder:default=Forward
	ProviderEvents ProviderEventsPolicy `json:"providerEvents,omitempty"`
}

// MetadataSync selects label and annotation keys. An entry is a key
// ("team"), every key of a prefix ("example.org/"), or "*" for every key.
// kbind's own keys (core.kbind.io/) and
// kubectl.kubernetes.io/last-applied-configuration are never copied.
type MetadataSync struct {
	// Labels copied from the consumer object to its provider copy.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	Labels []string `json:"labels,omitempty"`
	// Annotations copied from the consumer object to its provider copy.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	Annotations []string `json:"annotations,omitempty"`
}

// InstanceCounts are the engine's own per-object results for one bound API.
type InstanceCounts struct {
	// Total objects in scope.
	Total int32 `json:"total"`
	// Synced objects whose provider copy matches.
	Synced int32 `json:"synced"`
	// Pending objects not yet delivered.
	Pending int32 `json:"pending"`
	// Failed objects: conflicts, provider rejections, permission errors.
	Failed int32 `json:"failed"`
	// Deleting objects whose deletion waits for their provider copy to be
	// gone (its finalizers keep it; under the Foreground deletion policy,
	// its blocking dependents); they count as pending too.
	// +optional
	Deleting int32 `json:"deleting,omitempty"`
	// Imported objects: copies of the provider's own objects
	// (apis[].providerObjects: Import, core.kbind.io/owner: provider) that
	// follow the provider; they count as synced too.
	// +optional
	Imported int32 `json:"imported,omitempty"`
}

// BoundAPI is the state of one bound API.
type BoundAPI struct {
	// Name is the consumer API's "<plural>.<group>": the provider's, or
	// the projection's.
	Name string `json:"name"`
	// ProviderAPI is the provider's "<plural>.<group>" when the API is
	// projected (it differs from name); empty otherwise.
	// +optional
	ProviderAPI string `json:"providerAPI,omitempty"`
	// CRDHash is the consumer CRD's schema hash.
	// +optional
	CRDHash string `json:"crdHash,omitempty"`
	// ConflictCount is the number of objects skipped because of ownership
	// conflicts.
	// +optional
	ConflictCount int32 `json:"conflictCount,omitempty"`
	// Instances counts per-object sync results.
	// +optional
	Instances *InstanceCounts `json:"instances,omitempty"`
	// UnbindDeletesCRD is true on a ClusterBinding whose deletion (or the
	// removal of this API from it) would delete the consumer CRD, and with
	// it every consumer object of the API: no other binding lists the API,
	// kbind created the CRD for this Connection and pullPolicy is not All
	// (SCHEMA-6). The chart's deletion-protection policy and kubectl kbind
	// unbind quote it.
	// +optional
	UnbindDeletesCRD bool `json:"unbindDeletesCRD,omitempty"`
}

// RelatedStatus summarizes the related Secrets and ConfigMaps a binding
// copies.
type RelatedStatus struct {
	// Copies is the number of copies this binding keeps in sync.
	Copies int32 `json:"copies"`
	// Conflicts counts targets that exist and are not this binding's; they
	// are left untouched.
	Conflicts int32 `json:"conflicts"`
	// Skipped counts sources that are never copied (service-account
	// tokens, objects in kube-system, kube-public, kube-node-lease or the
	// konnector's kubeconfig Secret namespaces), entries that copy nothing
	// (no selector, or a Binding in such a namespace), and sources the
	// target side refused.
	Skipped int32 `json:"skipped"`
}

// KeptCopies counts the provider copies of one API that a binding's
// spec.deletionProtection kept instead of deleting (BIND-5): copies of
// objects it no longer selects, or of an API it no longer lists. They are
// labelled core.kbind.io/kept: DeletionProtection and annotated
// core.kbind.io/kept-by with the binding on the provider.
type KeptCopies struct {
	// Name is the consumer API's "<plural>.<group>", as in boundAPIs.
	Name string `json:"name"`
	// ProviderAPI is the provider's "<plural>.<group>" when the API is
	// projected (it differs from name); empty otherwise.
	// +optional
	ProviderAPI string `json:"providerAPI,omitempty"`
	// Count is how many kept copies of the API the provider holds.
	Count int32 `json:"count"`
	// Namespaces are the provider namespaces holding them, sorted, at most
	// ten (empty for a cluster-scoped API).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	Namespaces []string `json:"namespaces,omitempty"`
}

// BindingStatus is the observed state shared by ClusterBinding and Binding.
type BindingStatus struct {
	// BoundAPIs is the state of each bound API, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	BoundAPIs []BoundAPI `json:"boundAPIs,omitempty"`

	// RelatedResources summarizes the related-resource copies.
	// +optional
	RelatedResources *RelatedStatus `json:"relatedResources,omitempty"`

	// KeptCopies counts, per API, the provider copies this binding's
	// deletion protection kept instead of deleting (BIND-5, the CopiesKept
	// condition), sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	KeptCopies []KeptCopies `json:"keptCopies,omitempty"`

	// Conditions: Ready, Synced, Conflicts, PermissionDenied, CopiesKept.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterBinding binds APIs of a Connection for every namespace and for
// cluster-scoped APIs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kbind,shortName=kbcb
// +kubebuilder:printcolumn:name="Connection",type=string,JSONPath=`.spec.connectionRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Conflicts",type=string,JSONPath=`.status.conditions[?(@.type=="Conflicts")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BindingSpec   `json:"spec"`
	Status BindingStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterBindingList is a list of ClusterBindings.
type ClusterBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterBinding `json:"items"`
}

// Binding binds namespaced APIs of a Connection for its own namespace only.
//
// +kubebuilder:validation:XValidation:rule="!has(self.spec.namespaceSelector)",message="spec.namespaceSelector is for ClusterBindings: a Binding covers its own namespace only"
// +kubebuilder:validation:XValidation:rule="self.spec.apis.all(a, !has(a.projection))",message="a projection names a cluster-wide consumer API, which is a cluster admin's to choose: project the API in a ClusterBinding"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=kbind,shortName=kbb
// +kubebuilder:printcolumn:name="Connection",type=string,JSONPath=`.spec.connectionRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Conflicts",type=string,JSONPath=`.status.conditions[?(@.type=="Conflicts")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Binding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BindingSpec   `json:"spec"`
	Status BindingStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BindingList is a list of Bindings.
type BindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Binding `json:"items"`
}

func init() {
	register(&ClusterBinding{}, &ClusterBindingList{}, &Binding{}, &BindingList{})
}
