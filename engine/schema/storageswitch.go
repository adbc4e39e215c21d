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
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// StorageSwitch is DecideStorageSwitch's verdict on updating a consumer
// CRD from one storage version to another.
type StorageSwitch struct {
	// From and To are the existing and the desired storage version; equal
	// (or empty) when the update switches nothing.
	From, To string
	// Refused is true when kbind must not make the switch: the consumer CRD
	// keeps its storage version and schema, and Problem says why.
	Refused bool
	// Webhook is true when the provider converts the API with a webhook.
	Webhook bool
	// Pruned lists the fields (JSON paths, "[*]" for array items, "*" for
	// map values and unknown fields) that objects stored at From hold and
	// that reading them at To would drop.
	Pruned []string
	// Problem explains a refusal: the versions, why, and how to accept.
	Problem string
}

// DecideStorageSwitch decides whether kbind may update the consumer CRD
// existing, which it created, to desired when that moves the storage
// version. The consumer converts with None: after the switch, objects
// stored at the old version are read as the new one — their apiVersion
// rewritten, everything the new version's schema lacks pruned — and the
// syncer writes what it reads to the provider. So the switch is refused
// when the provider converts with a webhook (the objects' shape at the new
// version is code kbind cannot run) or when the new storage version's
// schema lacks fields of the old one (PrunedFields); a switch to a schema
// that keeps every field of the old one, with conversion None, goes ahead
// — the consumer then converts exactly as the provider does. The operator
// accepts a refused switch, after migrating or checking the stored
// objects, with the annotation core.kbind.io/accept-storage-version on the
// consumer CRD naming the new storage version.
func DecideStorageSwitch(existing, desired *apiextensionsv1.CustomResourceDefinition) StorageSwitch {
	if existing == nil || desired == nil {
		return StorageSwitch{}
	}
	from, to := StorageVersion(existing), StorageVersion(desired)
	if from == nil || to == nil || from.Name == to.Name {
		return StorageSwitch{}
	}
	s := StorageSwitch{From: from.Name, To: to.Name, Webhook: ConvertsByWebhook(desired) || ConvertsByWebhook(existing)}
	s.Pruned = PrunedFields(schemaOf(from), schemaOf(to))
	if existing.Annotations[kbindv1alpha1.AcceptStorageVersionAnnotation] == to.Name {
		return s // accepted by the operator
	}
	var why []string
	if s.Webhook {
		why = append(why, fmt.Sprintf("the provider converts between them with a conversion webhook, which kbind cannot run on the consumer (it converts with None): "+
			"objects stored at %s would be read as %s without conversion", s.From, s.To))
	}
	if len(s.Pruned) > 0 {
		why = append(why, fmt.Sprintf("the %s schema lacks fields of %s, which reading the stored objects at %s would drop on the consumer and then on the provider copies: %s",
			s.To, s.From, s.To, strings.Join(s.Pruned, ", ")))
	}
	if len(why) == 0 {
		return s
	}
	s.Refused = true
	s.Problem = fmt.Sprintf("the provider moved the storage version of %s from %s to %s and kbind keeps the consumer CRD at %s: %s; "+
		"sync goes on at %s while the provider serves it; migrate or check the objects stored at %s, then accept the switch with "+
		"kubectl annotate crd %s %s=%s (docs/bindings.md#storage-version-changes)",
		existing.Name, s.From, s.To, s.From, strings.Join(why, "; "), s.From, s.From, existing.Name, kbindv1alpha1.AcceptStorageVersionAnnotation, s.To)
	return s
}

// ConvertsByWebhook reports whether crd, a consumer CRD kbind built from
// a provider CRD, records that the provider converts with a webhook.
func ConvertsByWebhook(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Annotations[kbindv1alpha1.ProviderConversionAnnotation] == string(apiextensionsv1.WebhookConverter)
}

func schemaOf(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// PrunedFields lists, sorted, the fields an object valid under from holds
// that the API server would prune when reading it under to: properties to
// lacks, array items and map values to does not describe, unknown fields
// from keeps and to does not. Nothing under a node where to keeps unknown
// fields is pruned. The root's apiVersion, kind and metadata are never
// pruned by a schema, and status is not the consumer's data: it comes
// down from the provider, whose own copies are read at the new version
// too. A nil from (no schema) prunes nothing known; a nil to keeps
// everything.
func PrunedFields(from, to *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	pruned(from, to, "", true, &out)
	sort.Strings(out)
	return out
}

// pruned appends to out the fields under path that from describes and to
// would prune (PrunedFields).
func pruned(from, to *apiextensionsv1.JSONSchemaProps, path string, root bool, out *[]string) {
	if from == nil || to == nil || preserves(to) {
		return
	}
	prunedProperties(from, to, path, root, out)
	if from.Items != nil && from.Items.Schema != nil {
		if to.Items == nil || to.Items.Schema == nil {
			*out = append(*out, path+"[*]")
		} else {
			pruned(from.Items.Schema, to.Items.Schema, path+"[*]", false, out)
		}
	}
	if from.AdditionalProperties != nil && (from.AdditionalProperties.Schema != nil || from.AdditionalProperties.Allows) {
		switch {
		case mapSchema(to) != nil && from.AdditionalProperties.Schema != nil:
			pruned(from.AdditionalProperties.Schema, mapSchema(to), join(path, "*"), false, out)
		case to.AdditionalProperties != nil && (to.AdditionalProperties.Schema != nil || to.AdditionalProperties.Allows):
		default:
			*out = append(*out, join(path, "*"))
		}
	}
	if preserves(from) {
		*out = append(*out, join(path, "*"))
	}
}

// prunedProperties appends the properties of from that to would prune.
func prunedProperties(from, to *apiextensionsv1.JSONSchemaProps, path string, root bool, out *[]string) {
	for name := range from.Properties {
		if root && (name == "apiVersion" || name == "kind" || name == "metadata" || name == "status") {
			continue
		}
		f := from.Properties[name]
		switch t, ok := to.Properties[name]; {
		case ok:
			pruned(&f, &t, join(path, name), false, out)
		case mapSchema(to) != nil:
			pruned(&f, mapSchema(to), join(path, name), false, out)
		case to.AdditionalProperties != nil && to.AdditionalProperties.Allows:
		default:
			*out = append(*out, join(path, name))
		}
	}
}

// mapSchema is the schema of s's map values, nil when it has none.
func mapSchema(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.AdditionalProperties == nil {
		return nil
	}
	return s.AdditionalProperties.Schema
}

// join is path.name, or name at the root.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// preserves reports whether a schema node keeps unknown fields.
func preserves(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}
