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

package upgrade

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var konnectorBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector"})
}

const (
	repo       = "../.."
	namespaces = 10
	// perNamespace objects of each API in each namespace: 1000 in all.
	perNamespace = 50
	tenant       = "tenant-a"
)

var (
	widgets = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}
	gadgets = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "gadgets"}
	secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	events  = schema.GroupVersionResource{Version: "v1", Resource: "events"}
)

// TestUpgradeFromPreviousRelease: see the package documentation.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	ctx := context.Background()
	rev := previousRelease(t)
	dir := t.TempDir()
	oldBin := filepath.Join(dir, "konnector-previous")
	start := time.Now()
	tree, err := harness.BuildAt(ctx, repo, rev, "./konnector/cmd/konnector", oldBin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tree) })
	t.Logf("the previous release: %s, built in %s", rev[:12], time.Since(start).Round(time.Second))

	pair := testenv.StartPairT(t, testenv.PairOptions{
		ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
			enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
			enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, true),
		},
		KbindCRDs: readCRDs(t, filepath.Join(tree, "api", "crds")),
	})
	consumer, provider := dynamicFor(t, pair.Consumer.Config), dynamicFor(t, pair.Provider.Config)
	kubectl(t, pair, "consumer", "create", "namespace", "kbind")
	kubectl(t, pair, "provider", "create", "namespace", tenant)

	// The previous release syncs everything.
	old := startKonnector(t, oldBin, pair, "previous")
	apply(t, pair, enginetest.ConnectionManifestWith("provider", "provider", pair.Provider.Kubeconfig,
		"  isolation: {mode: Namespace, namespace: "+tenant+"}\n")+`
---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: upgrade}
spec:
  connectionRef: {name: provider}
  apis: [{name: widgets.example.org}, {name: gadgets.example.org}]
  relatedResources:
  - resource: secrets
    direction: FromConsumer
    selector: {labelSelector: {matchLabels: {app: upgrade}}}
`)
	waitReady(t, pair, 2*time.Minute)
	populate(t, consumer)
	waitSynced(t, consumer, provider)
	setProviderStatus(t, provider)
	waitStatusDown(t, consumer)
	emitProviderEvents(t, consumer, provider)
	before := providerUIDs(t, provider)

	// The upgrade, a downgrade (as helm rollback applies the previous
	// chart: its CRDs and binary) and the upgrade again: each time the
	// running konnector stops, the CRDs are applied as helm applies the
	// chart's, the other konnector starts.
	running := old
	for i, step := range []struct {
		name, bin, crds string
	}{
		{"upgrade", konnectorBin, filepath.Join(repo, "api", "crds")},
		{"downgrade", oldBin, filepath.Join(tree, "api", "crds")},
		{"upgrade again", konnectorBin, filepath.Join(repo, "api", "crds")},
	} {
		running.Stop(ctx)
		rec, stop := record(t, consumer, provider)
		applied := time.Now()
		kubectl(t, pair, "consumer", "apply", "--server-side", "--force-conflicts", "-f", step.crds)
		running = startKonnector(t, step.bin, pair, fmt.Sprintf("%d-%s", i+1, strings.ReplaceAll(step.name, " ", "-")))
		ready := waitReady(t, pair, time.Minute)
		enginetest.EventuallyWithin(t, 3*time.Minute, "no write for 20 s after the "+step.name, func() error {
			if !rec.quietFor(ready, 20*time.Second) {
				return fmt.Errorf("writes still recorded")
			}
			return nil
		})
		writes, _ := rec.result()
		bad := unexpected(writes, exceptions(t))
		t.Logf("%s: the Connection and the ClusterBinding Ready %s after the CRDs were applied; %d objects written (%d of them excepted by exceptions.yaml)",
			step.name, ready.Sub(applied).Round(100*time.Millisecond), len(writes), len(writes)-len(bad))
		if len(bad) > 0 {
			t.Errorf("the %s wrote %d objects beyond exceptions.yaml, e.g.:\n%s", step.name, len(bad), sample(bad, 20))
		}

		// Everything is still synced, nothing was re-created on the
		// provider, and a change still goes up (the recorder, still
		// watching, must see it on both sides: it is not blind).
		after := providerUIDs(t, provider)
		if len(after) != len(before) {
			t.Errorf("%s: the provider held %d copies before and %d after", step.name, len(before), len(after))
		}
		for k, uid := range before {
			if after[k] != uid {
				t.Errorf("%s: provider copy %s: UID %s before, %q after (re-created or gone)", step.name, k, uid, after[k])
			}
		}
		waitSynced(t, consumer, provider)
		waitStatusDown(t, consumer)
		changeOne(t, consumer, provider, int64(1001+i))
		enginetest.EventuallyWithin(t, 30*time.Second, "the change seen by the recorder on both sides", func() error {
			writes, errs := rec.result()
			if len(errs) > 0 {
				return fmt.Errorf("%v", errs)
			}
			seen := map[string]bool{}
			for _, w := range writes {
				if w.resource == "widgets" && (strings.HasSuffix(w.object, "team-0/"+objectName(1)) || strings.HasSuffix(w.object, "team-0."+objectName(1))) {
					seen[w.cluster] = true
				}
			}
			if !seen["consumer"] || !seen["provider"] {
				return fmt.Errorf("the change was recorded on %v", seen)
			}
			return nil
		})
		stop()
	}
	deleteAll(t, consumer, provider)
}

// record watches the bound objects and related Secrets on both sides;
// stop ends the watches.
func record(t *testing.T, consumer, provider dynamic.Interface) (*recorder, func()) {
	t.Helper()
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, w := range []struct {
		cluster string
		c       dynamic.Interface
		gvr     schema.GroupVersionResource
		ns      string
	}{
		{"consumer", consumer, widgets, ""}, {"consumer", consumer, gadgets, ""}, {"consumer", consumer, secrets, ""},
		{"provider", provider, widgets, tenant}, {"provider", provider, gadgets, tenant}, {"provider", provider, secrets, tenant},
	} {
		if err := rec.watch(ctx, w.cluster, w.c, w.gvr, w.ns); err != nil {
			t.Fatal(err)
		}
	}
	return rec, cancel
}

func exceptions(t *testing.T) []exception {
	t.Helper()
	e, err := loadExceptions("exceptions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// previousRelease is the commit the upgrade starts from: the api
// compatibility gate's baseline, the previous release until one is tagged.
func previousRelease(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "hack", "api-compat", "baseline"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	t.Fatal("hack/api-compat/baseline names no commit")
	return ""
}

func readCRDs(t *testing.T, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	return out
}

func dynamicFor(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kubectl(t *testing.T, pair *testenv.Pair, cluster string, args ...string) string {
	t.Helper()
	out, err := testenv.Kubectl(context.Background(), pair.KubeconfigPath, append([]string{"--context=" + cluster}, args...)...)
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

func apply(t *testing.T, pair *testenv.Pair, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, pair, "consumer", "apply", "-f", file)
}

func startKonnector(t *testing.T, bin string, pair *testenv.Pair, name string) *harness.Process {
	t.Helper()
	return harness.StartProcessT(t, bin, filepath.Join(pair.Dir, name+"-konnector.log"),
		"--kubeconfig", pair.Consumer.KubeconfigPath, "--namespace", "kbind", "--metrics-bind-address", "0")
}

// waitReady waits for the Connection and the ClusterBinding to be Ready
// and returns when they were seen so.
func waitReady(t *testing.T, pair *testenv.Pair, timeout time.Duration) time.Time {
	t.Helper()
	enginetest.EventuallyWithin(t, timeout, "Connection and ClusterBinding Ready", func() error {
		for _, obj := range []string{"connection/provider", "clusterbinding/upgrade"} {
			out, err := testenv.Kubectl(context.Background(), pair.KubeconfigPath, "--context=consumer", "get", obj,
				"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			if err != nil || strings.TrimSpace(out) != "True" {
				return fmt.Errorf("%s Ready=%q (%v)", obj, out, err)
			}
		}
		return nil
	})
	return time.Now()
}

func objectName(i int) string { return fmt.Sprintf("o-%03d", i) }

// populate creates the namespaces, perNamespace Widgets and Gadgets in
// each, and a related Secret per namespace.
func populate(t *testing.T, consumer dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	for n := range namespaces {
		ns := fmt.Sprintf("team-%d", n)
		if _, err := consumer.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx,
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": "settings", "namespace": ns, "labels": map[string]any{"app": "upgrade"}},
			"stringData": map[string]any{"password": "not-a-secret-" + ns}}}
		if _, err := consumer.Resource(secrets).Namespace(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, api := range []struct {
			gvr  schema.GroupVersionResource
			kind string
		}{{widgets, "Widget"}, {gadgets, "Gadget"}} {
			for i := range perNamespace {
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.org/v1alpha1", "kind": api.kind,
					"metadata": map[string]any{"name": objectName(i), "namespace": ns},
					"spec":     map[string]any{"size": int64(i), "secretRef": "settings"}}}
				if _, err := consumer.Resource(api.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// providerObjects lists the provider copies of gvr in the tenant
// namespace, by their consumer namespace/name.
func providerObjects(t *testing.T, provider dynamic.Interface, gvr schema.GroupVersionResource) map[string]unstructured.Unstructured {
	t.Helper()
	list, err := provider.Resource(gvr).Namespace(tenant).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]unstructured.Unstructured{}
	for _, u := range list.Items {
		a := u.GetAnnotations()
		if a[kbindv1alpha1.ConsumerNamespaceAnnotation] != "" {
			out[a[kbindv1alpha1.ConsumerNamespaceAnnotation]+"/"+a[kbindv1alpha1.ConsumerNameAnnotation]] = u
		}
	}
	return out
}

// waitSynced waits until every consumer Widget and Gadget has a provider
// copy with its spec, and every related Secret a copy.
func waitSynced(t *testing.T, consumer, provider dynamic.Interface) {
	t.Helper()
	enginetest.EventuallyWithin(t, 5*time.Minute, "every object and related Secret on the provider", func() error {
		for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
			list, err := consumer.Resource(gvr).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			copies := providerObjects(t, provider, gvr)
			if len(list.Items) != namespaces*perNamespace {
				return fmt.Errorf("%d consumer %s, want %d", len(list.Items), gvr.Resource, namespaces*perNamespace)
			}
			for _, u := range list.Items {
				c, ok := copies[key(&u)]
				if !ok {
					return fmt.Errorf("%s %s has no provider copy (%d of %d copied)", gvr.Resource, key(&u), len(copies), len(list.Items))
				}
				if fmt.Sprint(c.Object["spec"]) != fmt.Sprint(u.Object["spec"]) {
					return fmt.Errorf("%s %s: provider spec %v, consumer %v", gvr.Resource, key(&u), c.Object["spec"], u.Object["spec"])
				}
			}
		}
		list, err := provider.Resource(secrets).Namespace(tenant).List(context.Background(), metav1.ListOptions{LabelSelector: kbindv1alpha1.ConsumerNameLabel + "=settings"})
		if err != nil {
			return err
		}
		if len(list.Items) != namespaces {
			return fmt.Errorf("%d related Secrets on the provider, want %d", len(list.Items), namespaces)
		}
		return nil
	})
}

// setProviderStatus writes a status on every provider copy, as the
// provider's controller would.
func setProviderStatus(t *testing.T, provider dynamic.Interface) {
	t.Helper()
	for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
		for _, u := range providerObjects(t, provider, gvr) {
			patch := fmt.Appendf(nil, `{"status":{"phase":"Ready","size":%v}}`, u.Object["spec"].(map[string]any)["size"])
			if _, err := provider.Resource(gvr).Namespace(tenant).Patch(context.Background(), u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func waitStatusDown(t *testing.T, consumer dynamic.Interface) {
	t.Helper()
	enginetest.EventuallyWithin(t, 5*time.Minute, "every provider status on the consumer", func() error {
		for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
			list, err := consumer.Resource(gvr).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, u := range list.Items {
				if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Ready" {
					return fmt.Errorf("%s %s: status %v", gvr.Resource, key(&u), u.Object["status"])
				}
			}
		}
		return nil
	})
}

// emitProviderEvents records an Event on the provider copy of the first
// Widget of each namespace and waits for them on the consumer.
func emitProviderEvents(t *testing.T, consumer, provider dynamic.Interface) {
	t.Helper()
	copies := providerObjects(t, provider, widgets)
	for n := range namespaces {
		c := copies[fmt.Sprintf("team-%d/%s", n, objectName(0))]
		ev := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Event",
			"metadata":       map[string]any{"name": c.GetName() + ".upgrade", "namespace": tenant},
			"involvedObject": map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "Widget", "namespace": tenant, "name": c.GetName(), "uid": string(c.GetUID())},
			"reason":         "Provisioned", "message": "the provider provisioned it", "type": "Normal",
			"source":         map[string]any{"component": "widget-controller"},
			"firstTimestamp": time.Now().UTC().Format(time.RFC3339), "lastTimestamp": time.Now().UTC().Format(time.RFC3339), "count": int64(1)}}
		if _, err := provider.Resource(events).Namespace(tenant).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.EventuallyWithin(t, 2*time.Minute, "the provider's Events on the consumer", func() error {
		for n := range namespaces {
			list, err := consumer.Resource(events).Namespace(fmt.Sprintf("team-%d", n)).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Provisioned"})
			if err != nil {
				return err
			}
			if len(list.Items) == 0 {
				return fmt.Errorf("no Provisioned Event in team-%d", n)
			}
		}
		return nil
	})
}

func providerUIDs(t *testing.T, provider dynamic.Interface) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
		for k, u := range providerObjects(t, provider, gvr) {
			out[gvr.Resource+" "+k] = u.GetUID()
		}
	}
	return out
}

// changeOne sets one Widget's spec.size and waits for it on the
// provider.
func changeOne(t *testing.T, consumer, provider dynamic.Interface, size int64) {
	t.Helper()
	if _, err := consumer.Resource(widgets).Namespace("team-0").Patch(context.Background(), objectName(1), types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"size":%d}}`, size), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyWithin(t, time.Minute, "the changed spec on the provider", func() error {
		c := providerObjects(t, provider, widgets)["team-0/"+objectName(1)]
		if got, _, _ := unstructured.NestedInt64(c.Object, "spec", "size"); got != size {
			return fmt.Errorf("provider spec %v", c.Object["spec"])
		}
		return nil
	})
}

// deleteAll deletes every Widget and Gadget on the consumer and waits for
// them and their provider copies to be gone: objects the previous release
// put its finalizer on are released by this one.
func deleteAll(t *testing.T, consumer, provider dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	for n := range namespaces {
		for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
			if err := consumer.Resource(gvr).Namespace(fmt.Sprintf("team-%d", n)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enginetest.EventuallyWithin(t, 5*time.Minute, "every object deleted on both sides", func() error {
		for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
			list, err := consumer.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d %s left on the consumer, e.g. %s with finalizers %v", len(list.Items), gvr.Resource, key(&list.Items[0]), list.Items[0].GetFinalizers())
			}
			if copies := providerObjects(t, provider, gvr); len(copies) > 0 {
				return fmt.Errorf("%d provider copies of %s left", len(copies), gvr.Resource)
			}
		}
		return nil
	})
}

func sample(ws []write, n int) string {
	lines := make([]string, 0, n)
	for _, w := range ws {
		lines = append(lines, "  "+w.String())
	}
	sort.Strings(lines)
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("  … and %d more", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}
