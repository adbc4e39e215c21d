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

import "testing"

// TestWellKnownSpelling pins every well-known string to its spelling in the
// docs (docs/concepts.md#well-known-strings, the condition tables) and the
// troubleshooting guide: operators
// grep for these, so a typo here is an outage.
func TestWellKnownSpelling(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{ExportedLabel, "core.kbind.io/exported"},
		{ManagedLabel, "core.kbind.io/managed"},
		{ConsumerClusterUIDLabel, "core.kbind.io/consumer-cluster-uid"},
		{ConnectionAnnotation, "core.kbind.io/connection"},
		{SchemaHashAnnotation, "core.kbind.io/schema-hash"},
		{ProviderAPIAnnotation, "core.kbind.io/provider-api"},
		{ProviderKindAnnotation, "core.kbind.io/provider-kind"},
		{ConsumerClusterUIDAnnotation, "core.kbind.io/consumer-cluster-uid"},
		{ConsumerObjectUIDAnnotation, "core.kbind.io/consumer-object-uid"},
		{RelatedBindingAnnotation, "core.kbind.io/related-binding"},
		{SyncedMetadataAnnotation, "core.kbind.io/synced-metadata"},
		{ConflictAnnotation, "core.kbind.io/conflict"},
		{AcceptStorageVersionAnnotation, "core.kbind.io/accept-storage-version"},
		{ProviderConversionAnnotation, "core.kbind.io/provider-conversion"},
		{DeletionPolicyAnnotation, "core.kbind.io/deletion-policy"},
		{DeletionPolicyOrphan, "Orphan"},
		{DeletionPolicyDelete, "Delete"},
		{DeletionPolicyForeground, "Foreground"},
		{MovedAnnotation, "core.kbind.io/moved"},
		{StaleSinceAnnotation, "core.kbind.io/stale-since"},
		{ReapMarkedAtAnnotation, "core.kbind.io/reap-marked-at"},
		{KeptLabel, "core.kbind.io/kept"},
		{DeletionProtectionLabel, "core.kbind.io/deletion-protection"},
		{KeptOrphan, "Orphan"},
		{KeptDeletionProtection, "DeletionProtection"},
		{KeptByAnnotation, "core.kbind.io/kept-by"},
		{SyncerFinalizer, "core.kbind.io/syncer"},
		{CleanupFinalizer, "core.kbind.io/cleanup"},
		{FieldManager, "kbind-konnector"},
		{RelatedFieldManager, "kbind-konnector-related"},
		{KonnectorLeaderElectionID, "konnector.kbind.io"},
		{BackendLeaderElectionID, "backend.kbind.io"},
		{PrefixLabel, "core.kbind.io/prefix"},
		{OwnerAnnotation, "core.kbind.io/owner"},
		{OwnerProvider, "provider"},
		{HandOverAnnotation, "core.kbind.io/hand-over"},
		{HandOverConsumer, "consumer"},
		{HandOverProvider, "provider"},
		{KonnectorVersionAnnotation, "core.kbind.io/konnector-version"},
		{APIVersionAnnotation, "core.kbind.io/api-version"},
		{ProviderUserAnnotation, "core.kbind.io/provider-user"},
		{CredentialKindAnnotation, "core.kbind.io/credential-kind"},
		{CredentialExpiryAnnotation, "core.kbind.io/credential-expiry"},
		{CredentialRenewsAnnotation, "core.kbind.io/credential-renews"},
		{RenewedFromAnnotation, "core.kbind.io/renewed-from"},
		{KonnectorNonceAnnotation, "core.kbind.io/konnector-nonce"},
		{GroupName, "core.kbind.io"},
	} {
		if tc.got != tc.want {
			t.Errorf("well-known string %q, want %q", tc.got, tc.want)
		}
	}
	reasons := map[Reason]bool{}
	for _, r := range Reasons {
		reasons[r] = true
	}
	for _, want := range []Reason{"AsExpected", "Pending", "SecretNotFound", "ClusterIdentityChanged",
		"APINotExported", "ForeignObjectExists", "OwnedByAnother", "Forbidden", "DrainingBindings", "ConversionWebhook",
		"RenewalFailed", "ExpiresSoon", "Expired", "ProjectionRefused", "InvalidFilter", "InvalidMutation",
		"OverlappingBinding", "SchemaIncompatible", "ProviderCopyDeleting", "ImportRefused", "ConsumerObjectExists", "StorageVersionChange",
		"DuplicateConsumer", "DeletionProtected"} {
		if !reasons[want] {
			t.Errorf("reason %s missing", want)
		}
	}
	// The spec's 9, ConversionWebhook (docs/bindings.md#conditions), the
	// credential reasons (docs/connections.md#credentials), the shaping
	// reasons (docs/shaping.md), the routing reasons
	// (docs/bindings.md#one-api-several-providers) and the deleting
	// object's ProviderCopyDeleting (docs/sync.md#deletion), the import
	// reasons, the refused storage-version switch's StorageVersionChange
	// (docs/bindings.md#storage-version-changes) and DuplicateConsumer
	// (docs/troubleshooting.md#duplicate-consumer), and the held deletion of
	// a protected object's DeletionProtected (docs/bindings.md#deletion-protection).
	if len(reasons) != 24 {
		t.Errorf("%d reasons, want the spec's 9, ConversionWebhook, the 3 credential, the 3 shaping, the 2 routing, the deletion, the 2 import, the storage-version, the duplicate-consumer and the deletion-protection reasons", len(reasons))
	}
	types := map[ConditionType]bool{}
	for _, ct := range append(append([]ConditionType{}, ConnectionConditionTypes...), BindingConditionTypes...) {
		types[ct] = true
	}
	for _, want := range []ConditionType{"SecretValid", "Connected", "PermissionDenied", "Ready",
		"SchemaInSync", "Heartbeat", "CredentialsRenewed", "CredentialsExpiring", "Synced", "Conflicts", "AllVersionsServed"} {
		if !types[want] {
			t.Errorf("condition type %s missing", want)
		}
	}
}
