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

package namespace

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestEnsure(t *testing.T) {
	const uid = "consumer-1"
	shared := Policy{Markers: kbindv1alpha1.NamespaceMarkers(uid)}
	owned := Policy{Markers: kbindv1alpha1.PrefixedNamespaceMarkers(uid, "team-a"), Owned: true, ConsumerClusterUID: uid}
	ns := func(annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "p-team-a", Annotations: annotations}}
	}
	ours := ns(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: uid})
	another := ns(map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: "consumer-2"})
	unmarked := ns(nil)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "p-team-a", nil)

	cases := []struct {
		name     string
		policy   Policy
		existing *corev1.Namespace // on the server
		stale    bool              // the reader has not seen existing yet
		create   error             // the create's answer, instead of the server's
		want     kbindv1alpha1.Reason
		wantErr  func(error) bool
		created  bool // the namespace now carries policy.Markers
	}{
		{name: "missing, shared: created", policy: shared, created: true},
		{name: "missing, owned: created", policy: owned, created: true},
		{name: "unmarked, shared: used", policy: shared, existing: unmarked},
		{name: "another's, shared: used", policy: shared, existing: another},
		{name: "ours, owned: used", policy: owned, existing: ours},
		{name: "unmarked, owned: conflict", policy: owned, existing: unmarked, want: kbindv1alpha1.ReasonForeignObjectExists},
		{name: "another's, owned: conflict", policy: owned, existing: another, want: kbindv1alpha1.ReasonOwnedByAnother},
		{name: "created meanwhile, shared: used", policy: shared, existing: unmarked, stale: true},
		{name: "created meanwhile, owned: retried", policy: owned, existing: unmarked, stale: true, wantErr: apierrors.IsAlreadyExists},
		{name: "create refused: returned as it is", policy: shared, create: forbidden, wantErr: apierrors.IsForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := fake.NewClientBuilder()
			if tc.existing != nil {
				b = b.WithObjects(tc.existing.DeepCopy())
			}
			c := b.WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if tc.create != nil {
					return tc.create
				}
				return c.Create(ctx, obj, opts...)
			}}).Build()
			var r client.Reader = c
			if tc.stale {
				r = fake.NewClientBuilder().Build()
			}
			got, err := Ensure(ctx, r, c, "p-team-a", tc.policy)
			switch {
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("error %v", err)
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Errorf("conflict %q, want %q", got, tc.want)
			}
			if !tc.created {
				return
			}
			made := &corev1.Namespace{}
			if err := c.Get(ctx, client.ObjectKey{Name: "p-team-a"}, made); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.policy.Markers.Labels {
				if made.Labels[k] != v {
					t.Errorf("label %s=%q, want %q", k, made.Labels[k], v)
				}
			}
			for k, v := range tc.policy.Markers.Annotations {
				if made.Annotations[k] != v {
					t.Errorf("annotation %s=%q, want %q", k, made.Annotations[k], v)
				}
			}
		})
	}
}
