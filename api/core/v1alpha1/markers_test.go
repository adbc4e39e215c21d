package v1alpha1

import (
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
