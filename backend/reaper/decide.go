package reaper

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Phase orders what the reaper deletes for one consumer (BE-3).
type Phase int

const (
	// PhaseNone: the resource never holds kbind copies; it is only looked at
	// to tell whether a namespace is empty.
	PhaseNone Phase = iota
	// PhaseCopies: provider copies of bound instances (any API outside the
	// built-in groups: CRDs and aggregated APIs).
	PhaseCopies
	// PhaseRelated: related Secret and ConfigMap copies.
	PhaseRelated
	// PhaseNamespaces: namespaces kbind created for the consumer.
	PhaseNamespaces
	// PhaseLeases: the consumer's heartbeat Leases, last.
	PhaseLeases
)

func (p Phase) String() string {
	switch p {
	case PhaseCopies:
		return "copies"
	case PhaseRelated:
		return "related"
	case PhaseNamespaces:
		return "namespaces"
	case PhaseLeases:
		return "leases"
	}
	return "none"
}

// BuiltInGroup reports whether an API group is one of Kubernetes' own: kbind
// never exports those (spec CONN-4), so they never hold instance copies.
func BuiltInGroup(group string) bool {
	switch group {
	case "", "apps", "batch", "extensions", "policy", "autoscaling":
		return true
	}
	return group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}

// PhaseOf says which phase deletes objects of a resource.
func PhaseOf(group, resource string) Phase {
	switch {
	case group == "" && resource == "namespaces":
		return PhaseNamespaces
	case group == "coordination.k8s.io" && resource == "leases":
		return PhaseLeases
	case group == "" && (resource == "secrets" || resource == "configmaps"):
		return PhaseRelated
	case group == kbindv1alpha1.GroupVersion.Group:
		return PhaseNone // kbind's own kinds are never copies
	case BuiltInGroup(group):
		return PhaseNone
	}
	return PhaseCopies
}

// Owned reports whether an object carries every marker that makes it the
// given consumer's in a phase — checked on every object the server-side
// label selection returned, before any deletion. Both the label and the
// annotation must name the consumer; copies must also carry ownership
// marker 2 and related copies their binding, so a partially marked object
// is never taken for kbind's.
func Owned(p Phase, consumerUID string, labels, annotations map[string]string) bool {
	if consumerUID == "" ||
		labels[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue ||
		labels[kbindv1alpha1.ConsumerClusterUIDLabel] != consumerUID ||
		annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation] != consumerUID {
		return false
	}
	switch p {
	case PhaseCopies:
		return annotations[kbindv1alpha1.ConsumerObjectUIDAnnotation] != ""
	case PhaseRelated:
		return annotations[kbindv1alpha1.RelatedBindingAnnotation] != ""
	case PhaseNamespaces, PhaseLeases:
		return true
	}
	return false
}

// Ignorable reports whether an object in a namespace does not count against
// the namespace being empty: what Kubernetes itself puts into every
// namespace, and Events.
func Ignorable(gvr schema.GroupVersionResource, name string) bool {
	switch {
	case gvr.Resource == "events" && (gvr.Group == "" || gvr.Group == "events.k8s.io"):
		return true
	case gvr.Group == "" && gvr.Resource == "configmaps" && name == "kube-root-ca.crt":
		return true
	case gvr.Group == "" && gvr.Resource == "serviceaccounts" && name == "default":
		return true
	}
	return false
}

// Resource is an API resource the reaper lists.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Deletable  bool
	Phase      Phase
}

// KindName is Kind.group ("Widget.example.org"; "Secret" for the core group),
// the label of the deletion metric.
func (r Resource) KindName() string {
	if r.GVR.Group == "" {
		return r.Kind
	}
	return r.Kind + "." + r.GVR.Group
}

// ResourceName is resource.group, the way kubectl names it.
func (r Resource) ResourceName() string {
	if r.GVR.Group == "" {
		return r.GVR.Resource
	}
	return r.GVR.Resource + "." + r.GVR.Group
}

// Object is one object the reaper found.
type Object struct {
	Resource    Resource
	Namespace   string
	Name        string
	UID         types.UID
	Terminating bool
}

// Key identifies the object across resources.
func (o Object) Key() string {
	return o.Resource.ResourceName() + " " + o.Namespace + "/" + o.Name
}

// String is "<resource.group> [<namespace>/]<name>", kubectl's spelling.
func (o Object) String() string {
	if o.Namespace == "" {
		return o.Resource.ResourceName() + " " + o.Name
	}
	return fmt.Sprintf("%s %s/%s", o.Resource.ResourceName(), o.Namespace, o.Name)
}

// Blocking returns the objects that keep a namespace from being empty: all
// but the ignorable ones and those removable says will go anyway.
func Blocking(contents []Object, removable func(Object) bool) []Object {
	var out []Object
	for _, o := range contents {
		if Ignorable(o.Resource.GVR, o.Name) || removable(o) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// Verdict is the result of one reaping pass.
type Verdict int

const (
	// Done: nothing of the consumer is left, its Leases included.
	Done Verdict = iota
	// Waiting: deletions were issued (or are in progress behind provider
	// finalizers); the next phase waits until they are gone.
	Waiting
	// Blocked: some deletion was refused; everything else went on, but the
	// Leases stay so the consumer keeps being reported and retried.
	Blocked
	// Stopped: the consumer renewed a Lease during the pass.
	Stopped
)

func (v Verdict) String() string {
	return [...]string{"done", "waiting", "blocked", "stopped"}[v]
}

// PhaseVerdict decides how a pass goes on after a phase: objects still there
// (terminating, or just deleted and held by finalizers) make the next phase
// wait; refused ones do not, since waiting would not help.
func PhaseVerdict(left, refused int) Verdict {
	switch {
	case left > 0:
		return Waiting
	case refused > 0:
		return Blocked
	}
	return Done
}
