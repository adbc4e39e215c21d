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

package consumers

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

// TestGatherCountsCopies: a granted consumer's copies are counted per API
// and namespace over the UID of its Lease; a revoked one's (no
// ServiceAccount, no roles) are looked for among every API granted to
// anyone and every exported CRD, and an API the provider does not serve
// leaves its total unknown, with the reason among its problems.
func TestGatherCountsCopies(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)

	consumer := func(name string) map[string]string { return map[string]string{access.ConsumerLabel: name} }
	lease := func(ns, uid string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kbind-heartbeat", Labels: map[string]string{
			kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.ConsumerClusterUIDLabel: uid}}}
	}
	copyOf := func(ns, name, uid string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			kbindv1alpha1.ConsumerClusterUIDLabel: uid}}}
	}
	objs := []client.Object{
		// alice: granted deployments.apps, her Lease in her namespace.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind-system", Name: "alice", Labels: consumer("alice"),
			Annotations: map[string]string{access.NamespaceAnnotation: "alice-ns"}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "alice-ns", Name: "alice", Labels: consumer("alice")},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}}}},
		lease("alice-ns", "uid-a"),
		copyOf("p-1", "a", "uid-a"), copyOf("p-1", "b", "uid-a"), copyOf("p-2", "c", "uid-a"),
		// bob: revoked; his namespace and Lease are left.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bob-ns", Labels: consumer("bob")}},
		lease("bob-ns", "uid-b"),
		copyOf("q-1", "d", "uid-b"),
		// An exported API the provider does not serve.
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org",
			Labels: map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}}},
		// Not a copy of anyone's.
		copyOf("p-1", "e", "uid-other"),
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).Build()

	l, err := Gather(context.Background(), c, now, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Consumers) != 2 || l.Consumers[0].Name != "alice" || l.Consumers[1].Name != "bob" {
		t.Fatalf("consumers %+v, want alice and bob", l.Consumers)
	}
	alice, bob := l.Consumers[0], l.Consumers[1]
	if alice.Objects == nil || *alice.Objects != 3 {
		t.Errorf("alice's objects %v, want 3", alice.Objects)
	}
	if want := []CopyCount{{API: "deployments.apps", Namespace: "p-1", Count: 2}, {API: "deployments.apps", Namespace: "p-2", Count: 1}}; !reflect.DeepEqual(alice.Copies, want) {
		t.Errorf("alice's copies %+v, want %+v", alice.Copies, want)
	}
	if len(alice.Problems) != 0 {
		t.Errorf("alice's problems %q, want none", alice.Problems)
	}
	if bob.Status != StatusRevoked {
		t.Errorf("bob's status %s, want %s", bob.Status, StatusRevoked)
	}
	if bob.Objects != nil {
		t.Errorf("bob's objects %d, want unknown (widgets.example.org could not be counted)", *bob.Objects)
	}
	if want := []CopyCount{{API: "deployments.apps", Namespace: "q-1", Count: 1}}; !reflect.DeepEqual(bob.Copies, want) {
		t.Errorf("bob's copies %+v, want %+v", bob.Copies, want)
	}
	if len(bob.Problems) != 1 || !strings.HasPrefix(bob.Problems[0], "counting its widgets.example.org copies: the provider does not serve it") {
		t.Errorf("bob's problems %q, want one about widgets.example.org", bob.Problems)
	}
}

// TestGatherOnly: only the consumer asked for, and an error for one that
// does not exist.
func TestGatherOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(meta.NewDefaultRESTMapper([]schema.GroupVersion{})).WithObjects(
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind-system", Name: "alice", Labels: map[string]string{access.ConsumerLabel: "alice"}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind-system", Name: "carol", Labels: map[string]string{access.ConsumerLabel: "carol"}}},
	).Build()
	l, err := Gather(context.Background(), c, now, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Consumers) != 1 || l.Consumers[0].Name != "carol" || l.Consumers[0].Status != StatusGranted {
		t.Errorf("consumers %+v, want carol, granted", l.Consumers)
	}
	if _, err := Gather(context.Background(), c, now, "dave"); err == nil || !strings.Contains(err.Error(), `no consumer "dave"`) {
		t.Errorf("Gather of a missing consumer: %v, want an error naming it", err)
	}
}

// TestGatherNeverGranted: a heartbeat Lease in no granted consumer's
// namespace is a consumer cluster that connected without a grant (the
// quickstart's, an administrator's credentials): it is listed, named by
// its consumer cluster UID and marked, with its copies looked for among
// every exported API — never dropped for "No consumers".
func TestGatherNeverGranted(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	renewed := metav1.NewMicroTime(now.Add(-5 * time.Second))
	lease := func(ns, name, uid string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.ConsumerClusterUIDLabel: uid}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(uid), RenewTime: &renewed, LeaseDurationSeconds: ptr.To[int32](60)}}
	}
	objs := []client.Object{
		// alice: granted, her Lease in her namespace.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "kbind-consumer-alice", Labels: map[string]string{access.ConsumerLabel: "alice"},
			Annotations: map[string]string{access.NamespaceAnnotation: "kbind-alice"}}},
		lease("kbind-alice", "provider-uid-a", "uid-a"),
		// The quickstart's konnector: a Lease in kbind, nobody's namespace,
		// two Connections of one consumer cluster.
		lease("kbind", "demo-provider-uid-q", "uid-q"),
		lease("kbind", "other-uid-q", "uid-q"),
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "deployments.apps",
			Labels: map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", Labels: map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "uid-q"}}},
		// bob: revoked, no Lease; someone writes a live Lease elsewhere
		// whose UID spells his name, to make him look connected.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kbind-bob", Labels: map[string]string{access.ConsumerLabel: "bob"}}},
		lease("elsewhere", "spoof", "bob"),
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).Build()
	l, err := Gather(context.Background(), c, now, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Consumers) != 4 || l.Consumers[0].Name != "alice" || l.Consumers[1].Name != "bob" || l.Consumers[2].Name != "elsewhere/spoof" || l.Consumers[3].Name != "uid-q" {
		t.Fatalf("consumers %+v, want alice, bob, elsewhere/spoof and uid-q", l.Consumers)
	}
	alice, bob, spoof, q := l.Consumers[0], l.Consumers[1], l.Consumers[2], l.Consumers[3]
	if bob.Status != StatusRevoked || len(bob.Leases) != 0 || !spoof.NeverGranted || spoof.Status != StatusConnected {
		t.Errorf("a Lease whose UID spells a granted consumer's name lent it a heartbeat: bob %+v, the Lease's consumer %+v", bob, spoof)
	}
	if alice.NeverGranted || alice.Status != StatusConnected || len(alice.Leases) != 1 {
		t.Errorf("alice: %+v", alice)
	}
	if !q.NeverGranted || q.Status != StatusConnected || q.Namespace != "kbind" || len(q.Leases) != 2 || q.Objects == nil || *q.Objects != 1 {
		t.Errorf("the never-granted consumer: %+v", q)
	}
	if got := StatusCell(q); got != "connected (never granted)" {
		t.Errorf("its status cell %q", got)
	}
	only, err := Gather(context.Background(), c, now, "uid-q")
	if err != nil || len(only.Consumers) != 1 || !only.Consumers[0].NeverGranted {
		t.Errorf("Gather of uid-q: %+v, %v", only.Consumers, err)
	}
}
