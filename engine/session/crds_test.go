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
	"github.com/kbind/kbind/engine/test/testenv"
)

// TestExportedCRDsFromAWatch: once the watch has synced, an exported CRD
// is read with no request, following label changes; a CRD that is not
// exported, and every list, is read directly; an identity that may not
// watch CRDs gets the direct reads and their errors, as before.
func TestExportedCRDsFromAWatch(t *testing.T) {
	cluster := testenv.StartClusterT(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
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

	n := &atomic.Int32{}
	crds := session.NewExportedCRDs(ctx, cluster.Config, nil, direct(cluster.Config, n))
	enginetest.EventuallyWithin(t, 30*time.Second, "the watch serves the exported CRD", func() error {
		kind, reads, err := get(crds, n, "widgets.example.org")
		if err != nil || kind != "Widget" || reads != 0 {
			return fmt.Errorf("kind %q, %d direct reads, %v", kind, reads, err)
		}
		return nil
	})
	if kind, reads, err := get(crds, n, "gadgets.example.org"); err != nil || kind != "Gadget" || reads != 1 {
		t.Errorf("a CRD that is not exported: kind %q, %d direct reads, %v", kind, reads, err)
	}
	before := n.Load()
	list := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := crds.List(ctx, list, client.MatchingLabels{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}); err != nil || len(list.Items) != 1 || n.Load() != before+1 {
		t.Errorf("a list is a direct read: %d items, %d reads, %v", len(list.Items), n.Load()-before, err)
	}

	// Exporting and un-exporting arrive through the watch.
	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	setExported(ctx, t, admin, "gadgets.example.org", true)
	setExported(ctx, t, admin, "widgets.example.org", false)
	enginetest.EventuallyWithin(t, 30*time.Second, "the watch follows the export labels", func() error {
		_, gadgetReads, err1 := get(crds, n, "gadgets.example.org")
		kind, widgetReads, err2 := get(crds, n, "widgets.example.org")
		if err1 != nil || err2 != nil || gadgetReads != 0 || widgetReads != 1 || kind != "Widget" {
			return fmt.Errorf("gadgets: %d direct reads (%v); widgets: %d direct reads (%v)", gadgetReads, err1, widgetReads, err2)
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
	if _, reads, err := get(refused, refusedReads, "gadgets.example.org"); !apierrors.IsForbidden(err) || reads != 1 {
		t.Fatalf("reading without permission: %v after %d direct reads, want Forbidden after 1", err, reads)
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
