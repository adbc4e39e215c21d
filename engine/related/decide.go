package related

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/fieldpath"
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

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

// entryPlan is what one relatedResources entry reads.
type entryPlan struct {
	index int
	id    string
	entry kbindv1alpha1.RelatedResource
	// source is where the sources live; the copies go to the other side.
	source side
	// keys are the source informers (server-side selected).
	keys []key
	// names filters a label-selected entry by name, client-side.
	names map[string]bool
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

// notManaged excludes what kbind itself wrote from every source informer:
// a copy is never a source.
func notManaged() labels.Requirement {
	r, _ := labels.NewRequirement(kbindv1alpha1.ManagedLabel, selection.NotEquals, []string{kbindv1alpha1.ManagedLabelValue})
	return *r
}

// planEntries decides, per entry, which informers hold its sources: one
// per label selector, or one per name (field selector metadata.name) when
// the entry selects by name only; all in the binding's namespace for a
// Binding. An entry without a selector (possible only for objects stored
// before the API required one) or scoped to a denied namespace reads
// nothing.
//
// providerNamespace is where provider sources are read (the binding's
// provider place, see Binding.scope); isolated says the Connection maps
// names, in which case a ClusterBinding's FromProvider entry copies
// nothing: a provider namespace does not say which consumer namespace its
// objects belong in.
//
// A reference entry reads the objects of its API (owners; an API not
// listed, or not readable yet, makes it wait with its copies kept); its
// sources are found per pass (resolveReferences). It works for a
// ClusterBinding under isolation too: the owner says which consumer
// namespace its related object belongs in.
func planEntries(entries []kbindv1alpha1.RelatedResource, namespace, providerNamespace string, isolated bool, denied map[string]bool, owners map[string]OwnerAPI) []entryPlan {
	out := make([]entryPlan, 0, len(entries))
	for i, e := range entries {
		p := entryPlan{index: i, id: EntryID(e), entry: e, source: consumerSide}
		if e.Direction == kbindv1alpha1.FromProvider {
			p.source = providerSide
		}
		if e.Reference != nil {
			planReference(&p, namespace, denied, owners)
			out = append(out, p)
			continue
		}
		sourceNamespace := namespace
		if e.Direction == kbindv1alpha1.FromProvider {
			sourceNamespace = providerNamespace
			if isolated && namespace == "" {
				p.skip = fmt.Sprintf("relatedResources[%d]: a ClusterBinding of an isolated Connection cannot copy %s FromProvider, because the provider namespace does not say which consumer namespace they belong in; list the entry on a Binding in the consumer namespace that should receive them", i, e.Resource)
				out = append(out, p)
				continue
			}
		}
		var sel labels.Selector
		if ls := e.Selector.LabelSelector; ls != nil && (len(ls.MatchLabels) > 0 || len(ls.MatchExpressions) > 0) {
			s, err := metav1.LabelSelectorAsSelector(ls)
			if err != nil {
				p.skip, p.keep = fmt.Sprintf("relatedResources[%d] has an invalid labelSelector: %v; nothing is copied", i, err), true
				out = append(out, p)
				continue
			}
			sel = s
		}
		switch {
		case namespace != "" && denied[namespace]:
			p.skip = fmt.Sprintf("relatedResources[%d]: kbind never copies %s from or into namespace %s", i, e.Resource, namespace)
		case sel != nil:
			p.keys = []key{{resource: e.Resource, namespace: sourceNamespace, labels: sel.Add(notManaged()).String()}}
			if len(e.Selector.Names) > 0 {
				p.names = map[string]bool{}
				for _, n := range e.Selector.Names {
					p.names[n] = true
				}
			}
		case len(e.Selector.Names) > 0:
			names := append([]string{}, e.Selector.Names...)
			sort.Strings(names)
			for _, n := range names {
				p.keys = append(p.keys, key{resource: e.Resource, namespace: sourceNamespace,
					labels: labels.NewSelector().Add(notManaged()).String(), fields: fields.OneTermEqualSelector("metadata.name", n).String()})
			}
		default:
			p.skip, p.keep = fmt.Sprintf("relatedResources[%d] has no selector: nothing is copied (kbind never copies every %s in scope)", i, e.Resource), true
		}
		out = append(out, p)
	}
	return out
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
	// deniedNamespace: skipped and reported.
	deniedNamespace
	// serviceAccountToken: skipped and reported.
	serviceAccountToken
)

// judgeSource decides about one source. Objects kbind wrote (the managed
// label, or a related-binding annotation) are never sources; on the
// provider neither is an object marked for another consumer.
func judgeSource(obj client.Object, p entryPlan, clusterUID string, denied map[string]bool) sourceVerdict {
	if p.names != nil && !p.names[obj.GetName()] {
		return notSelected
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
// read its sources (a failed read never shrinks what exists).
func collectable(owner, bindingUID string, s side, copyKey string, claims map[string]claim, kept map[string]bool) bool {
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
	return true
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
