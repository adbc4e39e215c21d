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

// ConditionType is the type of a status condition on a kbind object.
type ConditionType string

// Condition types (docs/connections.md, docs/bindings.md#conditions).
const (
	// ConditionReady is the summary condition of every kbind kind.
	ConditionReady ConditionType = "Ready"

	// ConditionSecretValid reports whether the Connection's kubeconfig Secret
	// resolved to a usable kubeconfig.
	ConditionSecretValid ConditionType = "SecretValid"
	// ConditionConnected reports whether the provider identity was read and
	// matches the pinned UID.
	ConditionConnected ConditionType = "Connected"
	// ConditionPermissionDenied is True while the provider refuses a request
	// kbind needs; its message names the verb and resource.
	ConditionPermissionDenied ConditionType = "PermissionDenied"
	// ConditionSchemaInSync reports whether every consumer CRD a Connection
	// supplies carries the schema its policy calls for.
	ConditionSchemaInSync ConditionType = "SchemaInSync"
	// ConditionHeartbeat reports the last heartbeat Lease renewal. It is
	// informational and never affects Ready.
	ConditionHeartbeat ConditionType = "Heartbeat"
	// ConditionCredentialsRenewed reports, for a credential the konnector
	// renews (a ServiceAccount token), the last renewal: True after one
	// succeeded or while none is due yet, False/RenewalFailed with the
	// provider's refusal while renewing fails. Absent for credentials
	// kbind cannot renew. Informational: never affects Ready.
	ConditionCredentialsRenewed ConditionType = "CredentialsRenewed"
	// ConditionCredentialsExpiring is True (ExpiresSoon, or Expired) from
	// the konnector's lead time before the credential in use expires,
	// and at the latest when a fifth of its lifetime is left, unless the
	// konnector will renew it in time; False otherwise. Informational.
	ConditionCredentialsExpiring ConditionType = "CredentialsExpiring"

	// ConditionSynced on a binding: every listed API is installed and its
	// syncer runs. On a consumer instance (best effort): the object synced.
	ConditionSynced ConditionType = "Synced"
	// ConditionConflicts on a binding is True while objects in its scope are
	// skipped because of ownership conflicts.
	ConditionConflicts ConditionType = "Conflicts"
	// ConditionAllVersionsServed on a binding is True when every bound API's
	// consumer CRD serves every version its provider serves; False (reason
	// ConversionWebhook) names the APIs served at fewer versions and why.
	// Informational: the APIs it names work at the versions they serve, and
	// Ready stays True.
	ConditionAllVersionsServed ConditionType = "AllVersionsServed"
	// ConditionCopiesKept on a binding is True (reason DeletionProtected)
	// while provider copies that its spec.deletionProtection kept exist:
	// copies of objects it no longer selects, or of APIs it no longer
	// lists, left on the provider instead of deleted (BIND-5). The message
	// says how many, of which APIs and where, and how to delete them
	// deliberately; status.keptCopies has the counts. Absent while there
	// are none. Informational: never affects Ready.
	ConditionCopiesKept ConditionType = "CopiesKept"
)

// Reason is the machine-readable reason of a status condition.
type Reason string

// Condition reasons (docs/connections.md, docs/bindings.md#conditions). No other reasons are used.
const (
	ReasonAsExpected             Reason = "AsExpected"
	ReasonPending                Reason = "Pending"
	ReasonSecretNotFound         Reason = "SecretNotFound"
	ReasonClusterIdentityChanged Reason = "ClusterIdentityChanged"
	ReasonAPINotExported         Reason = "APINotExported"
	ReasonForeignObjectExists    Reason = "ForeignObjectExists"
	ReasonOwnedByAnother         Reason = "OwnedByAnother"
	ReasonForbidden              Reason = "Forbidden"
	ReasonDrainingBindings       Reason = "DrainingBindings"
	// ReasonConversionWebhook: the provider converts between an API's
	// versions with a webhook, which kbind cannot run on the consumer, so
	// the consumer CRD serves one version only (AllVersionsServed=False).
	ReasonConversionWebhook Reason = "ConversionWebhook"
	// ReasonRenewalFailed: the provider refused or did not answer the
	// request for a new ServiceAccount token (CredentialsRenewed=False).
	ReasonRenewalFailed Reason = "RenewalFailed"
	// ReasonExpiresSoon: the credential in use expires within the lead
	// time and will not be renewed (CredentialsExpiring=True).
	ReasonExpiresSoon Reason = "ExpiresSoon"
	// ReasonExpired: the credential in use has expired.
	ReasonExpired Reason = "Expired"
	// ReasonProjectionRefused: an entry's projection cannot be installed —
	// its consumer API collides with another bound API or an existing CRD,
	// or its group is reserved (Ready=False, docs/shaping.md#projection).
	ReasonProjectionRefused Reason = "ProjectionRefused"
	// ReasonInvalidFilter: an entry's objectSelector or the
	// namespaceSelector does not parse; nothing the binding covers syncs,
	// and nothing is released (Ready=False, docs/shaping.md#filters).
	ReasonInvalidFilter Reason = "InvalidFilter"
	// ReasonInvalidMutation: a mutation rule does not compile (a CEL error,
	// a path outside .spec or .status, a down rule reading a field a down
	// rule writes); nothing the binding covers syncs, and nothing is
	// released (Ready=False, docs/shaping.md#mutations).
	ReasonInvalidMutation Reason = "InvalidMutation"
	// ReasonOverlappingBinding: a binding through another Connection,
	// created earlier, could claim the same consumer objects of an entry's
	// API (selectors that are not provably disjoint); this binding routes
	// none of them (Ready=False, docs/bindings.md#one-api-several-providers).
	ReasonOverlappingBinding Reason = "OverlappingBinding"
	// ReasonSchemaIncompatible: the Connection's provider serves an
	// entry's API with a schema that differs from the consumer CRD's, which
	// another Connection supplies; the message names the first difference,
	// and nothing of the API syncs through this Connection (Ready=False,
	// docs/bindings.md#one-api-several-providers).
	ReasonSchemaIncompatible Reason = "SchemaIncompatible"
	// ReasonProviderCopyDeleting: on a deleting consumer object (its
	// best-effort Synced=False condition), the provider copy is being
	// deleted and finalizers on it — foregroundDeletion under the
	// Foreground policy — keep it; the message names them
	// (docs/sync.md#deletion).
	ReasonProviderCopyDeleting Reason = "ProviderCopyDeleting"
	// ReasonImportRefused: an entry asks to import the provider's objects
	// (providerObjects: Import) where kbind cannot tell which of them are
	// this consumer's — under None isolation, or for a cluster-scoped API
	// (Ready=False, docs/import.md).
	ReasonImportRefused Reason = "ImportRefused"
	// ReasonConsumerObjectExists: a consumer object that kbind did not
	// import holds the name a provider object of an imported API maps to;
	// neither is touched (the conflict annotation's value,
	// docs/import.md).
	ReasonConsumerObjectExists Reason = "ConsumerObjectExists"
	// ReasonStorageVersionChange: the provider moved an API's storage
	// version and kbind refuses to follow on the consumer CRD — the
	// provider converts with a webhook, which kbind cannot run on the
	// consumer, or the new storage version's schema lacks fields of the
	// current one, which reading the stored objects at it would prune.
	// The consumer CRD keeps its storage version and schema (the
	// binding's Ready=False and the Connection's SchemaInSync=False) until
	// the operator accepts the switch with AcceptStorageVersionAnnotation
	// (docs/bindings.md#storage-version-changes).
	ReasonStorageVersionChange Reason = "StorageVersionChange"
	// ReasonDuplicateConsumer: two live konnectors serve this Connection
	// with one consumer identity — a consumer cluster restored from an etcd
	// snapshot of this one (a disaster-recovery drill, a staging clone)
	// renews the same heartbeat Lease, their nonces alternating on it
	// (Heartbeat=False and Ready=False): sync pauses and no provider copy
	// is deleted until one of them stops (docs/troubleshooting.md#duplicate-consumer).
	ReasonDuplicateConsumer Reason = "DuplicateConsumer"
	// ReasonDeletionProtected: the Connection or binding is being deleted
	// while its spec.deletionProtection is true (the chart's admission
	// policy, which refuses such a DELETE, is not installed): the
	// konnector's finalizer holds it, nothing is drained nor deleted. Set
	// spec.deletionProtection to false to let the deletion proceed.
	ReasonDeletionProtected Reason = "DeletionProtected"
)

// ConnectionConditionTypes lists the condition types a Connection carries.
var ConnectionConditionTypes = []ConditionType{
	ConditionSecretValid, ConditionConnected, ConditionPermissionDenied,
	ConditionReady, ConditionSchemaInSync, ConditionHeartbeat,
	ConditionCredentialsRenewed, ConditionCredentialsExpiring,
}

// BindingConditionTypes lists the condition types ClusterBindings and
// Bindings carry.
var BindingConditionTypes = []ConditionType{
	ConditionReady, ConditionSynced, ConditionConflicts, ConditionPermissionDenied, ConditionAllVersionsServed,
}

// Reasons lists every reason kbind uses, for validation in tests.
var Reasons = []Reason{
	ReasonAsExpected, ReasonPending, ReasonSecretNotFound, ReasonClusterIdentityChanged,
	ReasonAPINotExported, ReasonForeignObjectExists, ReasonOwnedByAnother,
	ReasonForbidden, ReasonDrainingBindings, ReasonConversionWebhook,
	ReasonRenewalFailed, ReasonExpiresSoon, ReasonExpired, ReasonProjectionRefused, ReasonInvalidFilter, ReasonInvalidMutation,
	ReasonOverlappingBinding, ReasonSchemaIncompatible, ReasonProviderCopyDeleting,
	ReasonImportRefused, ReasonConsumerObjectExists, ReasonStorageVersionChange, ReasonDuplicateConsumer,
	ReasonDeletionProtected,
}
