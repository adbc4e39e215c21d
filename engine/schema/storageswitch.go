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

// PrunedFields lists, sorted, the fields an object valid under old holds
// that the API server would prune when reading it under new: properties
// new lacks, array items and map values new does not describe, unknown
// fields old keeps and new does not. Nothing under a node where new keeps
// unknown fields is pruned. The root's apiVersion, kind and metadata are
// never pruned by a schema. A nil old (no schema) prunes nothing known; a
// nil new keeps everything.
func PrunedFields(old, new *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	pruned(old, new, "", true, &out)
	sort.Strings(out)
	return out
}

func pruned(old, new *apiextensionsv1.JSONSchemaProps, path string, root bool, out *[]string) {
	if old == nil || new == nil || preserves(new) {
		return
	}
	at := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	for name := range old.Properties {
		if root && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		o := old.Properties[name]
		switch n, ok := new.Properties[name]; {
		case ok:
			pruned(&o, &n, at(name), false, out)
		case new.AdditionalProperties != nil && new.AdditionalProperties.Schema != nil:
			pruned(&o, new.AdditionalProperties.Schema, at(name), false, out)
		case new.AdditionalProperties != nil && new.AdditionalProperties.Allows:
		default:
			*out = append(*out, at(name))
		}
	}
	if old.Items != nil && old.Items.Schema != nil {
		if new.Items == nil || new.Items.Schema == nil {
			*out = append(*out, path+"[*]")
		} else {
			pruned(old.Items.Schema, new.Items.Schema, path+"[*]", false, out)
		}
	}
	if old.AdditionalProperties != nil && (old.AdditionalProperties.Schema != nil || old.AdditionalProperties.Allows) {
		switch {
		case new.AdditionalProperties != nil && new.AdditionalProperties.Schema != nil && old.AdditionalProperties.Schema != nil:
			pruned(old.AdditionalProperties.Schema, new.AdditionalProperties.Schema, at("*"), false, out)
		case new.AdditionalProperties != nil && (new.AdditionalProperties.Schema != nil || new.AdditionalProperties.Allows):
		default:
			*out = append(*out, at("*"))
		}
	}
	if preserves(old) {
		*out = append(*out, at("*"))
	}
}

// preserves reports whether a schema node keeps unknown fields.
func preserves(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}
