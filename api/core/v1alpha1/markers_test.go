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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMarkers(t *testing.T) {
	cases := []struct {
		name        string
		m           Markers
		annotations []string
	}{
		{"copy", CopyMarkers("c", "o"), []string{ConsumerClusterUIDAnnotation, ConsumerObjectUIDAnnotation}},
		{"related copy", RelatedCopyMarkers("c", "b/e"), []string{ConsumerClusterUIDAnnotation, RelatedBindingAnnotation}},
		{"namespace", NamespaceMarkers("c"), []string{ConsumerClusterUIDAnnotation}},
		{"lease", LeaseMarkers("c", "p"), []string{ConsumerClusterUIDAnnotation, ConnectionAnnotation}},
	}
	for _, tc := range cases {
		if tc.m.Labels[ManagedLabel] != ManagedLabelValue || tc.m.Labels[ConsumerClusterUIDLabel] != "c" || len(tc.m.Labels) != 2 {
			t.Errorf("%s: labels %v", tc.name, tc.m.Labels)
		}
		if len(tc.m.Annotations) != len(tc.annotations) {
			t.Errorf("%s: annotations %v", tc.name, tc.m.Annotations)
		}
		for _, a := range tc.annotations {
			if tc.m.Annotations[a] == "" {
				t.Errorf("%s: annotation %s missing", tc.name, a)
			}
		}
	}
	obj := &metav1.ObjectMeta{Labels: map[string]string{"keep": "me"}}
	CopyMarkers("c", "o").Stamp(obj)
	if obj.Labels["keep"] != "me" || obj.Labels[ManagedLabel] != ManagedLabelValue || obj.Annotations[ConsumerObjectUIDAnnotation] != "o" {
		t.Errorf("stamped %v %v", obj.Labels, obj.Annotations)
	}
}

func TestOriginMarkers(t *testing.T) {
	long := strings.Repeat("n", 64)
	cases := []struct {
		namespace, name string
		labels          map[string]string
	}{
		{"team-a", "w1", map[string]string{ConsumerNamespaceLabel: "team-a", ConsumerNameLabel: "w1"}},
		{"", "cluster-wide", map[string]string{ConsumerNameLabel: "cluster-wide"}},
		{"team-a", long, map[string]string{ConsumerNamespaceLabel: "team-a", ConsumerNameLabel: ConsumerNameLabelValue(long)}},
	}
	for _, tc := range cases {
		m := CopyMarkers("c", "o").WithOrigin(tc.namespace, tc.name)
		for k, v := range tc.labels {
			if m.Labels[k] != v {
				t.Errorf("%s/%s: label %s = %q, want %q", tc.namespace, tc.name, k, m.Labels[k], v)
			}
		}
		if _, ok := m.Labels[ConsumerNamespaceLabel]; ok != (tc.namespace != "") {
			t.Errorf("%s/%s: namespace label %v", tc.namespace, tc.name, m.Labels)
		}
		if m.Annotations[ConsumerNameAnnotation] != tc.name || m.Annotations[ConsumerNamespaceAnnotation] != tc.namespace {
			t.Errorf("%s/%s: annotations %v", tc.namespace, tc.name, m.Annotations)
		}
	}
	v := ConsumerNameLabelValue(long)
	if len(v) > 63 || !strings.HasPrefix(v, "sha256-") || v == ConsumerNameLabelValue(long+"x") {
		t.Errorf("label value of a long name: %q", v)
	}
}

func TestWithRelatedOwner(t *testing.T) {
	m := RelatedCopyMarkers("c", "b/e").WithRelatedOwner("owner-uid")
	if m.Labels[RelatedOwnerLabel] != "owner-uid" || m.Labels[ManagedLabel] != ManagedLabelValue || m.Annotations[RelatedBindingAnnotation] != "b/e" {
		t.Errorf("markers %v %v", m.Labels, m.Annotations)
	}
}
