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
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/isolation"
)

// SystemNamespaces are never copied from or into, on either side, besides
// the konnector's kubeconfig Secret namespaces.
var SystemNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// DeniedNamespaces is the set of namespaces kbind never copies from or
// into: the system namespaces and the kubeconfig Secret namespaces.
func DeniedNamespaces(secretNamespaces []string) map[string]bool {
	out := map[string]bool{}
	for _, ns := range append(append([]string{}, SystemNamespaces...), secretNamespaces...) {
		out[ns] = true
	}
	return out
}

func isForbidden(err error) bool { return refusal.IsForbidden(err) }

// entryPlan is what one relatedResources entry reads.
type entryPlan struct {
	index int
	id    string
	entry kbindv1alpha1.RelatedResource
	// source is where the sources live; the copies go to the other side.
	source side
	// keys are the source informers (server-side selected).
	keys []key
	// names are the entry's names, by the name of the source object they
	// select (a FromProvider entry of a Binding under Namespace isolation
	// reads name x at the provider name of <namespace>/x); nil when the
	// entry does not select by name. With a label selector they filter
	// client-side.
	names map[string]string
	// home is, for a FromProvider entry of a Binding, the consumer
	// namespace its copies go to; iso says which provider objects are that
	// namespace's (homeName). "" for every other entry: copies keep the
	// source's namespace and name, or its mapped place on the provider.
	home string
	iso  isolation.Mapping
	// skip says why the entry copies nothing; keep then says whether its
	// existing copies stay (it cannot tell what it selects) or go (nothing
	// may be copied where it points).
	skip string
	keep bool
	// reference: the entry copies what bound objects name (its keys and
	// referrals are filled in per pass from the owners).
	reference *referencePlan
}

func (p entryPlan) target() side {
	if p.source == providerSide {
		return consumerSide
	}
	return providerSide
}

// copyName is the name of the copy of the source object called name, and
// whether the entry may copy it at all: under Namespace isolation a
// Binding's FromProvider entry copies only its own namespace's provider
// objects (by names: exactly the mapped names; by labels: the readable
// "<namespace>.<x>" names, see homeName).
func (p entryPlan) copyName(name string) (string, bool) {
	if p.names != nil {
		n, ok := p.names[name]
		return n, ok
	}
	if p.home == "" {
		return name, true
	}
	return homeName(p.iso, p.home, name)
}

// targetKey is where the copy of src goes on the other side: a consumer
// source to its mapped provider place (iso); a provider source to the
// Binding's namespace under its consumer name (copyName), or, for a
// ClusterBinding (no isolation: planEntries refuses FromProvider entries
// of ClusterBindings under isolation), to the same namespace and name.
func (p entryPlan) targetKey(src client.Object, iso isolation.Mapping) (client.ObjectKey, error) {
	key := client.ObjectKeyFromObject(src)
	if p.target() == providerSide {
		return iso.Object(key)
	}
	if p.home == "" {
		return key, nil
	}
	name, ok := p.copyName(src.GetName())
	if !ok {
		return client.ObjectKey{}, fmt.Errorf("provider object %s is not consumer namespace %s's", key, p.home)
	}
	return client.ObjectKey{Namespace: p.home, Name: name}, nil
}

// homeName is the consumer name x of the provider object called name when
// it is consumer namespace ns's under iso: the object at iso.Object(ns/x).
// Without isolation and under Prefixed the binding's provider namespace
// holds ns's objects only, under their own names. Under Namespace
// isolation the one provider namespace holds every consumer namespace's
// objects as "<namespace>.<x>": name must be ns's readable form, which
// round-trips through the mapping. A hashed name (a consumer name too long
// for the readable form) cannot be told apart: it is nobody's here, and
// selector.names reaches it.
func homeName(iso isolation.Mapping, ns, name string) (string, bool) {
	if iso.ConfinedTo() == "" {
		return name, true
	}
	x, ok := strings.CutPrefix(name, ns+".")
	if !ok || x == "" {
		return "", false
	}
	if back, err := iso.Object(types.NamespacedName{Namespace: ns, Name: x}); err != nil || back.Name != name {
		return "", false
	}
	return x, true
}

// strayName says whether a name in the selector.names of a Binding in
// namespace home, under Namespace isolation, reads like the provider name
// of another consumer namespace's object ("<other>.<x>"), and which
// namespace: such a name is read at home's mapped place, never at the
// other namespace's, and when nothing is there the binding says why.
func strayName(home, name string) (other string, ok bool) {
	other, _, found := strings.Cut(name, ".")
	if !found || other == home || len(validation.IsDNS1123Label(other)) > 0 {
		return "", false
	}
	return other, true
}

// notManaged excludes what kbind itself wrote from every source informer:
// a copy is never a source.
func notManaged() labels.Requirement {
	r, _ := labels.NewRequirement(kbindv1alpha1.ManagedLabel, selection.NotEquals, []string{kbindv1alpha1.ManagedLabelValue})
	return *r
}

// planEntries decides, per entry of b, which informers hold its sources:
// one per label selector, or one per name (field selector metadata.name)
// when the entry selects by name only; all in the binding's namespace for
// a Binding. An entry without a selector (possible only for objects stored
// before the API required one) or scoped to a denied namespace reads
// nothing.
//
// FromProvider sources are read in the binding's provider place
// (Binding.scope). A Binding's FromProvider entry copies into its own
// namespace only its own namespace's provider objects: under Namespace
// isolation, where the provider place holds every consumer namespace's,
// a name x is read at the mapped provider name of <namespace>/x, and a
// label-selected object only if it is at such a place (copyName). A
// ClusterBinding's FromProvider entry under isolation copies nothing: a
// provider namespace does not say which consumer namespace its objects
// belong in.
//
// A reference entry reads the objects of its API (b.Owners; an API not
// listed, or not readable yet, makes it wait with its copies kept); its
// sources are found per pass (resolveReferences). It works for a
// ClusterBinding under isolation too: the owner says which consumer
// namespace its related object belongs in.
func planEntries(b Binding, denied map[string]bool) []entryPlan {
	out := make([]entryPlan, 0, len(b.Entries))
	for i, e := range b.Entries {
		p := entryPlan{index: i, id: EntryID(e), entry: e, source: consumerSide}
		if e.Direction == kbindv1alpha1.FromProvider {
			p.source = providerSide
		}
		if e.Reference != nil {
			planReference(&p, b.Namespace, denied, b.Owners)
		} else {
			planSelected(&p, b, denied)
		}
		out = append(out, p)
	}
	return out
}

// planSelected plans an entry that selects its sources by label selector
// or by names: one informer for the selector, or one per name when it
// selects by names only. An entry with neither, or with an invalid label
// selector, keeps its copies and copies nothing; one in a denied namespace
// copies nothing.
func planSelected(p *entryPlan, b Binding, denied map[string]bool) {
	i, e, namespace := p.index, p.entry, b.Namespace
	sourceNamespace, sourceName, ok := planSourcePlace(p, b)
	if !ok {
		return
	}
	var sel labels.Selector
	if ls := e.Selector.LabelSelector; ls != nil && (len(ls.MatchLabels) > 0 || len(ls.MatchExpressions) > 0) {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			p.skip, p.keep = fmt.Sprintf("relatedResources[%d] has an invalid labelSelector: %v; nothing is copied", i, err), true
			return
		}
		sel = s
	}
	if len(e.Selector.Names) > 0 {
		p.names = map[string]string{}
		for _, n := range e.Selector.Names {
			p.names[sourceName(n)] = n
		}
	}
	switch {
	case namespace != "" && denied[namespace]:
		p.skip, p.names = fmt.Sprintf("relatedResources[%d]: kbind never copies %s from or into namespace %s", i, e.Resource, namespace), nil
	case sel != nil:
		p.keys = []key{{resource: e.Resource, namespace: sourceNamespace, labels: sel.Add(notManaged()).String()}}
	case len(e.Selector.Names) > 0:
		p.keys = nameKeys(e.Resource, sourceNamespace, p.names)
	default:
		p.skip, p.keep = fmt.Sprintf("relatedResources[%d] has no selector: nothing is copied (kbind never copies every %s in scope)", i, e.Resource), true
	}
}

// planSourcePlace returns where a selecting entry's sources are read: the
// binding's namespace, or for a FromProvider entry its provider place,
// and sourceName, the source object's name for an entry name. A Binding's
// FromProvider entry reads only its own namespace's provider objects (its
// home), at their mapped provider names; a ClusterBinding's under
// isolation copies nothing: ok is false and p.skip says why.
func planSourcePlace(p *entryPlan, b Binding) (sourceNamespace string, sourceName func(string) string, ok bool) {
	namespace := b.Namespace
	sourceName = func(n string) string { return n }
	if p.entry.Direction != kbindv1alpha1.FromProvider {
		return namespace, sourceName, true
	}
	switch {
	case b.Isolation.Isolated() && namespace == "":
		p.skip = fmt.Sprintf("relatedResources[%d]: a ClusterBinding of an isolated Connection cannot copy %s FromProvider, because the provider namespace does not say which consumer namespace they belong in; list the entry on a Binding in the consumer namespace that should receive them", p.index, p.entry.Resource)
		return "", nil, false
	case namespace != "":
		p.home, p.iso = namespace, b.Isolation
		sourceName = func(n string) string {
			at, err := b.Isolation.Object(types.NamespacedName{Namespace: namespace, Name: n})
			if err != nil {
				return n // only a cluster-scoped key fails, and this one has a namespace
			}
			return at.Name
		}
	}
	return b.scope(providerSide), sourceName, true
}

// nameKeys is one informer per source name (field selector metadata.name),
// in sorted order, of resource in namespace.
func nameKeys(resource kbindv1alpha1.RelatedResourceKind, namespace string, names map[string]string) []key {
	sourceNames := slices.Sorted(maps.Keys(names))
	keys := make([]key, 0, len(sourceNames))
	for _, n := range sourceNames {
		keys = append(keys, key{resource: resource, namespace: namespace,
			labels: labels.NewSelector().Add(notManaged()).String(), fields: fields.OneTermEqualSelector("metadata.name", n).String()})
	}
	return keys
}

// copiesKey is the informer of a side's copies in a binding's scope,
// selected by kbind's labels: on the provider the consumer cluster UID
// must be this consumer's; on the consumer every copy carries it, so its
// presence is enough (and a binding whose Connection is gone can still
// find its consumer-side copies).
func copiesKey(s side, resource kbindv1alpha1.RelatedResourceKind, namespace, clusterUID string) key {
	managed, _ := labels.NewRequirement(kbindv1alpha1.ManagedLabel, selection.Equals, []string{kbindv1alpha1.ManagedLabelValue})
	uid, _ := labels.NewRequirement(kbindv1alpha1.ConsumerClusterUIDLabel, selection.Exists, nil)
	if s == providerSide {
		uid, _ = labels.NewRequirement(kbindv1alpha1.ConsumerClusterUIDLabel, selection.Equals, []string{clusterUID})
	}
	return key{resource: resource, namespace: namespace, labels: labels.NewSelector().Add(*managed, *uid).String()}
}

var relatedKinds = []kbindv1alpha1.RelatedResourceKind{kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.RelatedResourceConfigMaps}

// sourceVerdict says whether a source an informer holds is copied.
type sourceVerdict int

const (
	copyIt sourceVerdict = iota
	// notSelected: another name, or not meant for this consumer; ignored
	// silently.
	notSelected
	// elsewhere: a provider object a Binding's FromProvider entry matches
	// that is not its namespace's (another consumer namespace's under
	// Namespace isolation); refused and reported, never copied.
	elsewhere
	// deniedNamespace: skipped and reported.
	deniedNamespace
	// serviceAccountToken: skipped and reported.
	serviceAccountToken
)

// judgeSource decides about one source. Objects kbind wrote (the managed
// label, or a related-binding annotation) are never sources; on the
// provider neither is an object marked for another consumer, nor, for a
// Binding, one that is not its namespace's (copyName).
func judgeSource(obj client.Object, p entryPlan, clusterUID string, denied map[string]bool) sourceVerdict {
	if p.names != nil {
		if _, ok := p.names[obj.GetName()]; !ok {
			return notSelected
		}
	}
	l, a := obj.GetLabels(), obj.GetAnnotations()
	if l[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue || a[kbindv1alpha1.RelatedBindingAnnotation] != "" {
		return notSelected
	}
	if p.source == providerSide {
		for _, uid := range []string{l[kbindv1alpha1.ConsumerClusterUIDLabel], a[kbindv1alpha1.ConsumerClusterUIDAnnotation]} {
			if uid != "" && uid != clusterUID {
				return notSelected
			}
		}
		if _, ok := p.copyName(obj.GetName()); !ok {
			return elsewhere
		}
	}
	if denied[obj.GetNamespace()] {
		return deniedNamespace
	}
	if s, ok := obj.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
		return serviceAccountToken
	}
	return copyIt
}

// claim is a target an entry of this pass copies to.
type claim struct {
	entry  string
	target side
}

// collectable decides whether a copy of the binding (owner is its
// related-binding annotation, found on side s under key) is deleted: not
// when an entry of this pass copies to it, nor when its entry could not
// read its sources (a failed read never shrinks what exists). The copy of
// an entry that is no longer listed (current says which are) goes too,
// unless an entry that copies to the same side and kind could not read
// its sources (unreadHere): it may be the same entry edited, which would
// copy the same objects once it can read them.
func collectable(owner, bindingUID string, s side, copyKey string, claims map[string]claim, kept, current map[string]bool, unreadHere bool) bool {
	entry, ok := strings.CutPrefix(owner, bindingUID+"/")
	if !ok {
		return false // not this binding's
	}
	if kept[entry] {
		return false
	}
	if c, ok := claims[copyKey]; ok && c.target == s && c.entry == entry {
		return false
	}
	if !current[entry] && unreadHere {
		return false
	}
	return true
}

// admit decides which entries' source informers a binding may hold within
// the watch budget of its namespace: entries[i] are the informers entry i
// reads, others those the namespace's other bindings hold. Entries are
// admitted in order, each if the informers it adds keep the namespace
// within budget; one that would exceed it is refused (over: how many it
// would add) and later ones are still considered. Informers shared by
// entries or bindings count once. used is how many the namespace holds
// with the admitted entries.
func admit(entries [][]ref, others map[ref]bool, budget int) (over map[int]int, used int) {
	held := make(map[ref]bool, len(others))
	for r := range others {
		held[r] = true
	}
	for i, refs := range entries {
		var added []ref
		for _, r := range refs {
			if !held[r] && !slices.Contains(added, r) {
				added = append(added, r)
			}
		}
		if len(added) == 0 {
			continue
		}
		if len(held)+len(added) > budget {
			if over == nil {
				over = map[int]int{}
			}
			over[i] = len(added)
			continue
		}
		for _, r := range added {
			held[r] = true
		}
	}
	return over, len(held)
}

// overBudget is the refusal of entry index, which would add need related
// watches to the used ones of namespace ("" for the ClusterBindings).
func overBudget(index, need, used, budget int, namespace string) string {
	whose := "namespace " + namespace
	if namespace == "" {
		whose = "the ClusterBindings"
	}
	return fmt.Sprintf("relatedResources[%d] needs %d more related watches, over the budget of %d per namespace for %s (%d in use; the konnector's --related-watches-per-namespace): it copies nothing and keeps its copies until the bindings there need fewer watches or the budget is raised",
		index, need, budget, whose, used)
}

// notHome is the refusal of a Binding's FromProvider entry that matches n
// provider objects in providerNamespace that are not its namespace's.
func notHome(p entryPlan, n int, providerNamespace string) string {
	return fmt.Sprintf("relatedResources[%d] matches %d provider %s(s) in %s not named %s.<name>: a Binding in %s copies FromProvider only its own namespace's provider objects, never another consumer namespace's (a name too long for that form is hashed, and only selector.names reaches it); they are not copied",
		p.index, n, singular(p.entry.Resource), providerNamespace, p.home, p.home)
}

// strayMissing is the refusal of a name of a Binding's FromProvider entry
// that reads like another consumer namespace's (strayName) and is not
// there under home's mapping (at providerKey).
func strayMissing(p entryPlan, name, other string, providerKey client.ObjectKey) string {
	return fmt.Sprintf("relatedResources[%d].selector.names %s: a Binding in %s reads that name at its own namespace's place, provider %s %s, where it selects nothing; another consumer namespace's provider objects (%s.…) are never copied into %s",
		p.index, name, p.home, singular(p.entry.Resource), providerKey, other, p.home)
}

// planReference plans a reference entry: the path must parse, its API must
// be listed by the binding and namespaced (a reference names an object in
// the owner's namespace), and a Binding in a namespace kbind never copies
// into or from copies nothing.
func planReference(p *entryPlan, namespace string, denied map[string]bool, owners map[string]OwnerAPI) {
	e := p.entry
	path, err := fieldpath.Parse(e.Reference.FieldPath)
	if err != nil {
		p.skip, p.keep = fmt.Sprintf("relatedResources[%d].reference: %v; nothing is copied", p.index, err), true
		return
	}
	owner, listed := owners[e.Reference.API]
	switch {
	case namespace != "" && denied[namespace]:
		p.skip = fmt.Sprintf("relatedResources[%d]: kbind never copies %s from or into namespace %s", p.index, e.Resource, namespace)
	case !listed:
		p.skip, p.keep = fmt.Sprintf("relatedResources[%d].reference.api %s is not listed in spec.apis; nothing is copied", p.index, e.Reference.API), true
	case owner.Ready && !owner.Namespaced:
		p.skip, p.keep = fmt.Sprintf("relatedResources[%d].reference.api %s is cluster-scoped: a reference names an object in the bound object's namespace; nothing is copied", p.index, e.Reference.API), true
	default:
		p.reference = &referencePlan{api: e.Reference.API, path: path, owner: owner, pending: !owner.Ready}
	}
}

// unmarkPatch is the JSON merge patch that removes the backend reaper's
// phase-1 mark (core.kbind.io/reap-marked-at, issue #52) from a provider
// copy this binding keeps, exactly that copy (its UID: a replaced copy is
// refused, not patched); ok is false on a copy without the mark, and on
// the consumer side, where the reaper never marks.
func unmarkPatch(s side, obj client.Object) (data []byte, ok bool) {
	if _, marked := obj.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation]; !marked || s != providerSide {
		return nil, false
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         string(obj.GetUID()),
		"annotations": map[string]any{kbindv1alpha1.ReapMarkedAtAnnotation: nil},
	}})
	return data, err == nil
}
