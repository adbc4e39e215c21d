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
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/isolation"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}

func TestPlanReference(t *testing.T) {
	ref := func(api, path string) kbindv1alpha1.RelatedResource {
		return kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider,
			Reference: &kbindv1alpha1.RelatedResourceReference{API: api, FieldPath: path}}
	}
	ready := map[string]OwnerAPI{"widgets.example.org": {GVK: widgetGVK, Namespaced: true, Ready: true}}
	for _, tc := range []struct {
		name      string
		entry     kbindv1alpha1.RelatedResource
		namespace string
		isolated  bool
		owners    map[string]OwnerAPI
		pending   bool
		skip      string
		keep      bool
	}{
		{name: "ready API", entry: ref("widgets.example.org", ".spec.secretRef.name"), namespace: "team-a", owners: ready},
		{name: "a ClusterBinding of an isolated Connection may copy FromProvider by reference: the owner says where",
			entry: ref("widgets.example.org", ".spec.secretRef.name"), isolated: true, owners: ready},
		{name: "API not synced yet: waits, copies kept", entry: ref("widgets.example.org", ".spec.secretRef.name"),
			owners: map[string]OwnerAPI{"widgets.example.org": {}}, pending: true},
		{name: "API not listed (stored before validation)", entry: ref("gadgets.example.org", ".spec.secretRef.name"), owners: ready,
			skip: "reference.api gadgets.example.org is not listed in spec.apis", keep: true},
		{name: "cluster-scoped API", entry: ref("widgets.example.org", ".spec.secretRef.name"),
			owners: map[string]OwnerAPI{"widgets.example.org": {GVK: widgetGVK, Ready: true}}, skip: "is cluster-scoped", keep: true},
		{name: "invalid path (stored before validation)", entry: ref("widgets.example.org", ".spec.refs[0].name"), owners: ready,
			skip: `relatedResources[0].reference: fieldPath ".spec.refs[0].name" has an invalid segment`, keep: true},
		{name: "Binding in a denied namespace", entry: ref("widgets.example.org", ".spec.secretRef.name"), namespace: "kbind", owners: ready,
			skip: "never copies secrets from or into namespace kbind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Binding{Namespace: tc.namespace, Entries: []kbindv1alpha1.RelatedResource{tc.entry}, Owners: tc.owners}
			if tc.isolated {
				b.Isolation = isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"})
			}
			plans := planEntries(b, denied)
			p := plans[0]
			if tc.skip != "" {
				if !strings.Contains(p.skip, tc.skip) || p.keep != tc.keep || p.reference != nil {
					t.Fatalf("skip %q keep %v reference %v; want skip with %q, keep %v", p.skip, p.keep, p.reference, tc.skip, tc.keep)
				}
				return
			}
			if p.skip != "" || p.reference == nil || p.reference.pending != tc.pending || len(p.keys) != 0 || p.source != providerSide {
				t.Fatalf("plan %+v", p)
			}
			if !tc.pending && (p.reference.owner.GVK != widgetGVK || p.reference.path.String() != tc.entry.Reference.FieldPath) {
				t.Fatalf("reference %+v", p.reference)
			}
		})
	}
}

func widget(ns, name, uid string, spec map[string]any, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	return u
}

func secretRef(name any) map[string]any {
	return map[string]any{"secretRef": map[string]any{"name": name}}
}

// Which object a bound object references, and where its copy goes, under
// each isolation mode and direction.
func TestReferralsOf(t *testing.T) {
	path, _ := fieldpath.Parse(".spec.secretRef.name")
	nsIso := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"})
	prefixed := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"})
	owners := []*unstructured.Unstructured{
		widget("team-b", "w2", "u2", secretRef("db"), false),
		widget("team-a", "w1", "u1", secretRef("db"), false),
		widget("team-a", "none", "u3", map[string]any{}, false),
		widget("team-a", "empty", "u4", secretRef(""), false),
		widget("team-a", "bad", "u5", secretRef(int64(1)), false),
		widget("kbind", "sneaky", "u6", secretRef("provider-kubeconfig"), false),
		widget("team-a", "gone", "u7", secretRef("old"), true),
		// team-b names what is team-a's provider name under Namespace
		// isolation: it is read at team-b's own place, never team-a's.
		widget("team-b", "x", "u8", secretRef("team-a.db"), false),
	}
	k := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for _, tc := range []struct {
		name string
		iso  isolation.Mapping
		from kbindv1alpha1.RelatedResourceDirection
		want []referral // owner UID, source, target, hold
	}{
		{name: "FromProvider, no isolation: same namespace and name", from: kbindv1alpha1.FromProvider, want: []referral{
			{ownerUID: "u7", source: k("team-a", "old"), target: k("team-a", "old"), hold: true},
			{ownerUID: "u1", source: k("team-a", "db"), target: k("team-a", "db")},
			{ownerUID: "u2", source: k("team-b", "db"), target: k("team-b", "db")},
			{ownerUID: "u8", source: k("team-b", "team-a.db"), target: k("team-b", "team-a.db")},
		}},
		{name: "FromProvider, Namespace isolation: read next to the provider copy, under a name that cannot collide", iso: nsIso, from: kbindv1alpha1.FromProvider, want: []referral{
			{ownerUID: "u7", source: k("tenant-a", "team-a.old"), target: k("team-a", "old"), hold: true},
			{ownerUID: "u1", source: k("tenant-a", "team-a.db"), target: k("team-a", "db")},
			{ownerUID: "u2", source: k("tenant-a", "team-b.db"), target: k("team-b", "db")},
			{ownerUID: "u8", source: k("tenant-a", "team-b.team-a.db"), target: k("team-b", "team-a.db")},
		}},
		{name: "FromConsumer, Namespace isolation", iso: nsIso, from: kbindv1alpha1.FromConsumer, want: []referral{
			{ownerUID: "u7", source: k("team-a", "old"), target: k("tenant-a", "team-a.old"), hold: true},
			{ownerUID: "u1", source: k("team-a", "db"), target: k("tenant-a", "team-a.db")},
			{ownerUID: "u2", source: k("team-b", "db"), target: k("tenant-a", "team-b.db")},
			{ownerUID: "u8", source: k("team-b", "team-a.db"), target: k("tenant-a", "team-b.team-a.db")},
		}},
		{name: "FromConsumer, Prefixed isolation", iso: prefixed, from: kbindv1alpha1.FromConsumer, want: []referral{
			{ownerUID: "u7", source: k("team-a", "old"), target: k("a-team-a", "old"), hold: true},
			{ownerUID: "u1", source: k("team-a", "db"), target: k("a-team-a", "db")},
			{ownerUID: "u2", source: k("team-b", "db"), target: k("a-team-b", "db")},
			{ownerUID: "u8", source: k("team-b", "team-a.db"), target: k("a-team-b", "team-a.db")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, problems := referralsOf(owners, path, tc.from, kbindv1alpha1.RelatedResourceSecrets, tc.iso, denied)
			var got []referral
			for _, r := range refs {
				got = append(got, referral{ownerUID: r.ownerUID, source: r.source, target: r.target, hold: r.hold})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("referrals\n got %+v\nwant %+v", got, tc.want)
			}
			var msgs []string
			for _, p := range problems {
				msgs = append(msgs, p.owner.GetName()+": "+p.message)
			}
			want := []string{
				`sneaky: not copying Secret kbind/provider-kubeconfig that Widget kbind/sneaky names: kbind never copies from or into namespace kbind`,
				`bad: not copying the Secret that Widget team-a/bad names: .spec.secretRef.name is a int64, not a string`,
			}
			if !reflect.DeepEqual(msgs, want) {
				t.Errorf("problems\n got %q\nwant %q", msgs, want)
			}
		})
	}
}

// What an event on a bound object changes, hence whether the binding is
// re-queued: the field changing is what makes the old copy go.
func TestOwnerChanged(t *testing.T) {
	paths := []fieldpath.Path{{"spec", "secretRef", "name"}}
	db := widget("team-a", "w1", "u1", secretRef("db"), false)
	for _, tc := range []struct {
		name     string
		old, new *unstructured.Unstructured
		want     bool
	}{
		{name: "added, names something", new: db, want: true},
		{name: "added, names nothing", new: widget("team-a", "w1", "u1", map[string]any{}, false)},
		{name: "deleted", old: db, want: true},
		{name: "field changed", old: db, new: widget("team-a", "w1", "u1", secretRef("db2"), false), want: true},
		{name: "field cleared", old: db, new: widget("team-a", "w1", "u1", map[string]any{}, false), want: true},
		{name: "field became invalid", old: db, new: widget("team-a", "w1", "u1", secretRef(int64(3)), false), want: true},
		{name: "other change (status, labels)", old: db, new: widget("team-a", "w1", "u1", map[string]any{"secretRef": map[string]any{"name": "db"}, "size": int64(3)}, false)},
		{name: "deletion starts", old: db, new: widget("team-a", "w1", "u1", secretRef("db"), true), want: true},
		{name: "deletion starts, names nothing", old: widget("team-a", "w1", "u1", map[string]any{}, false), new: widget("team-a", "w1", "u1", map[string]any{}, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownerChanged(tc.old, tc.new, paths); got != tc.want {
				t.Errorf("ownerChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// What goes when the field changes: the copy of the old name is no longer
// claimed, so collect deletes it — only if this binding's entry made it.
func TestFieldChangeCollectsOnlyOurOldCopy(t *testing.T) {
	path, _ := fieldpath.Parse(".spec.secretRef.name")
	refs, _ := referralsOf([]*unstructured.Unstructured{widget("team-a", "w1", "u1", secretRef("db-v2"), false)}, path,
		kbindv1alpha1.FromProvider, kbindv1alpha1.RelatedResourceSecrets, isolation.Mapping{}, denied)
	claims := map[string]claim{}
	for _, r := range refs {
		claims[claimKey(consumerSide, kbindv1alpha1.RelatedResourceSecrets, r.target)] = claim{entry: "e1", target: consumerSide}
	}
	old := claimKey(consumerSide, kbindv1alpha1.RelatedResourceSecrets, types.NamespacedName{Namespace: "team-a", Name: "db"})
	current := claimKey(consumerSide, kbindv1alpha1.RelatedResourceSecrets, types.NamespacedName{Namespace: "team-a", Name: "db-v2"})
	for _, tc := range []struct {
		name, owner, key string
		kept             map[string]bool
		want             bool
	}{
		{name: "our copy of the old name goes", owner: "b/e1", key: old, want: true},
		{name: "our copy of the new name stays", owner: "b/e1", key: current},
		{name: "a copy another binding made stays", owner: "other/e1", key: old},
		{name: "an object kbind did not make stays", owner: "", key: old},
		{name: "nothing goes while the entry's sources cannot be read", owner: "b/e1", key: old, kept: map[string]bool{"e1": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := collectable(tc.owner, "b", consumerSide, tc.key, claims, tc.kept, map[string]bool{"e1": true}, false); got != tc.want {
				t.Errorf("collectable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestConsumerMade: only the objects the consumer made own FromConsumer
// related objects; imported copies (the provider's, core.kbind.io/owner:
// provider) never do, whatever their field names — an adopted object
// (the annotation gone) does again.
func TestConsumerMade(t *testing.T) {
	withOwner := func(name, owner string) *unstructured.Unstructured {
		w := widget("team-b", name, name, map[string]any{"secretRef": map[string]any{"name": "payroll-db"}}, false)
		if owner != "" {
			w.SetAnnotations(map[string]string{kbindv1alpha1.OwnerAnnotation: owner, kbindv1alpha1.ConnectionAnnotation: "provider"})
		}
		return w
	}
	names := func(objs []*unstructured.Unstructured) []string {
		out := []string{}
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		owners         []*unstructured.Unstructured
		made, imported []string
	}{
		{"none", nil, []string{}, []string{}},
		{"the consumer's own", []*unstructured.Unstructured{withOwner("mine", "")}, []string{"mine"}, []string{}},
		{"an imported copy is never an owner", []*unstructured.Unstructured{withOwner("grab", kbindv1alpha1.OwnerProvider)}, []string{}, []string{"grab"}},
		{"mixed, order kept", []*unstructured.Unstructured{withOwner("a", ""), withOwner("grab", kbindv1alpha1.OwnerProvider), withOwner("b", "")},
			[]string{"a", "b"}, []string{"grab"}},
		{"an owner annotation naming no known owner is the consumer's", []*unstructured.Unstructured{withOwner("odd", "consumer")}, []string{"odd"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			made, imported := consumerMade(tc.owners)
			if !reflect.DeepEqual(names(made), tc.made) || !reflect.DeepEqual(names(imported), tc.imported) {
				t.Fatalf("made %v imported %v; want %v and %v", names(made), names(imported), tc.made, tc.imported)
			}
		})
	}
}
