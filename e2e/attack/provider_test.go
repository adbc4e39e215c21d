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

package attack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// The tenants every attacker goes after, as their konnectors would have
// left them on the provider (written with their own credentials).
const (
	victimNS     = "kbind-victim" // the Namespace-isolated tenant "victim"
	victimPrefix = "team-a"       // the Prefixed tenant "team-a"
	neighbourNS  = "kbind-neighbour"
)

// attack is one attempt of the catalogue; do makes it as the attacker.
type attack struct {
	group, name string
	do          func(ctx context.Context, a *tenant) error
}

// catalogue is every attempt each hostile tenant makes: on the objects of
// a Namespace-isolated, a Prefixed and a None tenant, and on the
// provider's own.
func catalogue(admin dynamic.Interface) []attack {
	get := func(gvr schema.GroupVersionResource, ns, name string) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			_, err := resource(a.dyn, gvr, ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	list := func(gvr schema.GroupVersionResource, ns string) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			_, err := resource(a.dyn, gvr, ns).List(ctx, metav1.ListOptions{})
			return err
		}
	}
	watch := func(gvr schema.GroupVersionResource, ns string) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			w, err := resource(a.dyn, gvr, ns).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}
	}
	// createAs writes obj, labelled as the attacker's own where that is its
	// best chance (a Prefixed attacker's prefix label).
	createAs := func(gvr schema.GroupVersionResource, obj func(a *tenant) *unstructured.Unstructured, opts ...func(*metav1.CreateOptions)) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			o := obj(a)
			co := metav1.CreateOptions{}
			for _, f := range opts {
				f(&co)
			}
			_, err := resource(a.dyn, gvr, o.GetNamespace()).Create(ctx, o, co)
			return err
		}
	}
	// update reads the object as the administrator (the attacker may not
	// read it) and writes it back changed as the attacker.
	update := func(gvr schema.GroupVersionResource, ns, name string, change func(a *tenant, u *unstructured.Unstructured)) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			u, err := resource(admin, gvr, ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("the administrator reads %s %s/%s: %w", gvr.Resource, ns, name, err)
			}
			change(a, u)
			_, err = resource(a.dyn, gvr, ns).Update(ctx, u, metav1.UpdateOptions{})
			return err
		}
	}
	patch := func(gvr schema.GroupVersionResource, ns, name, body string, subresources ...string) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			_, err := resource(a.dyn, gvr, ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresources...)
			return err
		}
	}
	del := func(gvr schema.GroupVersionResource, ns, name string) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			return resource(a.dyn, gvr, ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}
	}
	delAll := func(gvr schema.GroupVersionResource, ns string) func(context.Context, *tenant) error {
		return func(ctx context.Context, a *tenant) error {
			return resource(a.dyn, gvr, ns).DeleteCollection(ctx, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}, metav1.ListOptions{})
		}
	}
	takeOver := func(a *tenant, u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "attacker-"+a.name, "spec", "holderIdentity")
	}
	ownLabels := func(a *tenant) map[string]string {
		if a.prefix != "" {
			return map[string]string{kbindv1alpha1.PrefixLabel: a.prefix}
		}
		return nil
	}
	relabel := func(a *tenant, u *unstructured.Unstructured) {
		labels := u.GetLabels()
		for k, v := range ownLabels(a) {
			labels[k] = v
		}
		u.SetLabels(labels)
		_ = unstructured.SetNestedField(u.Object, "attacker", "spec", "owner")
	}
	dryRun := func(o *metav1.CreateOptions) { o.DryRun = []string{metav1.DryRunAll} }
	ns := "a Namespace-isolated tenant's"
	pf := "a Prefixed tenant's"
	return []attack{
		{ns, "get an object", get(widgets, victimNS, "default.w1")},
		{ns, "list its objects", list(widgets, victimNS)},
		{ns, "watch its objects", watch(widgets, victimNS)},
		{ns, "create an object in its namespace", createAs(widgets, func(a *tenant) *unstructured.Unstructured { return widget(victimNS, "planted-"+a.name, nil) })},
		{ns, "create by generateName in its namespace", createAs(widgets, func(*tenant) *unstructured.Unstructured { return widget(victimNS, "", nil) })},
		{ns, "create as a dry run in its namespace", createAs(widgets, func(*tenant) *unstructured.Unstructured { return widget(victimNS, "dry", nil) }, dryRun)},
		{ns, "update an object", update(widgets, victimNS, "default.w1", relabel)},
		{ns, "patch an object", patch(widgets, victimNS, "default.w1", `{"spec":{"owner":"attacker"}}`)},
		{ns, "write an object's status", patch(widgets, victimNS, "default.w1", `{"status":{"phase":"Forged"}}`, "status")},
		{ns, "delete an object", del(widgets, victimNS, "default.w1")},
		{ns, "delete all its objects (deletecollection)", delAll(widgets, victimNS)},
		{ns, "read a Secret", get(secrets, victimNS, "default.db")},
		{ns, "list its Secrets", list(secrets, victimNS)},
		{ns, "create a Secret in its namespace", createAs(secrets, func(a *tenant) *unstructured.Unstructured {
			return object(secrets, victimNS, "planted-"+a.name, nil, map[string]any{"stringData": map[string]any{"k": "v"}})
		})},
		{ns, "delete a Secret", del(secrets, victimNS, "default.db")},
		{ns, "read a ConfigMap", get(configMaps, victimNS, "default.cfg")},
		{ns, "list its Events", list(events, victimNS)},
		{ns, "read its heartbeat Lease", get(leases, victimNS, "provider-victim")},
		{ns, "take over its heartbeat Lease", update(leases, victimNS, "provider-victim", takeOver)},
		{ns, "delete its heartbeat Lease", del(leases, victimNS, "provider-victim")},
		{ns, "create a Lease in its namespace", createAs(leases, func(a *tenant) *unstructured.Unstructured {
			return lease(victimNS, "planted-"+a.name, "attacker", nil)
		})},
		{ns, "relabel its namespace", patch(namespaces, "", victimNS, `{"metadata":{"labels":{"kbind.io/consumer":"attacker"}}}`)},
		{ns, "delete its namespace", del(namespaces, "", victimNS)},

		{pf, "patch an object in its namespace", patch(widgets, victimPrefix+"-default", "w1", `{"spec":{"owner":"attacker"}}`)},
		{pf, "create an object in its namespace", createAs(widgets, func(a *tenant) *unstructured.Unstructured {
			return widget(victimPrefix+"-default", "planted-"+a.name, nil)
		})},
		{pf, "delete an object in its namespace", del(widgets, victimPrefix+"-default", "w1")},
		{pf, "update its cluster-scoped object", update(clusterWidgets, "", victimPrefix+"-c1", relabel)},
		{pf, "delete its cluster-scoped object", del(clusterWidgets, "", victimPrefix+"-c1")},
		{pf, "create a cluster-scoped object under its prefix", createAs(clusterWidgets, func(a *tenant) *unstructured.Unstructured {
			return widget("", victimPrefix+"-c2-"+a.name, ownLabels(a))
		})},
		{pf, "create a namespace under its prefix (squat)", createAs(namespaces, func(a *tenant) *unstructured.Unstructured {
			return object(namespaces, "", victimPrefix+"-new-"+a.name, ownLabels(a), nil)
		})},
		{pf, "take over its heartbeat Lease", update(leases, victimPrefix, "provider-team-a", takeOver)},

		{"a None tenant's", "take over its heartbeat Lease", update(leases, neighbourNS, "provider-neighbour", takeOver)},
		{"a None tenant's", "patch its object in a shared namespace", patch(widgets, "default", "w-neighbour", `{"spec":{"owner":"attacker"}}`)},

		{"the provider's", "take over kube-system/kube-controller-manager", update(leases, "kube-system", "kube-controller-manager", takeOver)},
		{"the provider's", "delete kube-system/kube-controller-manager", del(leases, "kube-system", "kube-controller-manager")},
		{"the provider's", "create a Lease in kube-system", createAs(leases, func(a *tenant) *unstructured.Unstructured {
			return lease("kube-system", "planted-"+a.name, "attacker", nil)
		})},
		{"the provider's", "take over kube-node-lease/node-1", update(leases, "kube-node-lease", "node-1", takeOver)},
		{"the provider's", "take over the backend's leader Lease (kbind/backend.kbind.io)", update(leases, "kbind", kbindv1alpha1.BackendLeaderElectionID, takeOver)},
		{"the provider's", "create an object in kube-system", createAs(widgets, func(a *tenant) *unstructured.Unstructured { return widget("kube-system", "planted-"+a.name, nil) })},
		{"the provider's", "read a Secret in kube-system", get(secrets, "kube-system", "admin-secret")},
		{"the provider's", "list the Secrets of every namespace", list(secrets, "")},
		{"the provider's", "list the Events of every namespace", list(events, "")},
		{"the provider's", "create a namespace a future tenant needs (kbind-future)", createAs(namespaces, func(a *tenant) *unstructured.Unstructured {
			return object(namespaces, "", "kbind-future-"+a.name, ownLabels(a), nil)
		})},
		{"the provider's", "create a namespace labelled for another tenant", createAs(namespaces, func(a *tenant) *unstructured.Unstructured {
			return object(namespaces, "", "forged-"+a.name, map[string]string{"kbind.io/consumer": "victim"}, nil)
		})},
		// Minting for itself within its grant is its right (the konnector
		// renews its token so); TestGrantAttacks has the positive control.
		{"the provider's", "mint a token for its own ServiceAccount for another audience", mintToken("kbind", func(a *tenant) string { return "kbind-consumer-" + a.name },
			authenticationv1.TokenRequestSpec{Audiences: []string{"https://vault.example.com"}})},
		{"the provider's", "mint a token for its own ServiceAccount living longer than granted (720h)", mintToken("kbind", func(a *tenant) string { return "kbind-consumer-" + a.name },
			authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(720*3600 + 1))})},
		{"a Namespace-isolated tenant's", "mint a token for its ServiceAccount", mintToken("kbind", func(*tenant) string { return "kbind-consumer-victim" }, authenticationv1.TokenRequestSpec{})},
		// Where it may write Secrets (Namespace with related Secrets), the
		// Secrets policy refuses this kind: its token would outlive revoke.
		{"its own", "create a service-account token Secret for `default` in its namespace", func(ctx context.Context, a *tenant) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.own, Name: "forever-default",
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
			_, err := a.cs.CoreV1().Secrets(a.own).Create(ctx, s, metav1.CreateOptions{})
			return err
		}},
		{"the provider's", "create a service-account token Secret for its own ServiceAccount", func(ctx context.Context, a *tenant) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "forever-" + a.name,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "kbind-consumer-" + a.name}}, Type: corev1.SecretTypeServiceAccountToken}
			_, err := a.cs.CoreV1().Secrets("kbind").Create(ctx, s, metav1.CreateOptions{})
			return err
		}},
	}
}

// mintToken mints a token for ServiceAccount ns/sa(attacker).
func mintToken(ns string, sa func(*tenant) string, spec authenticationv1.TokenRequestSpec) func(context.Context, *tenant) error {
	return func(ctx context.Context, a *tenant) error {
		_, err := a.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa(a), &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		return err
	}
}

func ptr[T any](v T) *T { return &v }

// TestProviderAttacks: hostile tenants of every isolation mode, holding
// exactly the credentials grant printed (and, separately, those the
// consumer-access chart renders), go after the other tenants' objects and
// the provider's own. Every attempt is refused unless docs/isolation.md
// allows it; the results are docs/isolation.md's attack table.
func TestProviderAttacks(t *testing.T) {
	t.Parallel() // its own provider
	ctx := context.Background()
	provider := testenv.StartClusterT(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, true),
	}})
	admin := dynamic.NewForConfigOrDie(provider.Config)
	for _, ns := range []string{"kbind"} {
		adminCreate(t, admin, namespaces, object(namespaces, "", ns, nil, nil))
	}
	adminCreate(t, admin, leases, lease("kube-system", "kube-controller-manager", "kcm", nil))
	adminCreate(t, admin, leases, lease("kube-node-lease", "node-1", "node-1", nil))
	adminCreate(t, admin, leases, lease("kbind", kbindv1alpha1.BackendLeaderElectionID, "backend", nil))
	adminCreate(t, admin, secrets, object(secrets, "kube-system", "admin-secret", nil, map[string]any{"stringData": map[string]any{"token": "admin"}}))

	// The victims, granted as a provider admin would, and what their
	// konnectors wrote with their own credentials.
	widgetAPIs := "widgets.example.org"
	bothAPIs := "widgets.example.org,clusterwidgets.example.org"
	victim := grant(t, provider, "victim", "Namespace", victimNS, "", "--apis", widgetAPIs, "--related", "secrets,configmaps")
	teamA := grant(t, provider, "team-a", "Prefixed", victimPrefix, victimPrefix, "--apis", bothAPIs)
	neighbour := grant(t, provider, "neighbour", "None", neighbourNS, "", "--apis", widgetAPIs)
	create(t, victim, widgets, ownedBy(widget(victimNS, "default.w1", markers("victim-uid")), "victim"))
	create(t, victim, secrets, object(secrets, victimNS, "default.db", markers("victim-uid"), map[string]any{"stringData": map[string]any{"password": "victim"}}))
	create(t, victim, configMaps, object(configMaps, victimNS, "default.cfg", markers("victim-uid"), map[string]any{"data": map[string]any{"k": "v"}}))
	create(t, victim, leases, lease(victimNS, "provider-victim", "victim-uid", markers("victim-uid")))
	adminCreate(t, admin, events, object(events, victimNS, "w1.victim", nil, map[string]any{
		"involvedObject": map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "Widget", "namespace": victimNS, "name": "default.w1"},
		"reason":         "Provisioned", "message": "victim database at 10.0.0.7:5432 user victim_admin", "type": "Normal"}))
	create(t, teamA, namespaces, object(namespaces, "", victimPrefix+"-default", markers("team-a-uid", kbindv1alpha1.PrefixLabel, victimPrefix), nil))
	create(t, teamA, widgets, ownedBy(widget(victimPrefix+"-default", "w1", markers("team-a-uid")), "team-a"))
	create(t, teamA, clusterWidgets, ownedBy(widget("", victimPrefix+"-c1", markers("team-a-uid", kbindv1alpha1.PrefixLabel, victimPrefix)), "team-a"))
	create(t, teamA, leases, lease(victimPrefix, "provider-team-a", "team-a-uid", markers("team-a-uid")))
	create(t, neighbour, widgets, widget("default", "w-neighbour", markers("neighbour-uid")))
	create(t, neighbour, leases, lease(neighbourNS, "provider-neighbour", "neighbour-uid", markers("neighbour-uid")))

	// The attackers: one per mode from grant, one per mode from the chart,
	// and a Prefixed tenant whose prefix covers team-a's (which grant
	// refuses; the chart, rendered without the cluster, cannot know).
	attackers := map[column][]*tenant{
		colNamespace: {grant(t, provider, "mallory-ns", "Namespace", "kbind-mallory-ns", "", "--apis", widgetAPIs, "--related", "secrets"),
			chartTenant(t, provider, "eve-ns", "Namespace", "kbind-eve-ns", "", map[string]any{"isolation": map[string]any{"mode": "Namespace", "namespace": "kbind-eve-ns"},
				"apis": []any{map[string]any{"group": "example.org", "resources": []any{"widgets"}}}, "related": []any{"secrets"}})},
		colPrefixed: {grant(t, provider, "mallory", "Prefixed", "mallory", "mallory", "--apis", bothAPIs),
			chartTenant(t, provider, "eve", "Prefixed", "eve", "eve", map[string]any{"isolation": map[string]any{"mode": "Prefixed", "prefix": "eve"},
				"apis": []any{map[string]any{"group": "example.org", "resources": []any{"widgets", "clusterwidgets"}}}})},
		colNone: {grant(t, provider, "mallory-none", "None", "kbind-mallory-none", "", "--apis", bothAPIs),
			chartTenant(t, provider, "eve-none", "None", "kbind-eve-none", "", map[string]any{"isolation": map[string]any{"mode": "None"},
				"apis": []any{map[string]any{"group": "example.org", "resources": []any{"widgets", "clusterwidgets"}}}})},
		colOverlap: {chartTenant(t, provider, "team", "Prefixed", "team", "team", map[string]any{"isolation": map[string]any{"mode": "Prefixed", "prefix": "team"},
			"apis": []any{map[string]any{"group": "example.org", "resources": []any{"widgets", "clusterwidgets"}}}})},
	}
	// Positive controls: each attacker can do what its grant is for, so
	// every refusal below is the confinement, not a broken credential.
	for _, as := range attackers {
		for _, a := range as {
			ownWrites(t, a)
		}
	}

	attacks := catalogue(admin)
	results := map[column]map[string]outcome{}
	for _, col := range columns {
		results[col] = map[string]outcome{}
		for i, a := range attackers[col] {
			for _, at := range attacks {
				key := at.group + " " + at.name
				got := classify(t, a.name+": "+key, at.do(ctx, a))
				if i == 0 {
					results[col][key] = got
				} else if got != results[col][key] {
					t.Errorf("%s (%s, chart) got %q for %q, %s (grant) got %q: the chart and grant must hand out the same", a.name, col, got, key,
						attackers[col][0].name, results[col][key])
				}
			}
		}
	}
	// Confirmed, and said in the chart's consent text: relatedClusterWide
	// reads every Secret of the provider, kube-system's included.
	wide := chartTenant(t, provider, "wide", "Prefixed", "wide", "wide", map[string]any{"isolation": map[string]any{"mode": "Prefixed", "prefix": "wide"},
		"apis": []any{map[string]any{"group": "example.org", "resources": []any{"widgets"}}}, "related": []any{"secrets"}, "relatedClusterWide": true})
	enginetest.EventuallyWithin(t, 30*time.Second, "relatedClusterWide reads kube-system's Secrets", func() error {
		_, err := wide.cs.CoreV1().Secrets("kube-system").Get(ctx, "admin-secret", metav1.GetOptions{})
		return err
	})

	table := renderTable(attacks, results)
	t.Logf("attack table:\n%s", table)
	checkAllowances(t, attacks, results)
	checkDocs(t, "provider-attacks", table)

	// Nothing of the victims or the provider changed.
	for _, probe := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
		path     []string
		want     string
	}{
		{leases, victimNS, "provider-victim", []string{"spec", "holderIdentity"}, "victim-uid"},
		{leases, victimPrefix, "provider-team-a", []string{"spec", "holderIdentity"}, "team-a-uid"},
		{leases, neighbourNS, "provider-neighbour", []string{"spec", "holderIdentity"}, "neighbour-uid"},
		{leases, "kube-system", "kube-controller-manager", []string{"spec", "holderIdentity"}, "kcm"},
		{leases, "kube-node-lease", "node-1", []string{"spec", "holderIdentity"}, "node-1"},
		{widgets, victimNS, "default.w1", []string{"spec", "owner"}, "victim"},
		{widgets, victimPrefix + "-default", "w1", []string{"spec", "owner"}, "team-a"},
		{clusterWidgets, "", victimPrefix + "-c1", []string{"spec", "owner"}, "team-a"},
	} {
		u, err := resource(admin, probe.gvr, probe.ns).Get(ctx, probe.name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s/%s: %v", probe.gvr.Resource, probe.ns, probe.name, err)
			continue
		}
		if got, _, _ := unstructured.NestedString(u.Object, probe.path...); got != probe.want {
			t.Errorf("%s %s/%s: %s is %q after the attacks, want %q", probe.gvr.Resource, probe.ns, probe.name, strings.Join(probe.path, "."), got, probe.want)
		}
	}
}

// ownWrites are a tenant's positive controls: its heartbeat Lease in its
// own namespace, an object where its isolation puts its objects, and for
// Prefixed a namespace and a cluster-scoped object under its prefix.
func ownWrites(t *testing.T, a *tenant) {
	t.Helper()
	uid := a.name + "-uid"
	create(t, a, leases, lease(a.own, "provider-"+a.name, uid, markers(uid)))
	switch a.mode {
	case "Namespace":
		create(t, a, widgets, widget(a.own, "default.mine", markers(uid)))
	case "Prefixed":
		create(t, a, namespaces, object(namespaces, "", a.prefix+"-default", markers(uid, kbindv1alpha1.PrefixLabel, a.prefix), nil))
		create(t, a, widgets, widget(a.prefix+"-default", "mine", markers(uid)))
		create(t, a, clusterWidgets, widget("", a.prefix+"-mine", markers(uid, kbindv1alpha1.PrefixLabel, a.prefix)))
	case "None":
		create(t, a, widgets, widget("default", a.name+"-mine", markers(uid)))
		create(t, a, namespaces, object(namespaces, "", a.name+"-team", markers(uid), nil))
	}
}
