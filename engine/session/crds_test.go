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

package session_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/test/enginetest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestExportedCRDsFromAWatch: the watch holds the exported CRDs' metadata
// only; an exported CRD is read directly once, then with no request until
// the watch shows it changed; the List of the exports is read directly
// first, then served as summaries, a few changed CRDs read again one by
// one and many by one List; a CRD that is not exported, and every other
// list, is read directly; exporting and un-exporting follow the watch; an
// identity that may not watch CRDs gets the direct reads and their errors,
// as before.
//
// It runs on the package's shared provider, with CRDs of a group of its
// own that it removes when it ends: it counts every exported CRD of the
// cluster, so it is the only test of the package that exports any.
func TestExportedCRDsFromAWatch(t *testing.T) {
	t.Parallel()
	group := fmt.Sprintf("crds%d.example.org", crdGroups.Add(1))
	name := func(plural string) string { return plural + "." + group }
	defs := []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", group, apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", group, apiextensionsv1.NamespaceScoped, false),
	}
	var others []string
	for i := range 5 {
		plural := fmt.Sprintf("things%d", i)
		defs = append(defs, enginetest.CRD(plural, fmt.Sprintf("thing%d", i), fmt.Sprintf("Thing%d", i), group, apiextensionsv1.ClusterScoped, true))
		others = append(others, name(plural))
	}
	cluster := session.SharedProvider.Get(t)
	installCRDs(t, cluster.Config, defs)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	direct := func(cfg *rest.Config, n *atomic.Int32) client.Client { return countingClient(t, scheme, cfg, n) }
	get := func(r client.Reader, n *atomic.Int32, name string) (string, int32, error) {
		return readCRD(ctx, t, r, n, name)
	}
	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	n := &atomic.Int32{}
	crds := session.NewExportedCRDs(ctx, cluster.Config, nil, direct(cluster.Config, n))
	changes := &atomic.Int32{}
	crds.OnChange(func() { changes.Add(1) })
	enginetest.EventuallyWithin(t, 30*time.Second, "the watch serves the exported CRD", func() error {
		kind, reads, err := get(crds, n, name("widgets"))
		if err != nil || kind != "Widget" || reads != 0 {
			return fmt.Errorf("kind %q, %d direct reads, %v", kind, reads, err)
		}
		return nil
	})
	if kind, reads, err := get(crds, n, name("gadgets")); err != nil || kind != "Gadget" || reads != 1 {
		t.Errorf("a CRD that is not exported: kind %q, %d direct reads, %v", kind, reads, err)
	}
	listExports := func() ([]apiextensionsv1.CustomResourceDefinition, int32) {
		t.Helper()
		before := n.Load()
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := crds.List(ctx, list, client.MatchingLabels{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}); err != nil {
			t.Fatalf("listing the exports: %v", err)
		}
		return list.Items, n.Load() - before
	}
	if items, reads := listExports(); len(items) != 6 || reads != 1 {
		t.Errorf("the first list of the exports: %d items after %d direct reads, want 6 after 1", len(items), reads)
	}
	items, reads := listExports()
	if len(items) != 6 || reads != 0 || items[0].Name != name("things0") {
		t.Fatalf("the list of the exports again: %d items after %d direct reads, want 6, sorted, after none", len(items), reads)
	}
	if v := items[0].Spec.Versions; len(v) != 1 || !v[0].Served || v[0].Name != "v1alpha1" || v[0].Schema != nil || items[0].Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("the list of the exports serves %+v, want its summary: the version served, no schema", items[0].Spec)
	}
	other := &apiextensionsv1.CustomResourceDefinitionList{}
	before := n.Load()
	if err := crds.List(ctx, other); err != nil || len(other.Items) < 7 || n.Load() != before+1 {
		t.Errorf("another list is a direct read: %d items, %d reads, %v", len(other.Items), n.Load()-before, err)
	}

	// One changed export: read again by itself (a Get), whole for a Get.
	seen := changes.Load()
	annotate(ctx, t, admin, name("widgets"))
	enginetest.EventuallyWithin(t, 30*time.Second, "the watch shows the change", func() error {
		if changes.Load() == seen {
			return fmt.Errorf("no change announced")
		}
		return nil
	})
	if _, reads := listExports(); reads != 1 {
		t.Errorf("the list of the exports after one changed: %d direct reads, want 1", reads)
	}
	if _, reads, _ := get(crds, n, name("widgets")); reads != 1 {
		t.Errorf("a Get of the changed CRD: %d direct reads, want 1", reads)
	}
	if kind, reads, err := get(crds, n, name("widgets")); err != nil || kind != "Widget" || reads != 0 {
		t.Errorf("a Get of the changed CRD again: kind %q, %d direct reads, %v", kind, reads, err)
	}
	whole := &apiextensionsv1.CustomResourceDefinition{}
	if err := crds.Get(ctx, client.ObjectKey{Name: name("widgets")}, whole); err != nil || whole.Spec.Versions[0].Schema == nil || whole.Annotations["example.org/touched"] == "" {
		t.Errorf("a Get served without a request is not the whole, current CRD: %+v, %v", whole.ObjectMeta, err)
	}

	// Many changed exports: read again by one List.
	seen = changes.Load()
	for _, name := range others {
		annotate(ctx, t, admin, name)
	}
	enginetest.EventuallyWithin(t, 30*time.Second, "the watch shows the changes", func() error {
		if got := changes.Load() - seen; got < int32(len(others)) {
			return fmt.Errorf("%d of %d changes announced", got, len(others))
		}
		return nil
	})
	if items, reads := listExports(); len(items) != 6 || reads != 1 {
		t.Errorf("the list of the exports after %d changed: %d items after %d direct reads, want 6 after 1", len(others), len(items), reads)
	}
	if _, reads := listExports(); reads != 0 {
		t.Errorf("the list of the exports again: %d direct reads, want none", reads)
	}

	// Exporting and un-exporting arrive through the watch.
	setExported(ctx, t, admin, name("gadgets"), true)
	setExported(ctx, t, admin, name("widgets"), false)
	enginetest.EventuallyWithin(t, 30*time.Second, "the watch follows the export labels", func() error {
		_, gadgetReads, err1 := get(crds, n, name("gadgets"))
		kind, widgetReads, err2 := get(crds, n, name("widgets"))
		if err1 != nil || err2 != nil || gadgetReads != 0 || widgetReads != 1 || kind != "Widget" {
			return fmt.Errorf("gadgets: %d direct reads (%v); widgets: %d direct reads (%v)", gadgetReads, err1, widgetReads, err2)
		}
		return nil
	})
	enginetest.EventuallyWithin(t, 30*time.Second, "the list of the exports follows the export labels", func() error {
		items, _ := listExports()
		var names []string
		for _, i := range items {
			names = append(names, i.Name)
		}
		if len(items) != 6 || items[0].Name != name("gadgets") {
			return fmt.Errorf("exports %v", names)
		}
		return nil
	})

	// An identity that may not list CRDs: the direct read's Forbidden, as
	// before the watch existed.
	user, err := cluster.AddUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	refusedReads := &atomic.Int32{}
	refused := session.NewExportedCRDs(ctx, user.Config, nil, direct(user.Config, refusedReads))
	if _, reads, err := get(refused, refusedReads, name("gadgets")); !apierrors.IsForbidden(err) || reads != 1 {
		t.Fatalf("reading without permission: %v after %d direct reads, want Forbidden after 1", err, reads)
	}
}

var crdGroups atomic.Int32

// installCRDs creates defs on the cluster cfg points at and waits until
// they are served; when the test ends it deletes them and waits until
// they are gone, so that a later test (or run) counts none of them.
func installCRDs(t *testing.T, cfg *rest.Config, defs []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: defs}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := client.New(cfg, client.Options{Scheme: crdScheme(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, d := range defs {
			if err := c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: d.ObjectMeta}); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		enginetest.Eventually(t, "the test's CRDs gone", func() error {
			for _, d := range defs {
				if err := c.Get(ctx, client.ObjectKey{Name: d.Name}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s still there (%v)", d.Name, err)
				}
			}
			return nil
		})
	})
}

func crdScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// annotate changes the CRD name (an annotation), as a provider's edit
// would.
func annotate(ctx context.Context, t *testing.T, admin client.Client, name string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := admin.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	crd.Annotations["example.org/touched"] = time.Now().Format(time.RFC3339Nano)
	if err := admin.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
}

// countingClient is a direct client of cfg that counts its Gets and Lists
// in n.
func countingClient(t *testing.T, scheme *runtime.Scheme, cfg *rest.Config, n *atomic.Int32) client.Client {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n.Add(1)
			return c.List(ctx, list, opts...)
		},
	})
}

// readCRD reads a CRD through r and returns its kind and how many direct
// reads (counted in n) it took; one served from the watch must come
// without its managed fields.
func readCRD(ctx context.Context, t *testing.T, r client.Reader, n *atomic.Int32, name string) (string, int32, error) {
	t.Helper()
	before := n.Load()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Get(ctx, client.ObjectKey{Name: name}, crd)
	if n.Load() == before && len(crd.ManagedFields) != 0 {
		t.Errorf("%s served from the watch with its managed fields", name)
	}
	return crd.Spec.Names.Kind, n.Load() - before, err
}

// setExported labels the CRD exported, or removes the label.
func setExported(ctx context.Context, t *testing.T, admin client.Client, name string, exported bool) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := admin.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	if exported {
		crd.Labels = map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}
	} else {
		delete(crd.Labels, kbindv1alpha1.ExportedLabel)
	}
	if err := admin.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
}
