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

// SchemaSource selects where consumer CRD schemas come from.
// +kubebuilder:validation:Enum=Auto;CRD;OpenAPI
type SchemaSource string

const (
	// SchemaSourceAuto uses CRD when the provider exports at least one
	// labelled CRD, and OpenAPI when the labelled CRD list is empty —
	// unless it resolved to CRD before: then it stays CRD (an empty list
	// exports nothing).
	SchemaSourceAuto SchemaSource = "Auto"
	// SchemaSourceCRD copies provider CRDs labelled core.kbind.io/exported.
	SchemaSourceCRD SchemaSource = "CRD"
	// SchemaSourceOpenAPI synthesizes CRDs from discovery and /openapi/v3.
	SchemaSourceOpenAPI SchemaSource = "OpenAPI"
)

// ActiveSchemaSource is the source Auto resolved to.
// +kubebuilder:validation:Enum=CRD;OpenAPI
type ActiveSchemaSource string

// The sources Auto resolves to.
const (
	ActiveSchemaSourceCRD     ActiveSchemaSource = "CRD"
	ActiveSchemaSourceOpenAPI ActiveSchemaSource = "OpenAPI"
)

// PullPolicy selects which exported APIs get a consumer CRD.
// +kubebuilder:validation:Enum=Bound;All;None
type PullPolicy string

const (
	// PullPolicyBound installs the CRDs that a binding names.
	PullPolicyBound PullPolicy = "Bound"
	// PullPolicyAll installs every exported API, bound or not.
	PullPolicyAll PullPolicy = "All"
	// PullPolicyNone never creates CRDs; they are managed outside kbind.
	PullPolicyNone PullPolicy = "None"
)

// UpdatePolicy selects whether installed consumer CRDs follow provider changes.
// +kubebuilder:validation:Enum=Always;Once
type UpdatePolicy string

const (
	// UpdatePolicyAlways follows provider schema changes.
	UpdatePolicyAlways UpdatePolicy = "Always"
	// UpdatePolicyOnce never updates a CRD after its first install.
	UpdatePolicyOnce UpdatePolicy = "Once"
)

// APIScope is the scope of an exported API.
// +kubebuilder:validation:Enum=Namespaced;Cluster
type APIScope string

// The scopes of an exported API.
const (
	APIScopeNamespaced APIScope = "Namespaced"
	APIScopeCluster    APIScope = "Cluster"
)

// InsecureKubeconfigFeature is a kubeconfig feature that weakens the
// connection to the provider; kbind refuses a kubeconfig using one unless
// the Connection lists it in spec.allowInsecure.
// +kubebuilder:validation:Enum=SkipTLSVerify;ProxyURL;PlainHTTP
type InsecureKubeconfigFeature string

const (
	// InsecureSkipTLSVerify means a cluster sets insecure-skip-tls-verify, so the
	// provider's certificate is not checked.
	InsecureSkipTLSVerify InsecureKubeconfigFeature = "SkipTLSVerify"
	// InsecureProxyURL means a cluster sets proxy-url, so requests (and the
	// credentials in them) go through a proxy.
	InsecureProxyURL InsecureKubeconfigFeature = "ProxyURL"
	// InsecurePlainHTTP means a cluster's server is an http:// URL, so requests
	// and credentials travel unencrypted.
	InsecurePlainHTTP InsecureKubeconfigFeature = "PlainHTTP"
)

// IsolationMode says where a Connection's consumer objects live on the
// provider (docs/isolation.md).
// +kubebuilder:validation:Enum=None;Namespace;Prefixed
type IsolationMode string

const (
	// IsolationNone keeps consumer namespaces and names on the provider.
	IsolationNone IsolationMode = "None"
	// IsolationNamespace writes every namespaced consumer object, from any
	// consumer namespace, into one provider namespace under a derived name.
	// Cluster-scoped APIs cannot be bound.
	IsolationNamespace IsolationMode = "Namespace"
	// IsolationPrefixed maps consumer namespace X to provider namespace
	// "<prefix>-X" and a cluster-scoped name N to "<prefix>-N".
	IsolationPrefixed IsolationMode = "Prefixed"
)

// Isolation says where a Connection's consumer objects live on the
// provider, so that many consumers can share one provider without meeting.
// +kubebuilder:validation:XValidation:rule="self.mode == 'Namespace' ? has(self.__namespace__) : !has(self.__namespace__)",message="namespace is required with mode Namespace, and only allowed with it"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Prefixed' ? has(self.prefix) : !has(self.prefix)",message="prefix is required with mode Prefixed, and only allowed with it"
type Isolation struct {
	// Mode is None (the same namespace and name on the provider), Namespace
	// (everything in one provider namespace) or Prefixed (namespace X
	// becomes "<prefix>-X").
	// +optional
	// +kubebuilder:default=None
	Mode IsolationMode `json:"mode,omitempty"`

	// Namespace is the provider namespace every consumer object is written
	// to, under a derived name (mode Namespace). A DNS label.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// Prefix is prepended, with a "-", to consumer namespaces and to the
	// names of cluster-scoped objects (mode Prefixed). A DNS label of at
	// most 30 characters, which leaves room for readable namespaces.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Prefix string `json:"prefix,omitempty"`
}

// FromNamespaces says which namespaces' Bindings may use a Connection.
// +kubebuilder:validation:Enum=None;All;Selector
type FromNamespaces string

const (
	// FromNamespacesNone admits no namespaced Binding: only ClusterBindings
	// (which only cluster admins create) use the Connection.
	FromNamespacesNone FromNamespaces = "None"
	// FromNamespacesAll admits the Bindings of every namespace.
	FromNamespacesAll FromNamespaces = "All"
	// FromNamespacesSelector admits the Bindings of the namespaces whose
	// labels match the selector.
	FromNamespacesSelector FromNamespaces = "Selector"
)

// NamespacedBindings says which namespaces' Bindings may use a Connection
// (modelled on Gateway API's allowedRoutes). A Binding in a namespace the
// Connection does not admit is Ready=False/Forbidden and gets nothing:
// no consumer CRD, no instance or related sync, no provider request.
// ClusterBindings are not limited.
// +kubebuilder:validation:XValidation:rule="(has(self.from) && self.from == 'Selector') == has(self.selector)",message="selector is required with from: Selector, and only allowed with it"
type NamespacedBindings struct {
	// From is None (no namespaced Binding may use the Connection), All
	// (every namespace's may) or Selector (those of the namespaces whose
	// labels match selector).
	// +optional
	// +kubebuilder:default=None
	From FromNamespaces `json:"from,omitempty"`

	// Selector selects the namespaces whose Bindings may use the
	// Connection (from: Selector); {} selects every namespace. Select on
	// labels only cluster admins can set, such as
	// kubernetes.io/metadata.name.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// SecretKeyReference points at one key of a Secret.
type SecretKeyReference struct {
	// Namespace of the Secret. Required and never inferred; it must be one of
	// the konnector's allowed Secret namespaces.
	// +required
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`

	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Key in the Secret's data that holds the kubeconfig.
	// +optional
	// +kubebuilder:default=kubeconfig
	Key string `json:"key,omitempty"`
}

// SchemaPolicy says where consumer CRDs come from and when they are
// installed and updated.
type SchemaPolicy struct {
	// Source of the schemas: CRD copies the provider CRDs labelled
	// core.kbind.io/exported; OpenAPI synthesizes CRDs from the provider's
	// discovery and /openapi/v3 documents (every non-built-in resource);
	// Auto (the default) uses CRD when the provider labels at least one CRD
	// and OpenAPI otherwise, and once it resolved to CRD it stays CRD.
	// status.activeSchemaSource says which one is in use.
	// +optional
	// +kubebuilder:default=Auto
	Source SchemaSource `json:"source,omitempty"`

	// PullPolicy says which exported APIs get a consumer CRD: Bound (the
	// default) installs the CRDs of the APIs a binding lists and deletes
	// one with the last ClusterBinding that lists it; All installs every
	// exported API, bound or not, and never deletes one; None never creates
	// nor deletes a CRD: they are managed outside kbind (which then takes
	// over an existing CRD of the API's name).
	// +optional
	// +kubebuilder:default=Bound
	PullPolicy PullPolicy `json:"pullPolicy,omitempty"`

	// UpdatePolicy says whether installed CRDs follow provider changes:
	// Always (the default) updates them when the provider's schema changes;
	// Once installs them and never updates them after.
	// +optional
	// +kubebuilder:default=Always
	UpdatePolicy UpdatePolicy `json:"updatePolicy,omitempty"`
}

// ConnectionSpec is the desired state of a Connection.
type ConnectionSpec struct {
	// KubeconfigSecretRef points at the Secret key holding the provider
	// kubeconfig. Immutable: create a new Connection to point elsewhere.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kubeconfigSecretRef is immutable; create a new Connection to use another Secret"
	KubeconfigSecretRef SecretKeyReference `json:"kubeconfigSecretRef"`

	// Schema says where consumer CRDs come from and when they are installed
	// and updated.
	// +optional
	// +kubebuilder:default={}
	Schema SchemaPolicy `json:"schema,omitempty"`

	// AutoBind maintains a ClusterBinding named after this Connection that
	// binds every exported API.
	// +optional
	// +kubebuilder:default=false
	AutoBind bool `json:"autoBind,omitempty"`

	// AllowInsecure lists the insecure kubeconfig features this Connection
	// accepts: SkipTLSVerify (a cluster sets insecure-skip-tls-verify, so
	// the provider's certificate is not checked), ProxyURL (a cluster sets
	// proxy-url, so requests and the credentials in them go through a
	// proxy), PlainHTTP (the server is an http:// URL: requests and
	// credentials travel unencrypted). A kubeconfig using one is refused
	// (SecretValid=False) unless it is listed here; the SecretValid message
	// names what is allowed.
	// +optional
	// +listType=set
	AllowInsecure []InsecureKubeconfigFeature `json:"allowInsecure,omitempty"`

	// Isolation says where consumer objects live on the provider (None,
	// Namespace or Prefixed). Immutable: the provider copies of a Connection
	// cannot move; create a new Connection to change it.
	// +optional
	// +kubebuilder:default={mode: None}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="isolation is immutable; create a new Connection to change it"
	Isolation Isolation `json:"isolation,omitempty"`

	// NamespacedBindings says which namespaces' Bindings may use this
	// Connection: from None (the default), All, or Selector with a
	// namespace selector. ClusterBindings are not limited.
	// +optional
	// +kubebuilder:default={from: None}
	NamespacedBindings *NamespacedBindings `json:"namespacedBindings,omitempty"`

	// DeletionProtection, when true, keeps the Connection from being
	// deleted: the konnector chart's admission policy refuses a DELETE of
	// it, and where that policy is not installed the konnector's cleanup
	// finalizer holds the deleting Connection, drains none of its bindings
	// and reports Ready=False/DeletionProtected. Set it to false to delete
	// the Connection. The autoBind ClusterBinding carries its Connection's
	// protection. Defaults to false; the bundles kubectl kbind grant prints
	// set it (docs/connections.md#deletion-protection).
	// +optional
	DeletionProtection bool `json:"deletionProtection,omitempty"`
}

// NamespacedBindingsOf returns which namespaces' Bindings may use the
// Connection; an object stored before the field existed admits none.
func (s ConnectionSpec) NamespacedBindingsOf() NamespacedBindings {
	if s.NamespacedBindings == nil || s.NamespacedBindings.From == "" {
		return NamespacedBindings{From: FromNamespacesNone}
	}
	return *s.NamespacedBindings
}

// IsolationOf returns the Connection's isolation; an object stored before
// the field existed is None.
func (s ConnectionSpec) IsolationOf() Isolation {
	if s.Isolation.Mode == "" {
		return Isolation{Mode: IsolationNone}
	}
	return s.Isolation
}

// ExportedAPI is one API the provider exports.
type ExportedAPI struct {
	// Name is "<plural>.<group>".
	Name string `json:"name"`
	// Group of the API.
	Group string `json:"group"`
	// Resource is the plural resource name.
	Resource string `json:"resource"`
	// Scope of the API.
	Scope APIScope `json:"scope"`
	// Versions served by the provider.
	// +optional
	// +listType=atomic
	Versions []string `json:"versions,omitempty"`
}

// CredentialKind is the kind of credential a Connection's kubeconfig holds.
// +kubebuilder:validation:Enum=ServiceAccountToken;Token;ClientCertificate;Basic;None
type CredentialKind string

const (
	// CredentialServiceAccountToken is a bound ServiceAccount token (a JWT
	// the provider issued for one of its ServiceAccounts, with an expiry):
	// the konnector renews it through the TokenRequest API.
	CredentialServiceAccountToken CredentialKind = "ServiceAccountToken"
	// CredentialToken is any other bearer token (a legacy ServiceAccount
	// token Secret's, an OIDC token, an opaque token): kbind reads its
	// expiry when it is a JWT, and cannot renew it.
	CredentialToken CredentialKind = "Token"
	// CredentialClientCertificate is a client certificate: its NotAfter is
	// the expiry; kbind cannot renew it.
	CredentialClientCertificate CredentialKind = "ClientCertificate"
	// CredentialBasic is a username and password.
	CredentialBasic CredentialKind = "Basic"
	// CredentialNone means the kubeconfig holds no credential.
	CredentialNone CredentialKind = "None"
)

// CredentialSource says which Secret holds the credential in use.
// +kubebuilder:validation:Enum=Kubeconfig;Renewed
type CredentialSource string

const (
	// CredentialSourceKubeconfig is the Connection's kubeconfig Secret.
	CredentialSourceKubeconfig CredentialSource = "Kubeconfig"
	// CredentialSourceRenewed is the Secret the konnector owns, holding the
	// token it renewed (status.credentials.renewedSecretRef).
	CredentialSourceRenewed CredentialSource = "Renewed"
)

// SecretReference names a Secret.
type SecretReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ConnectionCredentials describes the credential a Connection uses on the
// provider — its kind, subject and expiry, never the credential itself.
type ConnectionCredentials struct {
	// Kind of the credential in use.
	Kind CredentialKind `json:"kind"`
	// Subject is the user the provider knows the credential as (a
	// ServiceAccount token's system:serviceaccount:<ns>:<name>, a client
	// certificate's common name), "" when kbind cannot tell.
	// +optional
	Subject string `json:"subject,omitempty"`
	// ExpiresAt is when the credential in use expires; absent when it does
	// not (or kbind cannot tell).
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Renews is true when the konnector renews the credential before it
	// expires (a ServiceAccount token it may request anew).
	// +optional
	Renews bool `json:"renews,omitempty"`
	// RenewAt is when the next renewal is due (two thirds of the current
	// token's lifetime); only with renews.
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
	// LastRenewed is when the konnector last obtained a new token.
	// +optional
	LastRenewed *metav1.Time `json:"lastRenewed,omitempty"`
	// Source says which Secret holds the credential in use: the
	// Connection's kubeconfig Secret, or the konnector's own Secret with
	// the renewed token.
	// +optional
	Source CredentialSource `json:"source,omitempty"`
	// RenewedSecretRef is the Secret the konnector owns, next to the
	// kubeconfig Secret, holding the last token it renewed. The konnector
	// never writes the kubeconfig Secret.
	// +optional
	RenewedSecretRef *SecretReference `json:"renewedSecretRef,omitempty"`
}

// ConnectionStatus is the observed state of a Connection.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.remoteClusterUID) || has(self.remoteClusterUID)",message="remoteClusterUID cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.localClusterUID) || has(self.localClusterUID)",message="localClusterUID cannot be removed once set"
type ConnectionStatus struct {
	// RemoteClusterUID is the provider cluster identity, pinned on first
	// success.
	// +optional
	// +kubebuilder:validation:XValidation:rule="oldSelf == '' || self == oldSelf",message="remoteClusterUID is immutable once set"
	RemoteClusterUID string `json:"remoteClusterUID,omitempty"`

	// LocalClusterUID is the consumer cluster identity, pinned on first
	// success.
	// +optional
	// +kubebuilder:validation:XValidation:rule="oldSelf == '' || self == oldSelf",message="localClusterUID is immutable once set"
	LocalClusterUID string `json:"localClusterUID,omitempty"`

	// ActiveSchemaSource is the source in use: what Auto resolved to.
	// +optional
	ActiveSchemaSource ActiveSchemaSource `json:"activeSchemaSource,omitempty"`

	// ExportedAPIs are the APIs the provider exports, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	ExportedAPIs []ExportedAPI `json:"exportedAPIs,omitempty"`

	// Credentials describes the credential in use on the provider: kind,
	// subject, expiry and renewal — never the credential.
	// +optional
	Credentials *ConnectionCredentials `json:"credentials,omitempty"`

	// KonnectorVersion is the version of the konnector that last
	// reconciled the Connection (kubectl kbind doctor checks the skew).
	// +optional
	KonnectorVersion string `json:"konnectorVersion,omitempty"`

	// Conditions: SecretValid, Connected, PermissionDenied, Ready,
	// SchemaInSync, Heartbeat, CredentialsRenewed, CredentialsExpiring.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Connection is a consumer-side link to one provider cluster: a kubeconfig
// Secret and the schema policy for the APIs it exports.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kbind,shortName=kbconn
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.activeSchemaSource`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.kubeconfigSecretRef.name`
// +kubebuilder:printcolumn:name="Isolation",type=string,JSONPath=`.spec.isolation.mode`
// +kubebuilder:printcolumn:name="Bindings From",type=string,JSONPath=`.spec.namespacedBindings.from`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.credentials.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Connection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConnectionSpec   `json:"spec"`
	Status ConnectionStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ConnectionList is a list of Connections.
type ConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Connection `json:"items"`
}

func init() {
	register(&Connection{}, &ConnectionList{})
}
