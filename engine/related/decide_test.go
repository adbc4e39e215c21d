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

package related

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
)

var denied = DeniedNamespaces([]string{"kbind"})

func TestDeniedNamespaces(t *testing.T) {
	for ns, want := range map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true, "kbind": true, "default": false, "team-a": false} {
		if denied[ns] != want {
			t.Errorf("%s denied = %v, want %v", ns, denied[ns], want)
		}
	}
}

func TestPlanEntries(t *testing.T) {
	secrets, cms := kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.RelatedResourceConfigMaps
	labelled := kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}
	cases := []struct {
		name      string
		entry     kbindv1alpha1.RelatedResource
		namespace string
		source    side
		keys      []key
		// names are "<source name>=<entry name>"
		names []string
		skip  string
		keep  bool
	}{{
		name:   "label selector, cluster-wide, kbind's own objects excluded server-side",
		entry:  kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromProvider, Selector: labelled},
		source: providerSide,
		keys:   []key{{resource: secrets, labels: "app=db,core.kbind.io/managed!=true"}},
	}, {
		name:      "names only: one informer per name, in the Binding's namespace",
		entry:     kbindv1alpha1.RelatedResource{Resource: cms, Direction: kbindv1alpha1.FromConsumer, Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"b", "a"}}},
		namespace: "team-a",
		source:    consumerSide,
		keys: []key{
			{resource: cms, namespace: "team-a", labels: "core.kbind.io/managed!=true", fields: "metadata.name=a"},
			{resource: cms, namespace: "team-a", labels: "core.kbind.io/managed!=true", fields: "metadata.name=b"},
		},
		names: []string{"a=a", "b=b"},
	}, {
		name: "both: the label selector server-side, names client-side",
		entry: kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: labelled.LabelSelector, Names: []string{"x"}}},
		source: consumerSide,
		keys:   []key{{resource: secrets, labels: "app=db,core.kbind.io/managed!=true"}},
		names:  []string{"x=x"},
	}, {
		name:   "no selector (stored before the API required one): nothing read, copies kept",
		entry:  kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer},
		source: consumerSide,
		skip:   "relatedResources[0] has no selector", keep: true,
	}, {
		name: "an empty label selector is no selector",
		entry: kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{}}},
		source: consumerSide,
		skip:   "has no selector", keep: true,
	}, {
		name: "an invalid label selector: nothing read, copies kept",
		entry: kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}},
		source: consumerSide,
		skip:   "invalid labelSelector", keep: true,
	}, {
		name:      "a Binding in a denied namespace reads nothing; its copies go",
		entry:     kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromProvider, Selector: labelled},
		namespace: "kube-system",
		source:    providerSide,
		skip:      "never copies secrets from or into namespace kube-system",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans := planEntries(Binding{Namespace: tc.namespace, Entries: []kbindv1alpha1.RelatedResource{tc.entry}}, denied)
			if len(plans) != 1 {
				t.Fatalf("%d plans", len(plans))
			}
			p := plans[0]
			if p.source != tc.source || p.id != EntryID(tc.entry) || !reflect.DeepEqual(p.keys, tc.keys) || p.keep != tc.keep {
				t.Errorf("plan source=%v keys=%+v keep=%v, want source=%v keys=%+v keep=%v", p.source, p.keys, p.keep, tc.source, tc.keys, tc.keep)
			}
			if (tc.skip == "") != (p.skip == "") || !strings.Contains(p.skip, tc.skip) {
				t.Errorf("skip %q, want %q", p.skip, tc.skip)
			}
			var names []string
			for sn, n := range p.names {
				names = append(names, sn+"="+n)
			}
			sort.Strings(names)
			if !reflect.DeepEqual(names, tc.names) {
				t.Errorf("names %v, want %v", names, tc.names)
			}
		})
	}
}

func TestCopiesKey(t *testing.T) {
	if got := copiesKey(providerSide, kbindv1alpha1.RelatedResourceSecrets, "team-a", "uid-1"); got.labels != "core.kbind.io/consumer-cluster-uid=uid-1,core.kbind.io/managed=true" || got.namespace != "team-a" || got.fields != "" {
		t.Errorf("provider copies key %+v", got)
	}
	if got := copiesKey(consumerSide, kbindv1alpha1.RelatedResourceConfigMaps, "", ""); got.labels != "core.kbind.io/consumer-cluster-uid,core.kbind.io/managed=true" {
		t.Errorf("consumer copies key %+v", got)
	}
}

func TestJudgeSource(t *testing.T) {
	fromProvider := entryPlan{source: providerSide}
	fromConsumer := entryPlan{source: consumerSide}
	byName := entryPlan{source: providerSide, names: map[string]string{"wanted": "wanted"}}
	nsIso := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant"})
	teamB := entryPlan{source: providerSide, home: "team-b", iso: nsIso}
	teamBByName := entryPlan{source: providerSide, home: "team-b", iso: nsIso, names: map[string]string{"team-b.db": "db"}}
	teamBUp := entryPlan{source: consumerSide, home: "", iso: nsIso}
	obj := func(namespace, name string, labels, annotations map[string]string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations}}
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "t"}, Type: corev1.SecretTypeServiceAccountToken}
	cases := []struct {
		name string
		obj  client.Object
		plan entryPlan
		want sourceVerdict
	}{
		{"plain", obj("team-a", "s", nil, nil), fromProvider, copyIt},
		{"labelled for this consumer", obj("team-a", "s", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "ours"}, nil), fromProvider, copyIt},
		{"labelled for another consumer", obj("team-a", "s", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "theirs"}, nil), fromProvider, notSelected},
		{"annotated for another consumer", obj("team-a", "s", nil, map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: "theirs"}), fromProvider, notSelected},
		{"another consumer's copy", obj("team-a", "s", map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: "theirs"}, nil), fromProvider, notSelected},
		{"our own copy", obj("team-a", "s", map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: "ours"}, nil), fromProvider, notSelected},
		{"a copy whose labels were removed", obj("team-a", "s", nil, map[string]string{kbindv1alpha1.RelatedBindingAnnotation: "b/e"}), fromConsumer, notSelected},
		{"a consumer object may carry any cluster label", obj("team-a", "s", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "x"}, nil), fromConsumer, copyIt},
		{"kube-system", obj("kube-system", "s", nil, nil), fromProvider, deniedNamespace},
		{"the kubeconfig Secret namespace", obj("kbind", "s", nil, nil), fromConsumer, deniedNamespace},
		{"a service-account token", token, fromConsumer, serviceAccountToken},
		{"another name", obj("team-a", "other", nil, nil), byName, notSelected},
		{"the name", obj("team-a", "wanted", nil, nil), byName, copyIt},
		{"Namespace isolation: the Binding's namespace's", obj("tenant", "team-b.db", nil, nil), teamB, copyIt},
		{"Namespace isolation: another consumer namespace's", obj("tenant", "team-a.db1-conn", nil, nil), teamB, elsewhere},
		{"Namespace isolation: nobody's", obj("tenant", "shared", nil, nil), teamB, elsewhere},
		{"Namespace isolation: another consumer's comes first (silent)", obj("tenant", "team-a.db", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "theirs"}, nil), teamB, notSelected},
		{"Namespace isolation, by name: the mapped name", obj("tenant", "team-b.db", nil, nil), teamBByName, copyIt},
		{"Namespace isolation, by name: another name", obj("tenant", "team-a.db", nil, nil), teamBByName, notSelected},
		{"FromConsumer: any consumer object of the namespace", obj("team-b", "team-a.db", nil, nil), teamBUp, copyIt},
	}
	for _, tc := range cases {
		if got := judgeSource(tc.obj, tc.plan, "ours", denied); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCollectable(t *testing.T) {
	claims := map[string]claim{"secrets/ns/a": {entry: "e1", target: providerSide}}
	current := map[string]bool{"e1": true, "e2": true}
	cases := []struct {
		name       string
		owner      string
		side       side
		key        string
		kept       map[string]bool
		unreadHere bool
		want       bool
	}{
		{"claimed by its entry on this side", "b/e1", providerSide, "secrets/ns/a", nil, false, false},
		{"claimed on the other side", "b/e1", consumerSide, "secrets/ns/a", nil, false, true},
		{"claimed by another entry", "b/e2", providerSide, "secrets/ns/a", nil, false, true},
		{"unclaimed: the source went or stopped matching", "b/e1", providerSide, "secrets/ns/gone", nil, false, true},
		{"its entry could not read its sources", "b/e1", providerSide, "secrets/ns/gone", map[string]bool{"e1": true}, true, false},
		{"its entry was removed", "b/removed", providerSide, "secrets/ns/x", map[string]bool{"e1": true}, false, true},
		{"its entry was removed, and an entry copying there cannot read yet: it may be the same entry edited", "b/removed", providerSide, "secrets/ns/x", map[string]bool{"e1": true}, true, false},
		{"unclaimed while another entry copying there cannot read: its own entry could", "b/e2", providerSide, "secrets/ns/x", map[string]bool{"e1": true}, true, true},
		{"another binding's", "other/e1", providerSide, "secrets/ns/x", nil, false, false},
	}
	for _, tc := range cases {
		if got := collectable(tc.owner, "b", tc.side, tc.key, claims, tc.kept, current, tc.unreadHere); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReadable(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no"))
	other := errors.New("connection refused")
	cases := []struct {
		name   string
		synced bool
		err    error
		want   error
	}{
		{"synced", true, nil, nil},
		{"not listed yet", false, nil, ErrNotReadYet},
		{"refused before the first list", false, forbidden, forbidden},
		{"refused after a good list: reported, not acted on", true, forbidden, forbidden},
		{"failing before the first list", false, other, other},
		{"a transient watch error after a good list: the cache holds the last good state", true, other, nil},
	}
	for _, tc := range cases {
		if got := readable(tc.synced, tc.err); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStripTransform(t *testing.T) {
	transform := stripTransform(denied)
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "s",
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`, "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data: map[string][]byte{"password": []byte("secret")}}
	out, err := transform(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok || s.Annotations["keep"] != "me" || s.ManagedFields != nil || string(s.Data["password"]) != "secret" {
		t.Errorf("transformed %+v", s)
	}
	sys := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "c"}, Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {1}}}
	out, _ = transform(sys)
	if cm := out.(*corev1.ConfigMap); cm.Data != nil || cm.BinaryData != nil {
		t.Errorf("a payload in a denied namespace was cached: %+v", cm)
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "a/b"}
	if out, err := transform(tombstone); err != nil || out != tombstone {
		t.Errorf("a tombstone: %v %v", out, err)
	}
}

// Where a FromProvider entry reads and where its copies go, per isolation
// mode, for a Binding in team-b and a ClusterBinding: a Binding copies only
// its own namespace's provider objects (SYNC-R1; docs/isolation.md).
func TestFromProviderPlacesUnderIsolation(t *testing.T) {
	secrets := kbindv1alpha1.RelatedResourceSecrets
	none := isolation.Mapping{}
	nsIso := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant"})
	prefixed := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "p"})
	long := strings.Repeat("l", 250)
	hashed, _ := nsIso.Object(types.NamespacedName{Namespace: "team-b", Name: long})
	byNames := kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromProvider,
		Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"db1-conn", "team-a.db1-conn", long}}}
	byLabel := kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromProvider,
		Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	name := func(n string) string { return "metadata.name=" + n }
	for _, tc := range []struct {
		name      string
		iso       isolation.Mapping
		namespace string
		entry     kbindv1alpha1.RelatedResource
		// fields are the source informers' field selectors (names) and
		// sourceNamespace their namespace.
		sourceNamespace string
		fields          []string
		skip            string
		// copies maps provider objects (namespace/name) to their copy's
		// key, "" when the entry may not copy them.
		copies map[string]string
	}{{
		name: "None, Binding, names: same namespace and names", iso: none, namespace: "team-b", entry: byNames,
		sourceNamespace: "team-b", fields: []string{name("db1-conn"), name(long), name("team-a.db1-conn")},
		copies: map[string]string{"team-b/db1-conn": "team-b/db1-conn", "team-b/team-a.db1-conn": "team-b/team-a.db1-conn"},
	}, {
		name: "None, Binding, labels: every object of its namespace", iso: none, namespace: "team-b", entry: byLabel,
		sourceNamespace: "team-b", copies: map[string]string{"team-b/db1-conn": "team-b/db1-conn", "team-b/team-a.x": "team-b/team-a.x"},
	}, {
		name: "None, ClusterBinding, labels: every namespace, same keys", iso: none, entry: byLabel,
		copies: map[string]string{"team-a/x": "team-a/x", "team-b/y": "team-b/y"},
	}, {
		name: "Prefixed, Binding, names: its prefixed namespace, same names", iso: prefixed, namespace: "team-b", entry: byNames,
		sourceNamespace: "p-team-b", fields: []string{name("db1-conn"), name(long), name("team-a.db1-conn")},
		copies: map[string]string{"p-team-b/db1-conn": "team-b/db1-conn", "p-team-b/team-a.db1-conn": "team-b/team-a.db1-conn"},
	}, {
		name: "Prefixed, Binding, labels: everything in its prefixed namespace is its own", iso: prefixed, namespace: "team-b", entry: byLabel,
		sourceNamespace: "p-team-b", copies: map[string]string{"p-team-b/x": "team-b/x", "p-team-b/team-a.x": "team-b/team-a.x"},
	}, {
		name: "Prefixed, ClusterBinding: refused", iso: prefixed, entry: byLabel, skip: "cannot copy secrets FromProvider",
	}, {
		name: "Namespace, Binding, names: read at the mapped names (hashed when long), copied under the consumer names", iso: nsIso, namespace: "team-b", entry: byNames,
		sourceNamespace: "tenant", fields: []string{name(hashed.Name), name("team-b.db1-conn"), name("team-b.team-a.db1-conn")},
		copies: map[string]string{
			"tenant/team-b.db1-conn": "team-b/db1-conn", "tenant/team-b.team-a.db1-conn": "team-b/team-a.db1-conn", "tenant/" + hashed.Name: "team-b/" + long,
			"tenant/team-a.db1-conn": "", "tenant/db1-conn": "",
		},
	}, {
		name: "Namespace, Binding, labels: only its readable names, under the consumer names", iso: nsIso, namespace: "team-b", entry: byLabel,
		sourceNamespace: "tenant",
		copies: map[string]string{
			"tenant/team-b.db2": "team-b/db2", "tenant/team-b.team-a.x": "team-b/team-a.x",
			"tenant/team-a.db1-conn": "", "tenant/shared": "", "tenant/team-b.": "", "tenant/" + hashed.Name: "", "tenant/team-bb.x": "",
		},
	}, {
		name: "Namespace, ClusterBinding: refused", iso: nsIso, entry: byLabel, skip: "cannot copy secrets FromProvider",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := planEntries(Binding{Namespace: tc.namespace, Isolation: tc.iso, Entries: []kbindv1alpha1.RelatedResource{tc.entry}}, denied)[0]
			if !strings.Contains(p.skip, tc.skip) || (tc.skip == "") != (p.skip == "") {
				t.Fatalf("skip %q, want %q", p.skip, tc.skip)
			}
			if tc.skip != "" {
				return
			}
			var fields []string
			for _, k := range p.keys {
				if k.namespace != tc.sourceNamespace {
					t.Errorf("source informer in %q, want %q", k.namespace, tc.sourceNamespace)
				}
				if k.fields != "" {
					fields = append(fields, k.fields)
				}
			}
			if !reflect.DeepEqual(fields, tc.fields) {
				t.Errorf("field selectors\n got %q\nwant %q", fields, tc.fields)
			}
			for src, want := range tc.copies {
				ns, n, _ := strings.Cut(src, "/")
				obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
				verdict := judgeSource(obj, p, "ours", denied)
				if want == "" {
					if verdict == copyIt {
						t.Errorf("%s would be copied", src)
					}
					continue
				}
				target, err := p.targetKey(obj, tc.iso)
				if verdict != copyIt || err != nil || target.String() != want {
					t.Errorf("%s: verdict %v, copy at %s (%v), want %s", src, verdict, target, err, want)
				}
			}
		})
	}
}

func TestHomeName(t *testing.T) {
	nsIso := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant"})
	prefixed := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "p"})
	long := strings.Repeat("l", 250)
	hashed, _ := nsIso.Object(types.NamespacedName{Namespace: "team-b", Name: long})
	for _, tc := range []struct {
		iso        isolation.Mapping
		name, want string
		ok         bool
	}{
		{nsIso, "team-b.db", "db", true},
		{nsIso, "team-b.a.b", "a.b", true},
		{nsIso, "team-a.db", "", false},
		{nsIso, "team-bb.db", "", false},
		{nsIso, "team-b.", "", false},
		{nsIso, "db", "", false},
		{nsIso, hashed.Name, "", false}, // hashed: names only
		{prefixed, "team-a.db", "team-a.db", true},
		{isolation.Mapping{}, "anything", "anything", true},
	} {
		got, ok := homeName(tc.iso, "team-b", tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: homeName(%q) = %q %v, want %q %v", tc.iso, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestStrayName(t *testing.T) {
	for _, tc := range []struct {
		name, other string
		ok          bool
	}{
		{"team-a.db1-conn", "team-a", true},
		{"a.b.c", "a", true},
		{"db1-conn", "", false},
		{"team-b.db", "", false}, // the Binding's own namespace
		{"Team.db", "", false},   // not a namespace name
		{".db", "", false},
	} {
		other, ok := strayName("team-b", tc.name)
		if other != tc.other || ok != tc.ok {
			t.Errorf("strayName(%q) = %q %v, want %q %v", tc.name, other, ok, tc.other, tc.ok)
		}
	}
}

// Which entries fit the watch budget of a namespace: in order, each whole
// or not at all, shared informers counted once.
func TestAdmit(t *testing.T) {
	r := func(name string) ref { return ref{key: key{fields: "metadata.name=" + name}} }
	for _, tc := range []struct {
		name    string
		entries [][]ref
		others  []ref
		budget  int
		over    map[int]int
		used    int
	}{
		{name: "within", entries: [][]ref{{r("a"), r("b")}, {r("c")}}, budget: 3, used: 3},
		{name: "the entry that would exceed is refused whole; later ones may fit", entries: [][]ref{{r("a")}, {r("b"), r("c"), r("d")}, {r("e")}},
			budget: 3, over: map[int]int{1: 3}, used: 2},
		{name: "other bindings' watches count", entries: [][]ref{{r("a"), r("b")}}, others: []ref{r("x"), r("y")}, budget: 3,
			over: map[int]int{0: 2}, used: 2},
		{name: "shared with other bindings or entries: counted once", entries: [][]ref{{r("x"), r("a")}, {r("a"), r("x")}, {r("a"), r("a")}},
			others: []ref{r("x")}, budget: 2, used: 2},
		{name: "an entry that reads nothing (a reference with no owners) always fits", entries: [][]ref{nil, {r("a")}}, others: []ref{r("x")},
			budget: 1, over: map[int]int{1: 1}, used: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others := map[ref]bool{}
			for _, o := range tc.others {
				others[o] = true
			}
			over, used := admit(tc.entries, others, tc.budget)
			if !reflect.DeepEqual(over, tc.over) || used != tc.used {
				t.Errorf("over %v used %d, want %v %d", over, used, tc.over, tc.used)
			}
		})
	}
}

func TestRefusalMessages(t *testing.T) {
	p := entryPlan{index: 2, entry: kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets}, home: "team-b"}
	for _, tc := range []struct{ got, want string }{
		{overBudget(2, 24, 3, 8, "team-b"), "relatedResources[2] needs 24 more related watches, over the budget of 8 per namespace for namespace team-b (3 in use; the konnector's --related-watches-per-namespace): it copies nothing and keeps its copies until the bindings there need fewer watches or the budget is raised"},
		{overBudget(0, 1, 8, 8, ""), "relatedResources[0] needs 1 more related watches, over the budget of 8 per namespace for the ClusterBindings (8 in use; the konnector's --related-watches-per-namespace): it copies nothing and keeps its copies until the bindings there need fewer watches or the budget is raised"},
		{notHome(p, 2, "tenant"), "relatedResources[2] matches 2 provider Secret(s) in tenant not named team-b.<name>: a Binding in team-b copies FromProvider only its own namespace's provider objects, never another consumer namespace's (a name too long for that form is hashed, and only selector.names reaches it); they are not copied"},
		{strayMissing(p, "team-a.db1-conn", "team-a", types.NamespacedName{Namespace: "tenant", Name: "team-b.team-a.db1-conn"}), "relatedResources[2].selector.names team-a.db1-conn: a Binding in team-b reads that name at its own namespace's place, provider Secret tenant/team-b.team-a.db1-conn, where it selects nothing; another consumer namespace's provider objects (team-a.…) are never copied into team-b"},
	} {
		if tc.got != tc.want {
			t.Errorf("\n got %s\nwant %s", tc.got, tc.want)
		}
	}
}

func TestUnmarkPatch(t *testing.T) {
	mark := kbindv1alpha1.ReapMarkedAtAnnotation
	obj := func(annotations map[string]string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "u-1", Annotations: annotations}}
	}
	for _, tc := range []struct {
		name   string
		s      side
		obj    client.Object
		want   string
		wantOK bool
	}{
		{"a marked provider copy: the mark removed, exactly that copy", providerSide, obj(map[string]string{mark: "2026-01-01T00:00:00Z", "other": "x"}),
			`{"metadata":{"annotations":{"core.kbind.io/reap-marked-at":null},"uid":"u-1"}}`, true},
		{"an unmarked provider copy: nothing", providerSide, obj(map[string]string{"other": "x"}), "", false},
		{"no annotations: nothing", providerSide, obj(nil), "", false},
		{"the consumer side is never marked by the reaper: nothing", consumerSide, obj(map[string]string{mark: "2026-01-01T00:00:00Z"}), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, ok := unmarkPatch(tc.s, tc.obj)
			if ok != tc.wantOK || string(data) != tc.want {
				t.Errorf("unmarkPatch = %s, %v; want %s, %v", data, ok, tc.want, tc.wantOK)
			}
		})
	}
}
