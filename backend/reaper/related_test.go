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

package reaper

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// unmarked is meta without the reap mark.
func unmarked(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	delete(m.Annotations, kbindv1alpha1.ReapMarkedAtAnnotation)
	return m
}

// TestPassMarksRelatedCopiesFirst (issue #52, path 4, related copies): the
// related Secret/ConfigMap copies of a stale consumer go through the same
// two phases as its copies — marked first, deleted only when every mark of
// the round (copies and related copies together) survived the grace
// period; one unmarked object keeps them all. A consumer with no copy
// left is no exception.
func TestPassMarksRelatedCopiesFirst(t *testing.T) {
	objUID, rel := kbindv1alpha1.ConsumerObjectUIDAnnotation, kbindv1alpha1.RelatedBindingAnnotation
	widgets := schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	type obj struct {
		gvr       schema.GroupVersionResource
		ns, name  string
		gone      bool // after the pass
		markedNow bool // carries a mark after the pass (when not gone)
	}
	cases := []struct {
		name  string
		world []runtime.Object
		want  Verdict
		after []obj
	}{
		{"no copies, an unmarked related copy: marked, nothing deleted", []runtime.Object{
			unmarked(meta("v1", "ConfigMap", "team-a", "a-cm", "A", rel, "b/0")),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}, Waiting, []obj{{configmaps, "team-a", "a-cm", false, true}, {leases, "kbind", "a-1", false, false}}},
		{"no copies, one related mark cleared (a live konnector): none goes, the cleared one is marked again", []runtime.Object{
			meta("v1", "ConfigMap", "team-a", "a-cm", "A", rel, "b/0"),
			unmarked(meta("v1", "Secret", "team-a", "a-s", "A", rel, "b/0")),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}, Waiting, []obj{{configmaps, "team-a", "a-cm", false, true}, {secrets, "team-a", "a-s", false, true}, {leases, "kbind", "a-1", false, false}}},
		{"copies due, a related copy unmarked: one round, nothing deleted", []runtime.Object{
			meta("example.org/v1alpha1", "Widget", "team-a", "a-w1", "A", objUID, "o1"),
			unmarked(meta("v1", "ConfigMap", "team-a", "a-cm", "A", rel, "b/0")),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}, Waiting, []obj{{widgets, "team-a", "a-w1", false, true}, {configmaps, "team-a", "a-cm", false, true}, {leases, "kbind", "a-1", false, false}}},
		{"every mark survived: copies, related copies, then the Lease", []runtime.Object{
			meta("example.org/v1alpha1", "Widget", "team-a", "a-w1", "A", objUID, "o1"),
			meta("v1", "ConfigMap", "team-a", "a-cm", "A", rel, "b/0"),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}, Done, []obj{{widgets, "team-a", "a-w1", true, false}, {configmaps, "team-a", "a-cm", true, false}, {leases, "kbind", "a-1", true, false}}},
		{"no copies, the related marks survived: deleted", []runtime.Object{
			meta("v1", "Secret", "team-a", "a-s", "A", rel, "b/0"),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}, Done, []obj{{secrets, "team-a", "a-s", true, false}, {leases, "kbind", "a-1", true, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := metadatafake.NewTestScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := metadatafake.NewSimpleMetadataClient(scheme, tc.world...)
			r := &Reaper{Metadata: c, Leases: leasesOf{md: c}, Discovery: fakeDiscovery()}
			v, err := r.Pass(context.Background(), "A", func() bool { return true })
			if err != nil || v != tc.want {
				t.Errorf("verdict %v (%v), want %v", v, err, tc.want)
			}
			for _, o := range tc.after {
				m, err := c.Resource(o.gvr).Namespace(o.ns).Get(context.Background(), o.name, metav1.GetOptions{})
				gone := apierrors.IsNotFound(err)
				if err != nil && !gone {
					t.Fatal(err)
				}
				if gone != o.gone {
					t.Errorf("%s %s/%s gone = %v, want %v", o.gvr.Resource, o.ns, o.name, gone, o.gone)
					continue
				}
				if gone {
					continue
				}
				if _, marked := m.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation]; o.markedNow && !marked {
					t.Errorf("%s %s/%s is not marked", o.gvr.Resource, o.ns, o.name)
				}
			}
		})
	}
}
