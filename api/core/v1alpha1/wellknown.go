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

// Labels kbind reads or writes (docs/concepts.md#well-known-strings).
const (
	// ExportedLabel opts a provider CRD into export for the CRD schema source.
	// Only the exact value ExportedLabelValue counts.
	ExportedLabel      = "core.kbind.io/exported"
	ExportedLabelValue = "true"

	// ManagedLabel marks everything kbind writes: consumer CRDs, provider
	// copies, namespaces it creates, related copies, heartbeat Leases and the
	// autoBind ClusterBinding.
	ManagedLabel      = "core.kbind.io/managed"
	ManagedLabelValue = "true"

	// ConsumerClusterUIDLabel carries the consumer cluster UID on provider
	// copies, related copies, created namespaces and Leases, so that provider
	// watches and the backend reaper can select server-side. The same key is
	// also written as an annotation (ConsumerClusterUIDAnnotation).
	ConsumerClusterUIDLabel = "core.kbind.io/consumer-cluster-uid"

	// ConsumerNamespaceLabel carries, on a provider copy written under
	// isolation (and on a namespace kbind creates for Prefixed isolation),
	// the consumer namespace it stands for, so that a provider operator can
	// select the copies of one consumer namespace. The same key is also
	// written as an annotation (ConsumerNamespaceAnnotation).
	ConsumerNamespaceLabel = "core.kbind.io/consumer-namespace"
	// ConsumerNameLabel carries, on a provider copy written under isolation,
	// the consumer object's name when it fits a label value (63
	// characters), else "sha256-" and 16 hex characters of the name (see
	// ConsumerNameLabelValue). The annotation of the same key always holds
	// the name itself.
	ConsumerNameLabel = "core.kbind.io/consumer-name"

	// RelatedOwnerLabel carries, on a related copy made for a reference
	// (relatedResources[].reference), the UID of the bound consumer object
	// whose field names it: the copy goes with that object, and an object
	// deleted with the Orphan policy releases exactly these copies.
	RelatedOwnerLabel = "core.kbind.io/related-owner"

	// PrefixLabel carries, under Prefixed isolation, the Connection's prefix
	// on the provider objects that have no namespace of their own: the
	// namespaces kbind creates (and the Lease namespace "<prefix>") and the
	// copies of cluster-scoped objects. The admission policy a provider
	// grants a Prefixed consumer (docs/isolation.md#permissions) lets the
	// consumer write only into namespaces, and only cluster-scoped objects,
	// that carry its own prefix here: a consumer whose prefix another one
	// extends ("team" and "team-a") can never write into the other's.
	PrefixLabel = "core.kbind.io/prefix"
)

// Annotations kbind reads or writes (docs/concepts.md#well-known-strings).
const (
	// ConnectionAnnotation names the Connection that supplies a consumer CRD
	// (its schema owner), that renews a heartbeat Lease, or — on a consumer
	// object, output only — the Connection the object syncs through (its
	// route, docs/bindings.md#one-api-several-providers).
	ConnectionAnnotation = "core.kbind.io/connection"

	// SchemaHashAnnotation is "sha256:" followed by 16 hex characters of the
	// desired consumer CRD spec.
	SchemaHashAnnotation = "core.kbind.io/schema-hash"

	// ProviderAPIAnnotation and ProviderKindAnnotation are on a projected
	// consumer CRD (docs/shaping.md#projection): the provider's
	// "<plural>.<group>" and kind its objects sync to. A consumer CRD
	// without them is the provider's API under its own name.
	ProviderAPIAnnotation  = "core.kbind.io/provider-api"
	ProviderKindAnnotation = "core.kbind.io/provider-kind"

	// ConsumerClusterUIDAnnotation is ownership marker 1: the consumer's
	// localClusterUID.
	ConsumerClusterUIDAnnotation = "core.kbind.io/consumer-cluster-uid"

	// ConsumerObjectUIDAnnotation is ownership marker 2: the UID of the
	// consumer object a provider copy belongs to.
	ConsumerObjectUIDAnnotation = "core.kbind.io/consumer-object-uid"

	// ConsumerNamespaceAnnotation and ConsumerNameAnnotation name, on a
	// provider copy written under isolation, the consumer object it stands
	// for: the way back from a derived provider name is always these
	// annotations, never parsing the name.
	ConsumerNamespaceAnnotation = "core.kbind.io/consumer-namespace"
	ConsumerNameAnnotation      = "core.kbind.io/consumer-name"

	// RelatedBindingAnnotation identifies the binding (and entry) that owns a
	// related Secret or ConfigMap copy.
	RelatedBindingAnnotation = "core.kbind.io/related-binding"

	// SyncedMetadataAnnotation is stamped on a provider copy when a binding
	// copies labels or annotations to it: the keys copied, so a key removed
	// on the consumer is removed on the provider too.
	SyncedMetadataAnnotation = "core.kbind.io/synced-metadata"

	// AcceptStorageVersionAnnotation on a consumer CRD kbind created
	// accepts a provider storage-version switch kbind refused
	// (ReasonStorageVersionChange): its value is the new storage version
	// the operator accepts, after migrating or checking the stored
	// objects (docs/bindings.md#storage-version-changes). A value naming
	// another version accepts nothing.
	AcceptStorageVersionAnnotation = "core.kbind.io/accept-storage-version"
	// ProviderConversionAnnotation on a consumer CRD kbind built from a
	// provider CRD (CRD source) records the provider's
	// spec.conversion.strategy, None or Webhook: the consumer always
	// converts with None, and a storage-version switch the provider
	// converts by webhook is refused (ReasonStorageVersionChange).
	ProviderConversionAnnotation = "core.kbind.io/provider-conversion"

	// ConflictAnnotation is set on a consumer instance whose provider target
	// belongs to someone else; its value is a conflict reason. It is removed
	// once the object syncs cleanly.
	ConflictAnnotation = "core.kbind.io/conflict"

	// DeletionPolicyAnnotation on a consumer instance selects what happens to
	// the provider copy when the consumer object is deleted.
	DeletionPolicyAnnotation = "core.kbind.io/deletion-policy"
	// DeletionPolicyOrphan keeps the provider copy.
	DeletionPolicyOrphan = "Orphan"
	// DeletionPolicyDelete deletes the provider copy, the default on
	// deletion; set explicitly, it also deletes the old provider's copy
	// when the object moves to another provider
	// (docs/bindings.md#moving-between-providers).
	DeletionPolicyDelete = "Delete"
	// DeletionPolicyForeground deletes the provider copy with foreground
	// propagation: the consumer object is released only once the copy is
	// gone, which the provider's garbage collector lets happen after the
	// copy's dependents that block owner deletion are gone.
	DeletionPolicyForeground = "Foreground"

	// OwnerAnnotation on a consumer object says who owns it; its one
	// value, OwnerProvider, marks an object kbind imported from the
	// provider (apis[].providerObjects: Import): its spec and status
	// follow the provider object, and it never goes up.
	OwnerAnnotation = "core.kbind.io/owner"
	// OwnerProvider is OwnerAnnotation's value on an imported object.
	OwnerProvider = "provider"
	// HandOverAnnotation on a consumer object asks the konnector to hand
	// it over (docs/import.md#hand-over): HandOverConsumer on an imported
	// object makes it the consumer's (its spec goes up from then on),
	// HandOverProvider on a consumer-owned object makes it the provider's
	// (imported from then on). The konnector removes it once done; kubectl
	// kbind adopt and release set it and wait.
	HandOverAnnotation = "core.kbind.io/hand-over"
	// HandOverConsumer asks that an imported object become the consumer's.
	HandOverConsumer = "consumer"
	// HandOverProvider asks that a consumer-owned object become the
	// provider's.
	HandOverProvider = "provider"

	// MovedAnnotation is written on a provider copy kbind kept when its
	// consumer object moved to another provider, in place of kbind's
	// markers: it names the Connection the object moved to and the
	// consumer object. The copy is no longer kbind's.
	MovedAnnotation = "core.kbind.io/moved"

	// StaleSinceAnnotation is written by the backend on a heartbeat Lease it
	// judges stale, with the RFC 3339 time it became stale.
	StaleSinceAnnotation = "core.kbind.io/stale-since"

	// ReapMarkedAtAnnotation is the backend reaper's phase-1 mark on a
	// provider copy or related copy of a consumer whose heartbeat Leases
	// are all stale, with the RFC 3339 time (the backend's clock) it was
	// marked. A live konnector, which watches its copies, removes it; only
	// a mark that survives the backend's --reap-grace leads to a delete.
	ReapMarkedAtAnnotation = "core.kbind.io/reap-marked-at"

	// KeptLabel is on provider copies kbind keeps on purpose (KeptOrphan:
	// released under the Orphan deletion policy): they keep their markers,
	// and the backend reaper never deletes (nor marks) an object carrying
	// it. The konnector removes it when the object is synced again.
	KeptLabel = "core.kbind.io/kept"
	// KeptOrphan is KeptLabel's value on a copy kept by an Orphan release.
	KeptOrphan = "Orphan"
	// KeptDeletionProtection is KeptLabel's value on a copy that a binding
	// with spec.deletionProtection: true kept when it stopped syncing the
	// copy's object without the object being deleted: the object is no
	// longer selected (its labels, its namespace's labels, a selector
	// edit), or its API left the binding's spec.apis (BIND-5,
	// docs/bindings.md#deletion-protection). The copy keeps kbind's
	// markers, so selecting the object again makes it the object's copy
	// again (the konnector then removes the label and KeptByAnnotation).
	KeptDeletionProtection = "DeletionProtection"
	// KeptByAnnotation names, on a copy labelled KeptDeletionProtection,
	// the binding that kept it: "ClusterBinding/<name>" or
	// "Binding/<namespace>/<name>" (the consumer's). The binding's
	// status.keptCopies counts by it and kubectl kbind kept lists by it;
	// KeptLabel alone is the mark the backend reaper respects.
	KeptByAnnotation = "core.kbind.io/kept-by"

	// DeletionProtectionLabel, with the value "true", protects a
	// Connection's kubeconfig Secret like spec.deletionProtection protects
	// the Connection: the konnector chart's admission policy refuses a
	// DELETE of a Secret carrying it (a Secret deleted under a live
	// Connection would sit Terminating behind kbind's cleanup finalizer).
	// The bundles kubectl kbind grant prints set it; remove the label to
	// delete the Secret.
	DeletionProtectionLabel = "core.kbind.io/deletion-protection"

	// The heartbeat Lease says who renews it (docs/connections.md#the-heartbeat-lease):
	// the konnector's version and the core.kbind.io API version it serves,
	// the user the provider knows its credential as, and that credential's
	// kind and expiry — never the credential. Written with each renewal
	// (no extra request); `kubectl kbind consumers` and the backend read
	// them.
	KonnectorVersionAnnotation = "core.kbind.io/konnector-version"
	// APIVersionAnnotation is the core.kbind.io API version the konnector
	// serves, e.g. "core.kbind.io/v1alpha1".
	APIVersionAnnotation = "core.kbind.io/api-version"
	// ProviderUserAnnotation is the user the Connection's credential
	// authenticates as on the provider (a ServiceAccount token's
	// system:serviceaccount:<ns>:<name>, a client certificate's common
	// name), "" when kbind cannot tell.
	ProviderUserAnnotation = "core.kbind.io/provider-user"
	// CredentialKindAnnotation is the CredentialKind in use.
	CredentialKindAnnotation = "core.kbind.io/credential-kind"
	// CredentialExpiryAnnotation is when the credential in use expires
	// (RFC 3339), absent when it does not.
	CredentialExpiryAnnotation = "core.kbind.io/credential-expiry"
	// RenewedFromAnnotation is on the Secret a konnector keeps a renewed
	// token in: the hash of the kubeconfig whose token it renews, so that
	// a changed kubeconfig Secret always wins over the renewed token.
	RenewedFromAnnotation = "core.kbind.io/renewed-from"
	// KonnectorNonceAnnotation is on the heartbeat Lease: a random value
	// each konnector process draws when it starts and writes with each
	// renewal. A restart, a leader failover or an upgrade changes it once;
	// two values alternating on one Lease mean two live konnectors with one
	// consumer identity (a restored clone), and both report
	// DuplicateConsumer (docs/troubleshooting.md#duplicate-consumer). Not a
	// secret.
	KonnectorNonceAnnotation = "core.kbind.io/konnector-nonce"
	// CredentialRenewsAnnotation is "true" when the konnector renews the
	// credential before it expires.
	CredentialRenewsAnnotation = "core.kbind.io/credential-renews"
)

// Finalizers.
const (
	// SyncerFinalizer is held on a consumer instance until its owned provider
	// copy is gone.
	SyncerFinalizer = "core.kbind.io/syncer"

	// CleanupFinalizer orders teardown of Connections, their Secrets,
	// ClusterBindings and Bindings.
	CleanupFinalizer = "core.kbind.io/cleanup"
)

// Server-side apply field managers for provider writes.
const (
	FieldManager        = "kbind-konnector"
	RelatedFieldManager = "kbind-konnector-related"
)

// Leader election Lease names.
const (
	KonnectorLeaderElectionID = "konnector.kbind.io"
	BackendLeaderElectionID   = "backend.kbind.io"
)

// DefaultKubeconfigKey is the Secret key read when kubeconfigSecretRef.key is
// omitted.
const DefaultKubeconfigKey = "kubeconfig"

// Category is the kubectl category every kbind kind belongs to
// (`kubectl get kbind`).
const Category = "kbind"
