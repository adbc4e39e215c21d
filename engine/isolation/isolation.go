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

// Package isolation owns where a Connection's consumer objects live on the
// provider (docs/isolation.md): the provider namespace and name of every
// object kbind writes there, for the three modes of
// Connection.spec.isolation.
//
//   - None: the same namespace and name.
//   - Namespace: every namespaced object, from any consumer namespace, in
//     one provider namespace, named "<namespace>.<name>". Cluster-scoped
//     objects cannot be confined and are refused.
//   - Prefixed: consumer namespace X becomes "<prefix>-X"; a cluster-scoped
//     name N becomes "<prefix>-N".
//
// Derived names are injective: two different consumer objects never map to
// one provider name. A readable name is used when it fits the API server's
// length limit; otherwise the name is hashed, in a form that no readable
// name can take (Namespace: without a ".", Prefixed: with "--" after the
// prefix), so that a hashed name never meets a readable one. The way back
// is never parsing a name: provider copies carry their consumer namespace
// and name as annotations (api markers WithOrigin).
package isolation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

const (
	// maxName is the longest object name (a DNS subdomain).
	maxName = 253
	// maxNamespace is the longest namespace name (a DNS label).
	maxNamespace = 63
	// hashLen is how many hex characters of a SHA-256 a hashed name keeps
	// (64 bits).
	hashLen = 16
	// defaultLeaseNamespace holds Leases of a None Connection whose
	// provider kubeconfig context has no namespace.
	defaultLeaseNamespace = "kbind"
)

// ErrClusterScoped is returned for a cluster-scoped object under Namespace
// isolation: it cannot be confined to the isolation namespace.
var ErrClusterScoped = errors.New("a cluster-scoped object cannot be confined to a namespace")

// Mapping maps consumer objects to their provider place for one
// Connection. The zero value is None.
type Mapping struct {
	mode      kbindv1alpha1.IsolationMode
	namespace string
	prefix    string
}

// For returns the Mapping of an isolation block.
func For(iso kbindv1alpha1.Isolation) Mapping {
	switch iso.Mode {
	case kbindv1alpha1.IsolationNamespace:
		return Mapping{mode: iso.Mode, namespace: iso.Namespace}
	case kbindv1alpha1.IsolationPrefixed:
		return Mapping{mode: iso.Mode, prefix: iso.Prefix}
	default:
		return Mapping{}
	}
}

// Mode is the mapping's isolation mode.
func (m Mapping) Mode() kbindv1alpha1.IsolationMode {
	if m.mode == "" {
		return kbindv1alpha1.IsolationNone
	}
	return m.mode
}

// Isolated reports whether provider names differ from consumer names.
func (m Mapping) Isolated() bool { return m.Mode() != kbindv1alpha1.IsolationNone }

// String describes the mapping for messages.
func (m Mapping) String() string {
	switch m.Mode() {
	case kbindv1alpha1.IsolationNamespace:
		return fmt.Sprintf("isolation Namespace (provider namespace %s)", m.namespace)
	case kbindv1alpha1.IsolationPrefixed:
		return fmt.Sprintf("isolation Prefixed (prefix %s)", m.prefix)
	default:
		return "isolation None"
	}
}

// ConfinedTo is the one provider namespace everything of the Connection
// lives in (Namespace mode), "" otherwise: the provider cache watches only
// there, and the consumer's credentials need nothing outside it.
func (m Mapping) ConfinedTo() string {
	if m.Mode() == kbindv1alpha1.IsolationNamespace {
		return m.namespace
	}
	return ""
}

// ImportsFrom reports whether provider namespace ns may hold the
// provider's own objects for this consumer to import
// (apis[].providerObjects: Import), by its name alone: the isolation
// namespace (Namespace), a namespace of the prefix (Prefixed; the prefix
// label on the namespace decides, since prefixes may extend each other),
// none under None. It is the cheap test the provider cache keeps the
// content of unmarked objects by.
func (m Mapping) ImportsFrom(ns string) bool {
	switch m.Mode() {
	case kbindv1alpha1.IsolationNamespace:
		return ns == m.namespace
	case kbindv1alpha1.IsolationPrefixed:
		return strings.HasPrefix(ns, m.prefix+"-")
	default:
		return false
	}
}

// Prefix is the Prefixed isolation's prefix, "" under the other modes.
func (m Mapping) Prefix() string { return m.prefix }

// AllowsClusterScoped reports whether cluster-scoped APIs can be bound.
func (m Mapping) AllowsClusterScoped() bool { return m.Mode() != kbindv1alpha1.IsolationNamespace }

// Namespace is the provider namespace for objects of consumer namespace ns
// (ns must not be "").
func (m Mapping) Namespace(ns string) string {
	switch m.Mode() {
	case kbindv1alpha1.IsolationNamespace:
		return m.namespace
	case kbindv1alpha1.IsolationPrefixed:
		return prefixed(m.prefix, ns, maxNamespace)
	default:
		return ns
	}
}

// CreatesNamespaces reports whether kbind creates the provider namespaces
// it writes into (None and Prefixed); under Namespace isolation the one
// namespace belongs to the provider admin, who grants access to it.
func (m Mapping) CreatesNamespaces() bool { return m.Mode() != kbindv1alpha1.IsolationNamespace }

// Object is the provider key of the consumer object key (Namespace ""
// for a cluster-scoped object). It fails only for a cluster-scoped object
// under Namespace isolation (ErrClusterScoped).
func (m Mapping) Object(key types.NamespacedName) (types.NamespacedName, error) {
	switch m.Mode() {
	case kbindv1alpha1.IsolationNamespace:
		if key.Namespace == "" {
			return types.NamespacedName{}, ErrClusterScoped
		}
		return types.NamespacedName{Namespace: m.namespace, Name: joined(key.Namespace, key.Name)}, nil
	case kbindv1alpha1.IsolationPrefixed:
		if key.Namespace == "" {
			return types.NamespacedName{Name: prefixed(m.prefix, key.Name, maxName)}, nil
		}
		return types.NamespacedName{Namespace: prefixed(m.prefix, key.Namespace, maxNamespace), Name: key.Name}, nil
	default:
		return key, nil
	}
}

// LeaseNamespace is where the Connection's heartbeat Lease lives: the
// isolation namespace (Namespace), the bare prefix (Prefixed: no consumer
// namespace maps there, and the prefix covers it), else the provider
// kubeconfig context's namespace or "kbind".
func (m Mapping) LeaseNamespace(contextNamespace string) string {
	switch m.Mode() {
	case kbindv1alpha1.IsolationNamespace:
		return m.namespace
	case kbindv1alpha1.IsolationPrefixed:
		return m.prefix
	}
	if contextNamespace != "" {
		return contextNamespace
	}
	return defaultLeaseNamespace
}

// joined is the Namespace-mode name of ns/name: "<ns>.<name>" (ns, a DNS
// label, has no "."; so the first "." separates it) when it fits, else a
// hashed name without any "." (so that it is never a readable one):
// "<ns>-<name with . as ->-<hash>", truncated to fit.
func joined(ns, name string) string {
	if readable := ns + "." + name; len(readable) <= maxName {
		return readable
	}
	return hashed(ns+"-"+strings.ReplaceAll(name, ".", "-"), ns+"/"+name, maxName)
}

// prefixed is "<prefix>-<s>" when it fits limit, else a hashed name with
// "--" right after the prefix (a readable one never has: s starts with a
// letter or digit): "<prefix>--<s with . as ->-<hash>", truncated to fit.
func prefixed(prefix, s string, limit int) string {
	if readable := prefix + "-" + s; len(readable) <= limit {
		return readable
	}
	return prefix + "--" + hashed(strings.ReplaceAll(s, ".", "-"), s, limit-len(prefix)-2)
}

// hashed is "<readable, truncated>-<hash of identity>" in at most limit
// characters; a truncated part that ends in "-" is trimmed, so that the
// result stays a DNS label or subdomain.
func hashed(readable, identity string, limit int) string {
	sum := sha256.Sum256([]byte(identity))
	h := hex.EncodeToString(sum[:])[:hashLen]
	keep := limit - hashLen - 1
	if keep <= 0 {
		return h
	}
	if len(readable) > keep {
		readable = readable[:keep]
	}
	readable = strings.TrimRight(readable, "-")
	if readable == "" {
		return h
	}
	return readable + "-" + h
}

// Origin is the way back: the consumer object a provider copy written
// under isolation stands for, read from its annotations (WithOrigin). ok is
// false when obj carries no origin.
func Origin(annotations map[string]string) (key types.NamespacedName, ok bool) {
	name, ok := annotations[kbindv1alpha1.ConsumerNameAnnotation]
	if !ok || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: annotations[kbindv1alpha1.ConsumerNamespaceAnnotation], Name: name}, true
}

// Consumer is the way back from a provider place to the consumer object
// that maps there, for provider objects that carry no origin (objects the
// provider made, which an Import brings to the consumer): only a
// canonical name inverts — one the forward mapping produces from a valid
// consumer key, checked by mapping the candidate forward again — and a
// hashed name never does. ok is false for every other place. Under
// Prefixed isolation a name says nothing of who owns a namespace when
// prefixes extend each other ("a-b-x" is "b-x" under prefix a and "x"
// under prefix a-b): the caller must also check the namespace's prefix
// label.
func (m Mapping) Consumer(pkey types.NamespacedName) (key types.NamespacedName, ok bool) {
	switch m.Mode() {
	case kbindv1alpha1.IsolationNamespace:
		ns, name, found := strings.Cut(pkey.Name, ".")
		if pkey.Namespace != m.namespace || !found {
			return types.NamespacedName{}, false
		}
		key = types.NamespacedName{Namespace: ns, Name: name}
	case kbindv1alpha1.IsolationPrefixed:
		if pkey.Namespace == "" {
			name, found := strings.CutPrefix(pkey.Name, m.prefix+"-")
			if !found {
				return types.NamespacedName{}, false
			}
			key = types.NamespacedName{Name: name}
		} else {
			ns, found := strings.CutPrefix(pkey.Namespace, m.prefix+"-")
			if !found {
				return types.NamespacedName{}, false
			}
			key = types.NamespacedName{Namespace: ns, Name: pkey.Name}
		}
	default:
		key = pkey
	}
	if !validKey(key) {
		return types.NamespacedName{}, false
	}
	if forward, err := m.Object(key); err != nil || forward != pkey {
		return types.NamespacedName{}, false
	}
	return key, true
}

// validKey is whether key can name a consumer object: a DNS label
// namespace (or none) and a DNS subdomain name.
func validKey(key types.NamespacedName) bool {
	if key.Namespace != "" && len(validation.IsDNS1123Label(key.Namespace)) > 0 {
		return false
	}
	return len(validation.IsDNS1123Subdomain(key.Name)) == 0
}

// Markers are the markers of the provider copy of the consumer object key:
// the ownership markers, its origin when the mapping is isolated, and
// under Prefixed the prefix label on a cluster-scoped copy (a namespaced
// one lives in a namespace that carries it).
func (m Mapping) Markers(consumerClusterUID string, key types.NamespacedName, objectUID string) kbindv1alpha1.Markers {
	markers := kbindv1alpha1.CopyMarkers(consumerClusterUID, objectUID)
	if m.Isolated() {
		markers = markers.WithOrigin(key.Namespace, key.Name)
	}
	if m.Mode() == kbindv1alpha1.IsolationPrefixed && key.Namespace == "" {
		markers = markers.WithPrefix(m.prefix)
	}
	return markers
}

// NamespaceMarkers are the markers of the provider namespace kbind creates
// for consumer namespace ns: under Prefixed isolation with ns and the
// prefix label (kbindv1alpha1.PrefixLabel: the provider's admission policy
// lets a Prefixed consumer write only into namespaces labelled with its own
// prefix, which a name prefix cannot say when prefixes extend each other),
// else kbind's namespace markers. Under Namespace isolation kbind creates
// no provider namespace.
func (m Mapping) NamespaceMarkers(consumerClusterUID, ns string) kbindv1alpha1.Markers {
	if m.Mode() != kbindv1alpha1.IsolationPrefixed {
		return kbindv1alpha1.NamespaceMarkers(consumerClusterUID)
	}
	return kbindv1alpha1.PrefixedNamespaceMarkers(consumerClusterUID, ns).WithPrefix(m.prefix)
}

// LeaseNamespaceMarkers are the markers of the Lease namespace
// (LeaseNamespace) when kbind creates it: with the prefix label under
// Prefixed isolation.
func (m Mapping) LeaseNamespaceMarkers(consumerClusterUID string) kbindv1alpha1.Markers {
	markers := kbindv1alpha1.NamespaceMarkers(consumerClusterUID)
	if m.Mode() == kbindv1alpha1.IsolationPrefixed {
		markers = markers.WithPrefix(m.prefix)
	}
	return markers
}
