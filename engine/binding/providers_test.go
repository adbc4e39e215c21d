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

package binding_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// provider is one of the providers of TestSeveralProviders: its cluster,
// a client, and the Connection to it.
type provider struct {
	scenario
	name    string
	cluster *testenv.Cluster
	client  client.Client
	conn    *kbindv1alpha1.Connection
}

// scenario is what one run of a test with providers of its own owns on
// the shared consumer: a suffix for the names of its namespaces,
// Connections and ClusterBindings, and the API group of its providers'
// CRDs (parallel tests, and each run of -count=N, share the consumer).
type scenario struct{ run, group string }

func newScenario() scenario {
	n := seq.Add(1)
	return scenario{run: fmt.Sprintf("-%d", n), group: fmt.Sprintf("t%d.example.org", n)}
}

// ns is this run's name for name (a namespace, Connection, binding).
func (s scenario) ns(name string) string { return name + s.run }

// api is the API plural.<group>.
func (s scenario) api(plural string) string { return plural + "." + s.group }

// version is the apiVersion of the providers' APIs.
func (s scenario) version() string { return s.group + "/v1alpha1" }

// sized is a CRD whose spec.size has type typ and description desc, and
// whose spec.secretName names a Secret.
func sized(group, plural, kind, typ, desc string) *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD(plural, plural[:len(plural)-1], kind, group, ns, true)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: desc,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: typ, Description: desc}, "secretName": {Type: "string"}},
	}
	return crd
}

// One consumer API served by two providers (docs/bindings.md#one-api-several-providers):
// team-a's objects go to east and team-b's to west, through namespaced
// Bindings and through ClusterBindings with disjoint namespace selectors;
// neither provider sees the other's objects; bindings that could claim the
// same objects are refused, the later one naming the earlier; a second
// provider's schema that differs (not only in descriptions) is refused,
// naming the difference.
func TestSeveralProviders(t *testing.T) {
	setup(t)
	s := newScenario()
	east := startProvider(t, "east", s, nil,
		sized(s.group, "databases", "Database", "integer", "the size, in east's words"),
		sized(s.group, "caches", "Cache", "integer", ""),
		sized(s.group, "queues", "Queue", "integer", ""))
	west := startProvider(t, "west", s, &kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "west"},
		sized(s.group, "databases", "Database", "integer", "the size, as west documents it"),
		sized(s.group, "caches", "Cache", "integer", ""),
		sized(s.group, "queues", "Queue", "string", ""))

	t.Run("namespaced Bindings route each namespace to its provider", func(t *testing.T) { testRoutedByBindings(t, east, west) })
	t.Run("ClusterBindings with disjoint namespace selectors, overlaps refused", func(t *testing.T) { testRoutedByClusterBindings(t, east, west) })
	t.Run("an incompatible second provider schema is refused, naming the difference", func(t *testing.T) { testIncompatibleSchema(t, east, west) })
	t.Run("an object moved between providers: the old copy kept by default, deleted when asked", func(t *testing.T) { testMoved(t, east, west) })
	t.Run("related copies by reference go to the object's provider only", func(t *testing.T) { testRelatedRouted(t, east, west) })
	t.Run("a projected API routed to two providers", func(t *testing.T) { testProjectedRouted(t, east, west) })
}

// Two ClusterBindings project the providers' databases onto one consumer
// API, acmedbs.acme.io, each for the namespaces of its region.
func testProjectedRouted(t *testing.T, east, west *provider) {
	ctx := context.Background()
	for ns, region := range map[string]string{east.ns("mp-proj-east"): "east", east.ns("mp-proj-west"): "west"} {
		if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"proj": region}}}); err != nil {
			t.Fatal(err)
		}
	}
	var cbs []client.Object
	for _, p := range []*provider{east, west} {
		cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: p.ns("proj-" + p.name)}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef:     kbindv1alpha1.ConnectionReference{Name: p.conn.Name},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"proj": p.name}},
			APIs: []kbindv1alpha1.APIReference{{Name: east.api("databases"),
				Projection: &kbindv1alpha1.Projection{Group: p.ns("acme") + ".io", Kind: "AcmeDB"}}},
		}}
		if err := env.Consumer.Create(ctx, cb); err != nil {
			t.Fatal(err)
		}
		enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		cbs = append(cbs, cb)
	}
	e := namespacedObject(east.ns("acme")+".io/v1alpha1", "AcmeDB", east.ns("mp-proj-east"), "db")
	w := namespacedObject(east.ns("acme")+".io/v1alpha1", "AcmeDB", east.ns("mp-proj-west"), "db")
	create(t, e)
	create(t, w)
	east.waitCopies(t, "Database", east.ns("mp-proj-east")+"/db")
	west.waitCopies(t, "Database", east.ns("mp-proj-west")+"/db")
	for _, cb := range cbs {
		if err := env.Consumer.Delete(ctx, cb); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, cb)
	}
	east.waitCopies(t, "Database")
	west.waitCopies(t, "Database")
}

// Two ClusterBindings route caches by namespace, each copying the Secret
// a Cache names up to its provider: each provider gets the Secrets of
// its own objects only — never what another route's objects name.
func testRelatedRouted(t *testing.T, east, west *provider) {
	ctx := context.Background()
	for ns, site := range map[string]string{east.ns("mp-rel-east"): "east", east.ns("mp-rel-west"): "west"} {
		if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"site": site}}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Consumer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conn-" + site},
			StringData: map[string]string{"password": site}}); err != nil {
			t.Fatal(err)
		}
	}
	var cbs []client.Object
	for _, p := range []*provider{east, west} {
		cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: p.ns("rel-" + p.name)}, Spec: spec(p.conn.Name, p.api("caches"))}
		cb.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"site": p.name}}
		cb.Spec.RelatedResources = []kbindv1alpha1.RelatedResource{{Resource: "secrets", Direction: kbindv1alpha1.FromConsumer,
			Reference: &kbindv1alpha1.RelatedResourceReference{API: east.api("caches"), FieldPath: ".spec.secretName"}}}
		if err := env.Consumer.Create(ctx, cb); err != nil {
			t.Fatal(err)
		}
		enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		cbs = append(cbs, cb)
	}
	for ns, site := range map[string]string{east.ns("mp-rel-east"): "east", east.ns("mp-rel-west"): "west"} {
		c := namespacedObject(east.version(), "Cache", ns, "c")
		if err := unstructured.SetNestedField(c.Object, "conn-"+site, "spec", "secretName"); err != nil {
			t.Fatal(err)
		}
		create(t, c)
	}
	east.waitCopies(t, "Cache", east.ns("mp-rel-east")+"/c")
	west.waitCopies(t, "Cache", east.ns("mp-rel-west")+"/c")
	secrets := func(p *provider) []string {
		list := &corev1.SecretList{}
		if err := p.client.List(ctx, list, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Namespace+"/"+s.Name)
		}
		sort.Strings(out)
		return out
	}
	for p, want := range map[*provider][]string{east: {east.ns("mp-rel-east") + "/conn-east"}, west: {"west-" + east.ns("mp-rel-west") + "/conn-west"}} {
		enginetest.Eventually(t, p.name+" holds the Secrets of its own objects", func() error {
			if got := secrets(p); !slices.Equal(got, want) {
				return fmt.Errorf("%s holds related Secrets %v, want %v", p.name, got, want)
			}
			return nil
		})
	}
	for _, cb := range cbs {
		if err := env.Consumer.Delete(ctx, cb); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, cb)
	}
}

// startProvider takes a provider cluster of the test's own serving crds
// and connects to it through the Connection mp-<name><run>.
func startProvider(t *testing.T, name string, s scenario, iso *kbindv1alpha1.Isolation, crds ...*apiextensionsv1.CustomResourceDefinition) *provider {
	t.Helper()
	cluster, c := ownProvider(t, crds...)
	conn := connectAs(t, s.ns("mp-"+name), cluster.Kubeconfig, admitAll, func(c *kbindv1alpha1.Connection) {
		if iso != nil {
			c.Spec.Isolation = *iso
		}
	})
	return &provider{scenario: s, name: name, cluster: cluster, client: c, conn: conn}
}

// copies lists the consumer objects ("namespace/name") a provider holds
// kbind's copies of, by their origin markers.
func (p *provider) copies(t *testing.T, kind string) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(p.version())
	list.SetKind(kind + "List")
	if err := p.client.List(context.Background(), list, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		t.Fatalf("listing %s on %s: %v", kind, p.name, err)
	}
	var out []string
	for _, o := range list.Items {
		origin := o.GetAnnotations()[kbindv1alpha1.ConsumerNamespaceAnnotation] + "/" + o.GetAnnotations()[kbindv1alpha1.ConsumerNameAnnotation]
		if origin == "/" {
			origin = o.GetNamespace() + "/" + o.GetName()
		}
		out = append(out, origin)
	}
	sort.Strings(out)
	return out
}

// waitCopies waits until the provider holds copies of exactly want.
func (p *provider) waitCopies(t *testing.T, kind string, want ...string) {
	t.Helper()
	sort.Strings(want)
	enginetest.Eventually(t, fmt.Sprintf("%s holds copies of %v", p.name, want), func() error {
		if got := p.copies(t, kind); !slices.Equal(got, want) {
			return fmt.Errorf("%s holds copies of %v", p.name, got)
		}
		return nil
	})
}

// setProviderStatus writes status.phase on the provider copy of obj.
func (p *provider) setProviderStatus(t *testing.T, obj *unstructured.Unstructured, phase string) {
	t.Helper()
	pkey, err := isolation.For(p.conn.Spec.IsolationOf()).Object(client.ObjectKeyFromObject(obj))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "status on the provider copy of "+obj.GetName(), func() error {
		got := &unstructured.Unstructured{}
		got.SetAPIVersion(obj.GetAPIVersion())
		got.SetKind(obj.GetKind())
		if err := p.client.Get(context.Background(), pkey, got); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(got.Object, phase, "status", "phase"); err != nil {
			return err
		}
		return p.client.Status().Update(context.Background(), got)
	})
}

// statusComesBack writes a status on the provider's copy of obj, naming
// the provider, and waits for it on the consumer object, whose route
// annotation must name the provider's Connection.
func (p *provider) statusComesBack(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	p.setProviderStatus(t, obj, "from-"+p.name)
	waitRouted(t, obj, p.conn.Name, "from-"+p.name)
}

// waitRouted waits until the consumer object carries status.phase phase
// and the route annotation naming conn.
func waitRouted(t *testing.T, obj *unstructured.Unstructured, conn, phase string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s/%s routed to %s with status %s", obj.GetNamespace(), obj.GetName(), conn, phase), func() error {
		got, err := at(env.Consumer, obj.GetAPIVersion(), obj)
		if err != nil {
			return err
		}
		if route := got.GetAnnotations()[kbindv1alpha1.ConnectionAnnotation]; route != conn {
			return fmt.Errorf("route annotation %q", route)
		}
		if got, _, _ := unstructured.NestedString(got.Object, "status", "phase"); got != phase {
			return fmt.Errorf("status.phase %q", got)
		}
		return nil
	})
}

func testRoutedByBindings(t *testing.T, east, west *provider) {
	ctx := context.Background()
	a := namespacedBinding(t, east.ns("mp-team-a"), "dbs", east.conn.Name, east.api("databases"))
	b := namespacedBinding(t, east.ns("mp-team-b"), "dbs", west.conn.Name, east.api("databases"))
	for _, binding := range []*kbindv1alpha1.Binding{a, b} {
		// west's schema differs from east's in its descriptions only.
		enginetest.WaitCondition(t, env.Consumer, binding, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		enginetest.WaitCondition(t, env.Consumer, binding, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	one := namespacedObject(east.version(), "Database", east.ns("mp-team-a"), "one")
	two := namespacedObject(east.version(), "Database", east.ns("mp-team-b"), "two")
	create(t, one)
	create(t, two)
	east.waitCopies(t, "Database", east.ns("mp-team-a")+"/one")
	west.waitCopies(t, "Database", east.ns("mp-team-b")+"/two")
	east.statusComesBack(t, one)
	west.statusComesBack(t, two)

	// Provider Events come down from each object's own provider. An Event
	// east records at the place team-b's object would have on east (it
	// has no copy there) reaches no one: east's forwarder decides it
	// before the later Event on team-a's copy, which it forwards.
	east.recordEvent(t, two, "FromEastAboutTwo", false)
	west.recordEvent(t, two, "FromWest", true)
	east.recordEvent(t, one, "FromEast", true)
	waitProviderEvent(t, one, "FromEast", east.conn.Name)
	waitProviderEvent(t, two, "FromWest", west.conn.Name)
	var twoEvents corev1.EventList
	if err := env.Consumer.List(ctx, &twoEvents, client.InNamespace(two.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	for _, e := range twoEvents.Items {
		if e.Reason == "FromEastAboutTwo" {
			t.Errorf("east's Event about a place where it holds no copy was forwarded to %s/%s: %+v", two.GetNamespace(), two.GetName(), e)
		}
	}

	if crd := consumerCRD(t, east.api("databases")); crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != east.conn.Name {
		t.Errorf("the consumer CRD's schema owner is %q, want the first binding's Connection %q", crd.Annotations[kbindv1alpha1.ConnectionAnnotation], east.conn.Name)
	}

	// Deleting team-a's Binding drains team-a's object through east only:
	// west's copy of team-b's object and its finalizer stay.
	if err := env.Consumer.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, a)
	east.waitCopies(t, "Database")
	west.waitCopies(t, "Database", east.ns("mp-team-b")+"/two")
	if got := consumerObject(t, two); !controllerutil.ContainsFinalizer(got, kbindv1alpha1.SyncerFinalizer) {
		t.Errorf("team-b's object lost its finalizer when team-a's Binding went: %v", got.GetFinalizers())
	}
	if got := consumerObject(t, one); controllerutil.ContainsFinalizer(got, kbindv1alpha1.SyncerFinalizer) {
		t.Errorf("team-a's object keeps the finalizer of a drained route: %v", got.GetFinalizers())
	}
	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitGoneBinding(t, b)
	west.waitCopies(t, "Database")
}

func testRoutedByClusterBindings(t *testing.T, east, west *provider) {
	ctx := context.Background()
	for ns, region := range map[string]string{east.ns("mp-east-1"): "east", east.ns("mp-west-1"): "west", east.ns("mp-nowhere"): ""} {
		labels := map[string]string{}
		if region != "" {
			labels["region"] = region
		}
		if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	toEast := regionBinding(t, east.api("caches"), east.ns("caches-east"), east.conn.Name, "east")
	toWest := regionBinding(t, east.api("caches"), east.ns("caches-west"), west.conn.Name, "west")
	for _, cb := range []*kbindv1alpha1.ClusterBinding{toEast, toWest} {
		enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	e := namespacedObject(east.version(), "Cache", east.ns("mp-east-1"), "c")
	w := namespacedObject(east.version(), "Cache", east.ns("mp-west-1"), "c")
	nowhere := namespacedObject(east.version(), "Cache", east.ns("mp-nowhere"), "c")
	for _, obj := range []*unstructured.Unstructured{e, w, nowhere} {
		create(t, obj)
	}
	east.waitCopies(t, "Cache", east.ns("mp-east-1")+"/c")
	west.waitCopies(t, "Cache", east.ns("mp-west-1")+"/c")
	east.statusComesBack(t, e)
	west.statusComesBack(t, w)

	// A ClusterBinding without a selector through west could claim east's
	// objects: refused, naming the earlier one; the earlier ones go on.
	greedy := clusterBinding(t, "caches-everywhere", west.conn.Name, east.api("caches"))
	enginetest.WaitCondition(t, env.Consumer, greedy, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonOverlappingBinding,
		east.api("caches")+" (ClusterBinding "+toEast.Name+" (Connection "+east.conn.Name+"))")
	for _, cb := range []*kbindv1alpha1.ClusterBinding{toEast, toWest} {
		enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	// A namespace no ClusterBinding selects is open to a Binding, through
	// either Connection; one a ClusterBinding selects is not (BIND-2).
	open := namespacedBinding(t, east.ns("mp-nowhere"), "caches", east.conn.Name, east.api("caches"))
	covered := namespacedBinding(t, east.ns("mp-west-1"), "caches", east.conn.Name, east.api("caches"))
	enginetest.WaitCondition(t, env.Consumer, open, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.WaitCondition(t, env.Consumer, covered, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"already covered by a ClusterBinding, which takes precedence: "+east.api("caches")+" (ClusterBinding "+toWest.Name+")")
	east.waitCopies(t, "Cache", east.ns("mp-east-1")+"/c", east.ns("mp-nowhere")+"/c")
	west.waitCopies(t, "Cache", east.ns("mp-west-1")+"/c")
	if got := greedyCopies(t, west); got != 1 {
		t.Errorf("west holds %d copies, want 1: the refused ClusterBinding routed objects", got)
	}
	// Instance counts are per binding: each counts the objects it routes.
	for _, b := range []client.Object{toEast, toWest, open} {
		waitInstances(t, b, kbindv1alpha1.InstanceCounts{Total: 1, Synced: 1})
	}

	for _, obj := range []client.Object{greedy, open, covered, toEast, toWest} {
		if err := env.Consumer.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, obj)
	}
	east.waitCopies(t, "Cache")
	west.waitCopies(t, "Cache")
}

func greedyCopies(t *testing.T, p *provider) int { return len(p.copies(t, "Cache")) }

// waitInstances waits until the binding b (a ClusterBinding or a Binding)
// reports want as the instance counts of its one API.
func waitInstances(t *testing.T, b client.Object, want kbindv1alpha1.InstanceCounts) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("%s counts %+v", b.GetName(), want), func() error {
		var status kbindv1alpha1.BindingStatus
		switch b.(type) {
		case *kbindv1alpha1.ClusterBinding:
			got := &kbindv1alpha1.ClusterBinding{}
			if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
				return err
			}
			status = got.Status
		default:
			got := &kbindv1alpha1.Binding{}
			if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
				return err
			}
			status = got.Status
		}
		if len(status.BoundAPIs) != 1 || status.BoundAPIs[0].Instances == nil {
			return fmt.Errorf("bound APIs %+v", status.BoundAPIs)
		}
		if got := *status.BoundAPIs[0].Instances; got != want {
			return fmt.Errorf("instances %+v", got)
		}
		return nil
	})
}

// regionBinding binds caches.example.org through connection in the
// namespaces labelled region=region.
func regionBinding(t *testing.T, api, name, connection, region string) *kbindv1alpha1.ClusterBinding {
	t.Helper()
	return labelBinding(t, api, name, connection, "region", region)
}

// labelBinding binds caches.example.org through connection in the
// namespaces labelled key=value.
func labelBinding(t *testing.T, api, name, connection, key, value string) *kbindv1alpha1.ClusterBinding {
	t.Helper()
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec(connection, api)}
	cb.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	if err := env.Consumer.Create(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
	return cb
}

func testIncompatibleSchema(t *testing.T, east, west *provider) {
	ctx := context.Background()
	first := namespacedBinding(t, east.ns("mp-q-east"), "queues", east.conn.Name, east.api("queues"))
	enginetest.WaitCondition(t, env.Consumer, first, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	second := namespacedBinding(t, east.ns("mp-q-west"), "queues", west.conn.Name, east.api("queues"))
	enginetest.WaitCondition(t, env.Consumer, second, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSchemaIncompatible,
		east.api("queues")+": version v1alpha1: .properties.spec.properties.size.type: integer here", `string on the provider of Connection "`+west.conn.Name+`"`)
	q := namespacedObject(east.version(), "Queue", east.ns("mp-q-west"), "q")
	create(t, q)
	enginetest.Eventually(t, "the refused route's object is left alone", func() error {
		got := consumerObject(t, q)
		if len(got.GetFinalizers()) > 0 {
			return fmt.Errorf("finalizers %v on an object no route syncs", got.GetFinalizers())
		}
		return nil
	})
	if got := west.copies(t, "Queue"); len(got) != 0 {
		t.Errorf("west holds copies %v through a refused schema", got)
	}
	if crd := consumerCRD(t, east.api("queues")); crd.Annotations[kbindv1alpha1.ConnectionAnnotation] != east.conn.Name {
		t.Errorf("the refused Connection's schema took the CRD: %v", crd.Annotations)
	}
	for _, obj := range []client.Object{second, first} {
		if err := env.Consumer.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, obj)
	}
	if err := env.Consumer.Delete(ctx, q); client.IgnoreNotFound(err) != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// A namespace relabelled across two ClusterBindings' selectors moves its
// objects (docs/bindings.md#moving-between-providers): the new provider
// gets a copy, the old one's is kept with kbind's markers replaced by
// the moved annotation — or deleted, for an object whose deletion policy
// says Delete — and the route annotation follows; the finalizer stays
// the object's, now the new route's.
func testMoved(t *testing.T, east, west *provider) {
	ctx := context.Background()
	if err := env.Consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: east.ns("mp-mover"), Labels: map[string]string{"zone": "east"}}}); err != nil {
		t.Fatal(err)
	}
	toEast := labelBinding(t, east.api("caches"), east.ns("movers-east"), east.conn.Name, "zone", "east")
	toWest := labelBinding(t, east.api("caches"), east.ns("movers-west"), west.conn.Name, "zone", "west")
	for _, cb := range []*kbindv1alpha1.ClusterBinding{toEast, toWest} {
		enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	kept := namespacedObject(east.version(), "Cache", east.ns("mp-mover"), "kept")
	deleted := namespacedObject(east.version(), "Cache", east.ns("mp-mover"), "deleted")
	deleted.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyDelete})
	create(t, kept)
	create(t, deleted)
	east.waitCopies(t, "Cache", east.ns("mp-mover")+"/kept", east.ns("mp-mover")+"/deleted")
	east.statusComesBack(t, kept)

	relabel(t, east.ns("mp-mover"), map[string]string{"zone": "west"})
	west.waitCopies(t, "Cache", east.ns("mp-mover")+"/kept", east.ns("mp-mover")+"/deleted")
	west.statusComesBack(t, kept)
	// east keeps one copy, no longer kbind's: unmarked, annotated.
	enginetest.Eventually(t, "east's copies released", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(east.version())
		list.SetKind("CacheList")
		if err := east.client.List(ctx, list, client.InNamespace(east.ns("mp-mover"))); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].GetName() != "kept" {
			return fmt.Errorf("east holds %d copies, want the kept one only", len(list.Items))
		}
		got := list.Items[0]
		if _, marked := got.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation]; marked {
			return fmt.Errorf("the kept copy still carries kbind's markers: %v", got.GetAnnotations())
		}
		if _, marked := got.GetLabels()[kbindv1alpha1.ManagedLabel]; marked {
			return fmt.Errorf("the kept copy still carries kbind's managed label: %v", got.GetLabels())
		}
		if moved := got.GetAnnotations()[kbindv1alpha1.MovedAnnotation]; !strings.Contains(moved, "to Connection "+west.conn.Name) {
			return fmt.Errorf("moved annotation %q", moved)
		}
		return nil
	})
	for _, obj := range []*unstructured.Unstructured{kept, deleted} {
		got := consumerObject(t, obj)
		if !controllerutil.ContainsFinalizer(got, kbindv1alpha1.SyncerFinalizer) {
			t.Errorf("%s lost its finalizer in the move", obj.GetName())
		}
		waitEvent(t, obj, "Moved", "moved to Connection \""+west.conn.Name+"\"")
	}

	// Deleting the object now deletes the new provider's copy only.
	if err := env.Consumer.Delete(ctx, kept.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	west.waitCopies(t, "Cache", east.ns("mp-mover")+"/deleted")
	for _, obj := range []client.Object{toEast, toWest} {
		if err := env.Consumer.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		waitGoneBinding(t, obj)
	}
	west.waitCopies(t, "Cache")
	keptCopy := &unstructured.Unstructured{}
	keptCopy.SetAPIVersion(east.version())
	keptCopy.SetKind("Cache")
	if err := east.client.Get(ctx, client.ObjectKey{Namespace: east.ns("mp-mover"), Name: "kept"}, keptCopy); err != nil {
		t.Errorf("the kept copy on east is gone after the drains: %v", err)
	} else if err := east.client.Delete(ctx, keptCopy); err != nil { // no longer kbind's: the provider's to delete
		t.Fatal(err)
	}
}

// recordEvent records a Warning Event on the provider about the place
// obj's copy has there, as a provider controller would; naming the copy's
// UID when onCopy (the copy must exist).
func (p *provider) recordEvent(t *testing.T, obj *unstructured.Unstructured, reason string, onCopy bool) {
	t.Helper()
	ctx := context.Background()
	pkey, err := isolation.For(p.conn.Spec.IsolationOf()).Object(client.ObjectKeyFromObject(obj))
	if err != nil {
		t.Fatal(err)
	}
	ref := corev1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: pkey.Namespace, Name: pkey.Name}
	if onCopy {
		got := &unstructured.Unstructured{}
		got.SetAPIVersion(obj.GetAPIVersion())
		got.SetKind(obj.GetKind())
		if err := p.client.Get(ctx, pkey, got); err != nil {
			t.Fatal(err)
		}
		ref.UID = got.GetUID()
	} else if err := p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pkey.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pkey.Namespace, GenerateName: strings.ToLower(reason) + "-"}, InvolvedObject: ref,
		Type: corev1.EventTypeWarning, Reason: reason, Message: reason + " by " + p.name, Source: corev1.EventSource{Component: "db-controller"},
		Count: 1, FirstTimestamp: now, LastTimestamp: now,
	}
	if err := p.client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
}

// waitProviderEvent waits for the consumer Event forwarded from the
// provider Event reason on obj's copy, reported as coming from the
// provider of Connection conn.
func waitProviderEvent(t *testing.T, obj *unstructured.Unstructured, reason, conn string) {
	t.Helper()
	uid := consumerObject(t, obj).GetUID()
	enginetest.Eventually(t, fmt.Sprintf("provider Event %s on %s/%s", reason, obj.GetNamespace(), obj.GetName()), func() error {
		var events corev1.EventList
		if err := env.Consumer.List(context.Background(), &events, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID != uid || e.Reason != reason {
				continue
			}
			if want := "db-controller (provider " + conn + ")"; e.Source.Component != want {
				return fmt.Errorf("forwarded as from %q, want %q", e.Source.Component, want)
			}
			return nil
		}
		return fmt.Errorf("not among %d Events", len(events.Items))
	})
}

// waitEvent waits for an Event with reason on obj whose message contains
// fragment.
func waitEvent(t *testing.T, obj *unstructured.Unstructured, reason, fragment string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("Event %s on %s", reason, obj.GetName()), func() error {
		events := &eventsv1.EventList{}
		if err := env.Consumer.List(context.Background(), events, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == obj.GetName() && e.Reason == reason && strings.Contains(e.Note, fragment) {
				return nil
			}
		}
		return fmt.Errorf("no such Event among %d", len(events.Items))
	})
}
