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
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Markers are the labels and annotations that say "kbind wrote this, for
// this consumer cluster". This file is the one definition of them: the
// engine stamps them on everything it writes on the provider (and on
// related copies it writes on the consumer), and the backend reaper checks
// exactly these before it deletes anything.
// +kubebuilder:object:generate=false
type Markers struct {
	Labels      map[string]string
	Annotations map[string]string
}

// base is what every kbind-written object carries: the managed label and
// the consumer cluster's identity as label (for server-side selection) and
// annotation (ownership marker 1).
func base(consumerClusterUID string) Markers {
	return Markers{
		Labels: map[string]string{
			ManagedLabel:            ManagedLabelValue,
			ConsumerClusterUIDLabel: consumerClusterUID,
		},
		Annotations: map[string]string{ConsumerClusterUIDAnnotation: consumerClusterUID},
	}
}

// CopyMarkers are the markers of a provider copy of a consumer object:
// both ownership markers (the consumer cluster and the consumer object).
func CopyMarkers(consumerClusterUID, consumerObjectUID string) Markers {
	m := base(consumerClusterUID)
	m.Annotations[ConsumerObjectUIDAnnotation] = consumerObjectUID
	return m
}

// RelatedCopyMarkers are the markers of a related Secret or ConfigMap copy;
// owner is "<binding UID>/<entry id>".
func RelatedCopyMarkers(consumerClusterUID, owner string) Markers {
	m := base(consumerClusterUID)
	m.Annotations[RelatedBindingAnnotation] = owner
	return m
}

// WithRelatedOwner adds the bound consumer object (by UID) a related copy
// made for a reference belongs to.
func (m Markers) WithRelatedOwner(ownerUID string) Markers {
	m.Labels[RelatedOwnerLabel] = ownerUID
	return m
}

// NamespaceMarkers are the markers of a namespace kbind creates.
func NamespaceMarkers(consumerClusterUID string) Markers {
	return base(consumerClusterUID)
}

// LeaseMarkers are the markers of a Connection's heartbeat Lease.
func LeaseMarkers(consumerClusterUID, connection string) Markers {
	m := base(consumerClusterUID)
	m.Annotations[ConnectionAnnotation] = connection
	return m
}

// WithOrigin adds the consumer object a provider copy stands for (copies
// written under isolation, whose provider namespace and name differ from
// the consumer's): annotations with the namespace and name, and labels for
// selection. A cluster-scoped object has no namespace marker.
func (m Markers) WithOrigin(namespace, name string) Markers {
	if namespace != "" {
		m.Labels[ConsumerNamespaceLabel] = namespace
		m.Annotations[ConsumerNamespaceAnnotation] = namespace
	}
	m.Labels[ConsumerNameLabel] = ConsumerNameLabelValue(name)
	m.Annotations[ConsumerNameAnnotation] = name
	return m
}

// PrefixedNamespaceMarkers are the markers of a provider namespace kbind
// creates for consumer namespace consumerNamespace under Prefixed
// isolation.
func PrefixedNamespaceMarkers(consumerClusterUID, consumerNamespace string) Markers {
	m := base(consumerClusterUID)
	m.Labels[ConsumerNamespaceLabel] = consumerNamespace
	m.Annotations[ConsumerNamespaceAnnotation] = consumerNamespace
	return m
}

// WithPrefix adds the Prefixed isolation prefix (PrefixLabel) to the
// markers of a provider namespace or cluster-scoped copy written under
// Prefixed isolation.
func (m Markers) WithPrefix(prefix string) Markers {
	m.Labels[PrefixLabel] = prefix
	return m
}

// ConsumerNameLabelValue is the ConsumerNameLabel value for a consumer
// object name: the name when it fits a label value (object names are DNS
// subdomains, so at most 63 characters do), else "sha256-" and the first 16
// hex characters of its SHA-256.
func ConsumerNameLabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:])[:16]
}

// Stamp sets the markers on obj, keeping its other labels and annotations.
func (m Markers) Stamp(obj metav1.Object) {
	obj.SetLabels(merged(obj.GetLabels(), m.Labels))
	obj.SetAnnotations(merged(obj.GetAnnotations(), m.Annotations))
}

func merged(into, from map[string]string) map[string]string {
	if into == nil {
		into = make(map[string]string, len(from))
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}
