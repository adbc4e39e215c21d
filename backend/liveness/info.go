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

package liveness

import (
	"strings"
	"unicode/utf8"

	coordinationv1 "k8s.io/api/coordination/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// LeaseInfo is what a konnector says of itself on its heartbeat Lease
// (kbind_backend_consumer_info): one per attributable Lease.
type LeaseInfo struct {
	Namespace, Name, Consumer string
	// KonnectorVersion and APIVersion are the Lease's annotations,
	// "unknown" when absent (a konnector older than the annotations).
	KonnectorVersion, APIVersion string
}

// maxInfoLabel bounds a label value read from a Lease: the consumer
// writes the annotation, the provider's Prometheus stores it.
const maxInfoLabel = 64

// InfoOf reads the konnector's version annotations of l, a Lease of
// consumer.
func InfoOf(l *coordinationv1.Lease, consumer string) LeaseInfo {
	return LeaseInfo{Namespace: l.Namespace, Name: l.Name, Consumer: consumer,
		KonnectorVersion: infoLabel(l.Annotations[kbindv1alpha1.KonnectorVersionAnnotation]),
		APIVersion:       infoLabel(l.Annotations[kbindv1alpha1.APIVersionAnnotation])}
}

// infoLabel is v as a bounded, valid UTF-8 label value.
func infoLabel(v string) string {
	if v == "" {
		return "unknown"
	}
	v = strings.ToValidUTF8(v, "\uFFFD")
	if utf8.RuneCountInString(v) > maxInfoLabel {
		v = string([]rune(v)[:maxInfoLabel])
	}
	return v
}
