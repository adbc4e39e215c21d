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

package index

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// builderIndexer registers Setup's indexes on a fake client builder, so
// that the test reads through the same extractors the manager's cache uses.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

func spec(connection string, apis ...string) kbindv1alpha1.BindingSpec {
	s := kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: connection}}
	for _, a := range apis {
		s.APIs = append(s.APIs, kbindv1alpha1.APIReference{Name: a})
	}
	return s
}

func newReader(t *testing.T, funcs *interceptor.Funcs) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := kbindv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "b-cb"}, Spec: spec("c1", "widgets")},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "a-cb"}, Spec: spec("c2", "widgets", "gadgets")},
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns2", Name: "x"}, Spec: spec("c1", "widgets")},
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "y"}, Spec: spec("c1", "gadgets")},
		&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a"}, Spec: spec("c2", "widgets")},
		crd("gizmos.acme.io", "acme.io"), crd("gizmoz.acme.io", "acme.io"), crd("widgets.example.org", "example.org"),
	)
	if err := Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

func names(list []kbindv1alpha1.BindingObject) []string {
	out := make([]string, 0, len(list))
	for _, b := range list {
		n := b.BindingKind() + " " + b.GetName()
		if b.GetNamespace() != "" {
			n = b.BindingKind() + " " + b.GetNamespace() + "/" + b.GetName()
		}
		out = append(out, n)
	}
	return out
}

func TestListBindings(t *testing.T) {
	r := newReader(t, nil)
	for _, tc := range []struct {
		name  string
		kinds Kinds
		opts  []client.ListOption
		want  []string
	}{
		{"both kinds by API: ClusterBindings first, each sorted", AllBindings, []client.ListOption{client.MatchingFields{BindingAPI: "widgets"}},
			[]string{"ClusterBinding a-cb", "ClusterBinding b-cb", "Binding ns1/a", "Binding ns2/x"}},
		{"ClusterBindings by Connection", ClusterBindings, []client.ListOption{client.MatchingFields{BindingConnection: "c1"}},
			[]string{"ClusterBinding b-cb"}},
		{"Bindings by Connection", Bindings, []client.ListOption{client.MatchingFields{BindingConnection: "c1"}},
			[]string{"Binding ns1/y", "Binding ns2/x"}},
		{"Bindings in a namespace", Bindings, []client.ListOption{client.InNamespace("ns1")},
			[]string{"Binding ns1/a", "Binding ns1/y"}},
		{"none of an unknown Connection", AllBindings, []client.ListOption{client.MatchingFields{BindingConnection: "c3"}},
			[]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ListBindings(context.Background(), r, tc.kinds, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tc.want) {
				t.Errorf("got %q, want %q", names(got), tc.want)
			}
		})
	}
}

func crd(name, group string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group}}
}

// The CRDs of a group, as the names check of a new consumer CRD reads them.
func TestCRDsByGroup(t *testing.T) {
	r := newReader(t, nil)
	for group, want := range map[string][]string{"acme.io": {"gizmos.acme.io", "gizmoz.acme.io"}, "example.org": {"widgets.example.org"}, "other.io": nil} {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := r.List(context.Background(), &list, client.MatchingFields{CRDGroup: group}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range list.Items {
			got = append(got, c.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("group %s: %q, want %q", group, got, want)
		}
	}
}

// A failed list of either kind is an error naming the kind, never a
// shorter list: callers decide what to unbind or delete from it.
func TestListBindingsNeverReturnsAPartialList(t *testing.T) {
	boom := errors.New("boom")
	r := newReader(t, &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*kbindv1alpha1.BindingList); ok {
			return boom
		}
		return c.List(ctx, list, opts...)
	}})
	got, err := ListBindings(context.Background(), r, AllBindings, client.MatchingFields{BindingAPI: "widgets"})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "listing bindings") || got != nil {
		t.Fatalf("got %v, %v; want no list and the error wrapped with the kind", names(got), err)
	}
	if got, err := ListBindings(context.Background(), r, ClusterBindings, client.MatchingFields{BindingAPI: "widgets"}); err != nil || len(got) != 2 {
		t.Fatalf("ClusterBindings alone: %v, %v", names(got), err)
	}
}
