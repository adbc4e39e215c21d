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

package patch

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// counting is a fake client that counts patches, so that the tests can
// say a write did or did not happen.
func counting(t *testing.T, objs ...client.Object) (client.Client, *int) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	n := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&corev1.Namespace{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				n++
				return c.Patch(ctx, obj, p, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				n++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	return c, &n
}

func TestFinalizers(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	c, writes := counting(t, ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := AddFinalizer(ctx, c, ns, "example.org/f"); err != nil {
			t.Fatal(err)
		}
	}
	if *writes != 1 || !controllerutil.ContainsFinalizer(ns, "example.org/f") {
		t.Fatalf("writes %d, finalizers %v: want one write adding it", *writes, ns.Finalizers)
	}
	stale := ns.DeepCopy()
	stale.ResourceVersion = "1"
	if err := RemoveFinalizer(ctx, c, stale, "example.org/f"); err == nil {
		t.Error("a stale object must conflict, not overwrite")
	}
	for i := 0; i < 2; i++ {
		if err := RemoveFinalizer(ctx, c, ns, "example.org/f"); err != nil {
			t.Fatal(err)
		}
	}
	if *writes != 3 || controllerutil.ContainsFinalizer(ns, "example.org/f") {
		t.Fatalf("writes %d, finalizers %v", *writes, ns.Finalizers)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	c, writes := counting(t, ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		t.Fatal(err)
	}
	before := ns.DeepCopy()
	if err := Status(ctx, c, before, ns); err != nil || *writes != 0 {
		t.Fatalf("an unchanged status was written (%d, %v)", *writes, err)
	}
	ns.Status.Phase = corev1.NamespaceTerminating
	if err := Status(ctx, c, before, ns); err != nil || *writes != 1 {
		t.Fatalf("a changed status: %d writes, %v", *writes, err)
	}
	got := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), got); err != nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("status %v (%v)", got.Status, err)
	}
}

// The finalizer patch carries the finalizers and the resourceVersion it
// is guarded by, nothing else: what else changed in memory is not
// written.
func TestFinalizersPatch(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7", Labels: map[string]string{"changed": "in memory"}}}
	for _, tc := range []struct {
		finalizers []string
		want       string
	}{
		{[]string{"example.org/f", "other/g"}, `{"metadata":{"finalizers":["example.org/f","other/g"],"resourceVersion":"7"}}`},
		// The last one removed: null removes the field.
		{nil, `{"metadata":{"finalizers":null,"resourceVersion":"7"}}`},
	} {
		ns.Finalizers = tc.finalizers
		p, err := finalizersPatch(ns)
		if err != nil {
			t.Fatal(err)
		}
		data, err := p.Data(ns)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != tc.want || p.Type() != types.MergePatchType {
			t.Errorf("%v: got %s %s, want %s", tc.finalizers, p.Type(), data, tc.want)
		}
	}
}
