package reaper

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	discoveryfake "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// preferred serves a fixed resource list as the server-preferred one (the
// client-go fake returns none).
type preferred struct {
	discovery.DiscoveryInterface
	lists []*metav1.APIResourceList
}

func (p preferred) ServerPreferredResources() ([]*metav1.APIResourceList, error) { return p.lists, nil }

func fakeDiscovery() discovery.DiscoveryInterface {
	rw := []string{"list", "delete", "get"}
	return preferred{DiscoveryInterface: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}, lists: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: rw},
			{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: rw},
			{Name: "namespaces", Kind: "Namespace", Verbs: rw},
			{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: rw},
			{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get"}},
		}},
		{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "leases", Kind: "Lease", Namespaced: true, Verbs: rw}}},
		{GroupVersion: "example.org/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: rw},
			{Name: "gadgets", Kind: "Gadget", Verbs: rw},
		}},
	}}
}

func meta(apiVersion, kind, ns, name, consumer string, extra ...string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	if consumer != "" {
		m.Labels = map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumer}
		m.Annotations = map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: consumer}
		for i := 0; i+1 < len(extra); i += 2 {
			m.Annotations[extra[i]] = extra[i+1]
		}
	}
	return m
}

func TestPassVerdicts(t *testing.T) {
	objUID := kbindv1alpha1.ConsumerObjectUIDAnnotation
	world := func() []runtime.Object {
		return []runtime.Object{
			meta("example.org/v1alpha1", "Widget", "team-a", "a-w1", "A", objUID, "o1"),
			meta("example.org/v1alpha1", "Widget", "team-a", "b-w1", "B", objUID, "o2"),
			meta("v1", "ConfigMap", "team-a", "a-cm", "A", kbindv1alpha1.RelatedBindingAnnotation, "b/0"),
			meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
		}
	}
	gone := func(t *testing.T, c *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns, name string) bool {
		t.Helper()
		_, err := c.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	widgets := schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cases := []struct {
		name      string
		reactor   func(*metadatafake.FakeMetadataClient)
		want      Verdict
		leaseGone bool
	}{
		{"everything listable: done, Lease last", nil, Done, true},
		{"an aggregated API fails to list: the rest goes, the Lease stays", func(c *metadatafake.FakeMetadataClient) {
			c.PrependReactor("list", "gadgets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("gadgets.example.org is down")
			})
		}, Blocked, false},
		{"Leases may not be listed: not done", func(c *metadatafake.FakeMetadataClient) {
			c.PrependReactor("list", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(leases.GroupResource(), "", nil)
			})
		}, Blocked, false},
		{"a Widget may not be deleted: reported, the rest goes", func(c *metadatafake.FakeMetadataClient) {
			c.PrependReactor("delete", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(widgets.GroupResource(), "a-w1", nil)
			})
		}, Blocked, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := metadatafake.NewTestScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := metadatafake.NewSimpleMetadataClient(scheme, world()...)
			if tc.reactor != nil {
				tc.reactor(c)
			}
			r := &Reaper{Metadata: c, Discovery: fakeDiscovery()}
			v, err := r.Pass(context.Background(), "A", func() bool { return true })
			if err != nil || v != tc.want {
				t.Fatalf("verdict %v (%v), want %v", v, err, tc.want)
			}
			if gone(t, c, widgets, "team-a", "b-w1") {
				t.Error("B's Widget was deleted")
			}
			if !gone(t, c, configmaps, "team-a", "a-cm") {
				t.Error("A's related ConfigMap was not deleted")
			}
			if got := gone(t, c, leases, "kbind", "a-1"); got != tc.leaseGone {
				t.Errorf("Lease gone = %v, want %v", got, tc.leaseGone)
			}
		})
	}
}
