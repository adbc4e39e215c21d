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
	"errors"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	err   error
}

func (p preferred) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return p.lists, p.err
}

func fakeDiscovery() preferred {
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

// leasesOf lists the Leases the metadata fake holds (so that deletions
// show), each held by holders[name], else by the consumer its label names.
type leasesOf struct {
	md      *metadatafake.FakeMetadataClient
	holders map[string]string
}

func (f leasesOf) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	list, err := f.md.Resource(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	out := &coordinationv1.LeaseList{}
	for _, m := range list.Items {
		if !sel.Matches(labels.Set(m.Labels)) {
			continue
		}
		holder, ok := f.holders[m.Name]
		if !ok {
			holder = m.Labels[kbindv1alpha1.ConsumerClusterUIDLabel]
		}
		out.Items = append(out.Items, coordinationv1.Lease{ObjectMeta: m.ObjectMeta, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}})
	}
	return out, nil
}

func meta(apiVersion, kind, ns, name, consumer string, extra ...string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	if consumer != "" {
		m.Labels = map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: consumer}
		// Marked long ago: the two-phase decisions have their own tests
		// (decide_test.go, backend/twophase_test.go); these tests are about
		// the order and verdicts of the deletions that follow.
		m.Annotations = map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: consumer,
			kbindv1alpha1.ReapMarkedAtAnnotation: "2000-01-01T00:00:00Z"}
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
		{"an aggregated API fails to list: its copies' marks are unknown (a live konnector may clear them), so the copies wait and nothing is deleted", func(c *metadatafake.FakeMetadataClient) {
			c.PrependReactor("list", "gadgets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("gadgets.example.org is down")
			})
		}, Waiting, false},
		{"Leases may not be read: a renewal cannot be ruled out, so nothing is deleted", func(c *metadatafake.FakeMetadataClient) {
			c.PrependReactor("list", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(leases.GroupResource(), "", nil)
			})
		}, Waiting, false},
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
			r := &Reaper{Metadata: c, Leases: leasesOf{md: c}, Discovery: fakeDiscovery()}
			v, err := r.Pass(context.Background(), "A", func() bool { return true })
			if err != nil || v != tc.want {
				t.Fatalf("verdict %v (%v), want %v", v, err, tc.want)
			}
			if gone(t, c, widgets, "team-a", "b-w1") {
				t.Error("B's Widget was deleted")
			}
			if got := gone(t, c, configmaps, "team-a", "a-cm"); got != (tc.want != Waiting) {
				t.Errorf("A's related ConfigMap gone = %v, want %v", got, tc.want != Waiting)
			}
			if got := gone(t, c, leases, "kbind", "a-1"); got != tc.leaseGone {
				t.Errorf("Lease gone = %v, want %v", got, tc.leaseGone)
			}
		})
	}
}

// TestPassKeepsWhatDiscoveryCannotSee: an API group whose discovery failed
// (an aggregated API that is down) may hold objects in a namespace kbind
// created for the consumer, and copies of the consumer. The namespace
// cannot be proven empty, so it stays; the pass does not finish, so the
// Lease stays and the consumer is retried. Everything that can be seen is
// still reaped. Once discovery works, the next pass finishes.
func TestPassKeepsWhatDiscoveryCannotSee(t *testing.T) {
	objUID := kbindv1alpha1.ConsumerObjectUIDAnnotation
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := metadatafake.NewSimpleMetadataClient(scheme,
		meta("v1", "Namespace", "", "team-a", "A"),
		meta("example.org/v1alpha1", "Widget", "team-a", "a-w1", "A", objUID, "o1"),
		meta("v1", "ConfigMap", "team-a", "a-cm", "A", kbindv1alpha1.RelatedBindingAnnotation, "b/0"),
		meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
	)
	broken := schema.GroupVersion{Group: "broken.example.org", Version: "v1"}
	d := fakeDiscovery()
	d.err = &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{broken: errors.New("stale")}}
	r := &Reaper{Metadata: c, Leases: leasesOf{md: c}, Discovery: d}
	ctx := context.Background()
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	exists := func(gvr schema.GroupVersionResource, ns, name string) bool {
		t.Helper()
		var err error
		if ns == "" {
			_, err = c.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		} else {
			_, err = c.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	plan, err := r.Plan(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, o := range plan.Objects() {
		planned = append(planned, o.String())
	}
	if got, want := strings.Join(planned, ","), "widgets.example.org team-a/a-w1,configmaps team-a/a-cm"; got != want {
		t.Errorf("plan %s, want %s (no namespace, no Lease)", got, want)
	}
	if k, ok := plan.Kept["team-a"]; !ok || !strings.Contains(k.Reason, "broken.example.org/v1") {
		t.Errorf("the plan must keep team-a naming the undiscoverable group: %+v", plan.Kept)
	}
	if !strings.Contains(plan.LeasesKept, "broken.example.org/v1") || len(plan.Undiscovered) != 1 {
		t.Errorf("the plan must keep the Leases naming the group: %q %v", plan.LeasesKept, plan.Undiscovered)
	}

	if v, err := r.Pass(ctx, "A", func() bool { return true }); err != nil || v != Blocked {
		t.Fatalf("pass with a group undiscoverable: %v %v, want blocked", v, err)
	}
	if exists(schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}, "team-a", "a-w1") ||
		exists(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "team-a", "a-cm") {
		t.Error("what can be seen must still be reaped")
	}
	if !exists(namespaces, "", "team-a") {
		t.Error("namespace team-a deleted although a group could not be discovered")
	}
	if !exists(leases, "kbind", "a-1") {
		t.Error("the Lease was deleted although the pass could not see every group")
	}

	r.Discovery = fakeDiscovery() // the aggregated API is back
	if v, err := r.Pass(ctx, "A", func() bool { return true }); err != nil || v != Done {
		t.Fatalf("pass with discovery back: %v %v, want done", v, err)
	}
	if exists(namespaces, "", "team-a") || exists(leases, "kbind", "a-1") {
		t.Error("with discovery back the namespace and the Lease must go")
	}
}

// TestPassKeepsANamespaceItMayNotList: without the RBAC to list everything
// in a namespace (the backend chart without rbac.namespaceCleanup), a
// namespace kbind created cannot be proven empty and is kept for good; the
// rest is reaped and the pass finishes (narrowed RBAC is a choice). The
// reaper stops at the first refused list of that namespace.
func TestPassKeepsANamespaceItMayNotList(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := metadatafake.NewSimpleMetadataClient(scheme,
		meta("v1", "Namespace", "", "team-a", "A"),
		meta("example.org/v1alpha1", "Widget", "team-a", "a-w1", "A", kbindv1alpha1.ConsumerObjectUIDAnnotation, "o1"),
		meta("coordination.k8s.io/v1", "Lease", "kbind", "a-1", "A"),
	)
	refused := 0
	c.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "team-a" && a.GetResource().Resource != "widgets" {
			refused++
			return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", nil)
		}
		return false, nil, nil
	})
	r := &Reaper{Metadata: c, Leases: leasesOf{md: c}, Discovery: fakeDiscovery()}
	ctx := context.Background()
	plan, err := r.Plan(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := plan.Kept["team-a"]; !ok || k.Retry || !strings.Contains(k.Reason, "not allowed to list") || plan.LeasesKept != "" || len(plan.Leases) != 1 {
		t.Errorf("plan: kept %+v, leases %v (%q)", plan.Kept, plan.Leases, plan.LeasesKept)
	}
	refused = 0
	if v, err := r.Pass(ctx, "A", func() bool { return true }); err != nil || v != Done {
		t.Fatalf("pass: %v %v, want done", v, err)
	}
	if refused != 1 {
		t.Errorf("%d refused lists in team-a, want 1 (the first one settles it)", refused)
	}
	if _, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "team-a", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace team-a: %v", err)
	}
	if _, err := c.Resource(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}).Namespace("kbind").Get(ctx, "a-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease must go once everything that can be reaped is: %v", err)
	}
}

// TestPassLeavesATakenOverLease: a Lease with every marker of the consumer
// but held by someone else is not the consumer's: neither planned nor
// deleted, and the namespace kbind created that holds it is kept (it holds
// something that is not the consumer's). Without a Lease reader no Lease is
// deleted and the pass does not finish.
func TestPassLeavesATakenOverLease(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := metadatafake.NewSimpleMetadataClient(scheme,
		meta("v1", "Namespace", "", "a", "A"),
		meta("coordination.k8s.io/v1", "Lease", "a", "a-1", "A"),
		meta("coordination.k8s.io/v1", "Lease", "a", "a-2", "A"),
	)
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	ctx := context.Background()
	exists := func(name string) bool {
		t.Helper()
		_, err := c.Resource(leases).Namespace("a").Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	r := &Reaper{Metadata: c, Discovery: fakeDiscovery()}
	if v, err := r.Pass(ctx, "A", func() bool { return true }); err != nil || v != Blocked || !exists("a-1") {
		t.Fatalf("without a Lease reader: %v %v, a-1 there %v; want blocked and kept", v, err, exists("a-1"))
	}

	r.Leases = leasesOf{md: c, holders: map[string]string{"a-2": "someone-else"}}
	plan, err := r.Plan(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, o := range plan.Objects() {
		planned = append(planned, o.String())
	}
	if got, want := strings.Join(planned, ","), "leases.coordination.k8s.io a/a-1"; got != want {
		t.Errorf("plan %s, want %s", got, want)
	}
	if k, ok := plan.Kept["a"]; !ok || !strings.Contains(k.Reason, "a-2") {
		t.Errorf("namespace a must be kept for the Lease it holds: %+v", plan.Kept)
	}
	if v, err := r.Pass(ctx, "A", func() bool { return true }); err != nil || v != Done {
		t.Fatalf("pass: %v %v, want done", v, err)
	}
	if exists("a-1") || !exists("a-2") {
		t.Errorf("a-1 there %v (want deleted), a-2 there %v (want kept: taken over)", exists("a-1"), exists("a-2"))
	}
	if _, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace a: %v", err)
	}
}
