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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestPhaseOf(t *testing.T) {
	cases := []struct {
		group, resource string
		want            Phase
	}{
		{"example.org", "widgets", PhaseCopies},
		{"databases.acme.io", "postgreses", PhaseCopies},
		{"", "secrets", PhaseRelated},
		{"", "configmaps", PhaseRelated},
		{"", "namespaces", PhaseNamespaces},
		{"coordination.k8s.io", "leases", PhaseLeases},
		{"", "pods", PhaseNone},
		{"apps", "deployments", PhaseNone},
		{"rbac.authorization.k8s.io", "roles", PhaseNone},
		{"apiextensions.k8s.io", "customresourcedefinitions", PhaseNone},
		{"core.kbind.io", "connections", PhaseNone},
		{"autoscaling", "horizontalpodautoscalers", PhaseNone},
	}
	for _, tc := range cases {
		if got := PhaseOf(tc.group, tc.resource); got != tc.want {
			t.Errorf("PhaseOf(%q, %q) = %v, want %v", tc.group, tc.resource, got, tc.want)
		}
	}
}

func TestOwned(t *testing.T) {
	const uid = "consumer-a"
	marks := func(labelUID, annUID string, extra ...string) (map[string]string, map[string]string) {
		l := map[string]string{kbindv1alpha1.ManagedLabel: "true"}
		if labelUID != "" {
			l[kbindv1alpha1.ConsumerClusterUIDLabel] = labelUID
		}
		a := map[string]string{}
		if annUID != "" {
			a[kbindv1alpha1.ConsumerClusterUIDAnnotation] = annUID
		}
		for i := 0; i+1 < len(extra); i += 2 {
			a[extra[i]] = extra[i+1]
		}
		return l, a
	}
	objUID := kbindv1alpha1.ConsumerObjectUIDAnnotation
	related := kbindv1alpha1.RelatedBindingAnnotation
	cases := []struct {
		name  string
		phase Phase
		l, a  map[string]string
		want  bool
	}{
		{"copy with both markers", PhaseCopies, nil, nil, true},
		{"copy without object uid", PhaseCopies, nil, nil, false},
		{"copy of another consumer (label)", PhaseCopies, nil, nil, false},
		{"copy of another consumer (annotation)", PhaseCopies, nil, nil, false},
		{"unmarked copy", PhaseCopies, map[string]string{}, map[string]string{}, false},
		{"related copy", PhaseRelated, nil, nil, true},
		{"related copy without binding", PhaseRelated, nil, nil, false},
		{"namespace", PhaseNamespaces, nil, nil, true},
		{"lease", PhaseLeases, nil, nil, true},
		{"not managed", PhaseLeases, map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: uid}, map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: uid}, false},
		{"phase none never owned", PhaseNone, nil, nil, false},
	}
	cases[0].l, cases[0].a = marks(uid, uid, objUID, "o1")
	cases[1].l, cases[1].a = marks(uid, uid)
	cases[2].l, cases[2].a = marks("consumer-b", uid, objUID, "o1")
	cases[3].l, cases[3].a = marks(uid, "consumer-b", objUID, "o1")
	cases[5].l, cases[5].a = marks(uid, uid, related, "b1/0")
	cases[6].l, cases[6].a = marks(uid, uid)
	cases[7].l, cases[7].a = marks(uid, uid)
	cases[8].l, cases[8].a = marks(uid, uid)
	cases[10].l, cases[10].a = marks(uid, uid, objUID, "o1")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owned(tc.phase, uid, tc.l, tc.a); got != tc.want {
				t.Errorf("Owned = %v, want %v (labels %v, annotations %v)", got, tc.want, tc.l, tc.a)
			}
		})
	}
	if Owned(PhaseLeases, "", map[string]string{kbindv1alpha1.ManagedLabel: "true"}, nil) {
		t.Error("an empty consumer UID must own nothing")
	}
}

func TestBlocking(t *testing.T) {
	res := func(group, resource string) Resource {
		return Resource{GVR: schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource}}
	}
	obj := func(r Resource, name string) Object { return Object{Resource: r, Namespace: "team-a", Name: name} }
	cm, sa, ev, lease, widget := res("", "configmaps"), res("", "serviceaccounts"), res("events.k8s.io", "events"), res("coordination.k8s.io", "leases"), res("example.org", "widgets")
	mine := obj(lease, "demo-abc")
	removable := func(o Object) bool { return o.Key() == mine.Key() }
	cases := []struct {
		name     string
		contents []Object
		want     int
	}{
		{"empty", nil, 0},
		{"only what Kubernetes puts there", []Object{obj(cm, "kube-root-ca.crt"), obj(sa, "default"), obj(ev, "x")}, 0},
		{"the consumer's own Lease", []Object{mine}, 0},
		{"someone else's ConfigMap", []Object{obj(cm, "kube-root-ca.crt"), obj(cm, "app-config")}, 1},
		{"another consumer's copy", []Object{mine, obj(widget, "w-of-b")}, 1},
		{"another service account", []Object{obj(sa, "builder")}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Blocking(tc.contents, removable); len(got) != tc.want {
				t.Errorf("blocking %v, want %d", got, tc.want)
			}
		})
	}
}

func TestPhaseVerdict(t *testing.T) {
	cases := []struct {
		left, refused int
		want          Verdict
	}{
		{0, 0, Done}, {2, 0, Waiting}, {0, 1, Blocked}, {1, 1, Waiting},
	}
	for _, tc := range cases {
		if got := PhaseVerdict(tc.left, tc.refused); got != tc.want {
			t.Errorf("PhaseVerdict(%d, %d) = %v, want %v", tc.left, tc.refused, got, tc.want)
		}
	}
}

func TestObjectNames(t *testing.T) {
	w := Object{Resource: Resource{GVR: schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "widgets"}, Kind: "Widget"}, Namespace: "team-a", Name: "w1"}
	ns := Object{Resource: Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace"}, Name: "team-a"}
	if w.String() != "widgets.example.org team-a/w1" || ns.String() != "namespaces team-a" {
		t.Errorf("String: %q %q", w, ns)
	}
	if w.Resource.KindName() != "Widget.example.org" || ns.Resource.KindName() != "Namespace" {
		t.Errorf("KindName: %q %q", w.Resource.KindName(), ns.Resource.KindName())
	}
}

func TestDecideNamespace(t *testing.T) {
	res := func(group, resource string) Resource {
		return Resource{GVR: schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource}}
	}
	obj := func(r Resource, name string) Object { return Object{Resource: r, Namespace: "team-a", Name: name} }
	cm, lease, widget := res("", "configmaps"), res("coordination.k8s.io", "leases"), res("example.org", "widgets")
	mine := obj(lease, "a-1")
	ownLease := func(o Object) bool { return o.Key() == mine.Key() }
	rootCA := obj(cm, "kube-root-ca.crt")
	cases := []struct {
		name   string
		c      NamespaceContents
		fate   NamespaceFate
		retry  bool
		reason []string // fragments of the reason
	}{
		{"empty", NamespaceContents{}, DeleteNamespace, false, nil},
		{"only what Kubernetes puts there", NamespaceContents{Objects: []Object{rootCA}}, DeleteNamespace, false, nil},
		{"only the consumer's Lease", NamespaceContents{Objects: []Object{rootCA, mine}}, DeleteNamespaceAfterLeases, false, nil},
		{"another tenant's object", NamespaceContents{Objects: []Object{mine, obj(widget, "b-w1")}}, KeepNamespace, false,
			[]string{"holds 1 other object(s)", "widgets.example.org team-a/b-w1"}},
		{"a group could not be discovered", NamespaceContents{Undiscovered: []string{"broken.example.org/v1"}}, KeepNamespace, true,
			[]string{"cannot be proven empty", "could not be discovered", "broken.example.org/v1"}},
		{"a group could not be discovered, the rest only the Lease", NamespaceContents{Objects: []Object{mine}, Undiscovered: []string{"broken.example.org/v1"}}, KeepNamespace, true,
			[]string{"broken.example.org/v1"}},
		{"a list failed", NamespaceContents{Failed: []string{"gadgets.example.org: the server is currently unable to handle the request"}}, KeepNamespace, true,
			[]string{"listing failed", "gadgets.example.org"}},
		{"lists forbidden (no rbac.namespaceCleanup): kept for good", NamespaceContents{Forbidden: []string{"pods", "services", "deployments.apps", "jobs.batch"}}, KeepNamespace, false,
			[]string{"not allowed to list pods, services, deployments.apps and 1 more there"}},
		{"forbidden and undiscoverable", NamespaceContents{Forbidden: []string{"pods"}, Undiscovered: []string{"broken.example.org/v1"}}, KeepNamespace, true,
			[]string{"pods", "broken.example.org/v1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideNamespace(tc.c, ownLease)
			if d.Fate != tc.fate || d.Retry != tc.retry {
				t.Errorf("fate %v retry %v, want %v %v (%+v)", d.Fate, d.Retry, tc.fate, tc.retry, d)
			}
			if (d.Fate == KeepNamespace) != (d.Reason != "") {
				t.Errorf("a kept namespace, and only one, says why: %q", d.Reason)
			}
			for _, f := range tc.reason {
				if !strings.Contains(d.Reason, f) {
					t.Errorf("reason %q lacks %q", d.Reason, f)
				}
			}
		})
	}
}

func TestUndiscovered(t *testing.T) {
	failed := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
		{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("stale"),
		{Group: "broken.example.org", Version: "v1"}:  errors.New("stale"),
	}}
	cases := []struct {
		name    string
		err     error
		want    string
		wantErr bool
	}{
		{"complete", nil, "", false},
		{"some groups failed", failed, "broken.example.org/v1,metrics.k8s.io/v1beta1", false},
		{"wrapped", fmt.Errorf("discovering: %w", failed), "broken.example.org/v1,metrics.k8s.io/v1beta1", false},
		{"discovery failed as a whole", errors.New("connection refused"), "", true},
		{"an empty group error is no partial success", &discovery.ErrGroupDiscoveryFailed{}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Undiscovered(tc.err)
			if strings.Join(got, ",") != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Undiscovered = %v, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// The reaper accepts exactly what the engine's writers write: the markers
// of each kind of object kbind creates make it the consumer's in its phase,
// and dropping any one of them (a partially marked object) makes it not.
func TestOwnedAcceptsWhatWritersWrite(t *testing.T) {
	const uid = "consumer-uid"
	cases := []struct {
		phase   Phase
		markers kbindv1alpha1.Markers
		// optional lists markers that are informational, not ownership.
		optional []string
	}{
		{PhaseCopies, kbindv1alpha1.CopyMarkers(uid, "object-uid"), nil},
		{PhaseRelated, kbindv1alpha1.RelatedCopyMarkers(uid, "binding-uid/entry"), nil},
		{PhaseNamespaces, kbindv1alpha1.NamespaceMarkers(uid), nil},
		{PhaseLeases, kbindv1alpha1.LeaseMarkers(uid, "provider"), []string{kbindv1alpha1.ConnectionAnnotation}},
	}
	for _, tc := range cases {
		if !Owned(tc.phase, uid, tc.markers.Labels, tc.markers.Annotations) {
			t.Errorf("%s: the writers' markers are not accepted", tc.phase)
		}
		if Owned(tc.phase, "another-consumer", tc.markers.Labels, tc.markers.Annotations) {
			t.Errorf("%s: accepted for another consumer", tc.phase)
		}
		for _, drop := range []struct {
			labels bool
			keys   map[string]string
		}{{true, tc.markers.Labels}, {false, tc.markers.Annotations}} {
			for key := range drop.keys {
				if slices.Contains(tc.optional, key) {
					continue
				}
				labels, annotations := maps.Clone(tc.markers.Labels), maps.Clone(tc.markers.Annotations)
				if drop.labels {
					delete(labels, key)
				} else {
					delete(annotations, key)
				}
				if Owned(tc.phase, uid, labels, annotations) {
					t.Errorf("%s: accepted without %s", tc.phase, key)
				}
			}
		}
	}
}

func TestHeldBy(t *testing.T) {
	holder := func(s string) *string { return &s }
	for _, tc := range []struct {
		holder   *string
		consumer string
		want     bool
	}{
		{holder("A"), "A", true},
		{holder("B"), "A", false},
		{holder(""), "A", false},
		{nil, "A", false},
		{holder(""), "", false},
	} {
		if got := HeldBy(tc.holder, tc.consumer); got != tc.want {
			t.Errorf("HeldBy(%v, %q) = %v, want %v", tc.holder, tc.consumer, got, tc.want)
		}
	}
}

func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Group: "example.org", Resource: "widgets"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"RBAC", apierrors.NewForbidden(gr, "w", errors.New(`User "system:serviceaccount:kbind-system:kbind-backend" cannot delete resource "widgets"`)), true},
		{"an admission policy", apierrors.NewForbidden(gr, "w", errors.New("ValidatingAdmissionPolicy 'p' denied request")), true},
		{"the admission warming up", apierrors.NewForbidden(gr, "w", errors.New("not yet ready to handle request")), false},
		{"the admission warming up, wrapped", fmt.Errorf("delete: %w", apierrors.NewForbidden(gr, "w", errors.New("not yet ready to handle request"))), false},
		{"the words inside a refusal", apierrors.NewForbidden(gr, "w", errors.New("not yet ready to handle request: RBAC says no")), true},
		{"not a 403", apierrors.NewServiceUnavailable("not yet ready to handle request"), false},
	} {
		if got := Refused(tc.err); got != tc.want {
			t.Errorf("%s: Refused = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDecideCopy(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	grace := 10 * time.Minute
	kept := map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptOrphan}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		mark   string
		want   CopyAction
	}{
		{"unmarked: mark", nil, "", MarkCopy},
		{"kept: never marked", kept, "", KeepCopy},
		{"kept and marked: never deleted", kept, "2000-01-01T00:00:00Z", KeepCopy},
		{"kept by deletion protection (BIND-5): never marked", map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection}, "", KeepCopy},
		{"kept by deletion protection and marked: never deleted", map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection}, "2000-01-01T00:00:00Z", KeepCopy},
		{"marked a moment ago: wait", nil, MarkValue(now.Add(-time.Minute)), WaitForGrace},
		{"marked just under the grace period: wait", nil, MarkValue(now.Add(-grace + time.Second)), WaitForGrace},
		{"the mark survived the grace period: delete", nil, MarkValue(now.Add(-grace)), DeleteCopy},
		{"a mark that cannot be parsed: marked again", nil, "yesterday", MarkCopy},
		{"a mark in the future (another clock): marked again, never early", nil, MarkValue(now.Add(time.Hour)), MarkCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecideCopy(tc.labels, tc.mark, time.Time{}, now, grace); got != tc.want {
				t.Errorf("DecideCopy = %v, want %v", got, tc.want)
			}
		})
	}
	// since: the consumer's last renewal the backend saw.
	renewed := now.Add(-time.Minute).Add(300 * time.Millisecond)
	for _, tc := range []struct {
		name string
		mark string
		want CopyAction
	}{
		{"marked long before the last renewal: marked again", MarkValue(now.Add(-time.Hour)), MarkCopy},
		{"marked a second before the last renewal: marked again", MarkValue(renewed.Add(-time.Second)), MarkCopy},
		{"marked in the second of the last renewal: counts", MarkValue(renewed), WaitForGrace},
		{"marked after the last renewal, still young: wait", MarkValue(renewed.Add(time.Second)), WaitForGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecideCopy(nil, tc.mark, renewed, now, grace); got != tc.want {
				t.Errorf("DecideCopy = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCopiesVerdict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		actions []CopyAction
		want    bool
	}{
		{"nothing", nil, false},
		{"only kept copies", []CopyAction{KeepCopy}, false},
		{"every mark survived", []CopyAction{DeleteCopy, DeleteCopy, KeepCopy}, true},
		{"one mark cleared (a live konnector): none goes", []CopyAction{DeleteCopy, MarkCopy}, false},
		{"one mark still young: none goes", []CopyAction{DeleteCopy, WaitForGrace}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CopiesVerdict(tc.actions); got != tc.want {
				t.Errorf("CopiesVerdict = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUntilDue(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	grace := 10 * time.Minute
	for _, tc := range []struct {
		name  string
		marks []string
		want  time.Duration
	}{
		{"none", nil, grace},
		{"all marked now", []string{MarkValue(now), MarkValue(now)}, grace},
		{"the earliest mark counts", []string{MarkValue(now), MarkValue(now.Add(-4 * time.Minute))}, 6 * time.Minute},
		{"already due: at least a second", []string{MarkValue(now.Add(-time.Hour))}, time.Second},
		{"invalid and future marks do not count", []string{"x", MarkValue(now.Add(time.Hour))}, grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UntilDue(tc.marks, now, grace); got != tc.want {
				t.Errorf("UntilDue = %v, want %v", got, tc.want)
			}
		})
	}
}
