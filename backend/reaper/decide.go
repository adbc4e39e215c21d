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

package reaper

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Phase orders what the reaper deletes for one consumer (BE-3).
type Phase int

const (
	// PhaseNone means the resource never holds kbind copies; it is only looked at
	// to tell whether a namespace is empty.
	PhaseNone Phase = iota
	// PhaseCopies deletes provider copies of bound instances (any API outside the
	// built-in groups: CRDs and aggregated APIs).
	PhaseCopies
	// PhaseRelated deletes related Secret and ConfigMap copies.
	PhaseRelated
	// PhaseNamespaces deletes namespaces kbind created for the consumer.
	PhaseNamespaces
	// PhaseLeases deletes the consumer's heartbeat Leases, last.
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
// never exports those (CONN-4), so they never hold instance copies.
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

// HeldBy reports whether a heartbeat Lease's spec.holderIdentity is the
// consumer's: the konnector holds its own Lease, so one held by anyone else
// was taken over and is not the consumer's, whatever its markers say.
func HeldBy(holderIdentity *string, consumerUID string) bool {
	return consumerUID != "" && holderIdentity != nil && *holderIdentity == consumerUID
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
	Resource  Resource
	Namespace string
	Name      string
	UID       types.UID
	// ResourceVersion, when set, is a delete precondition too: the object
	// was judged on its contents at that version (a Lease's holder).
	ResourceVersion string
	Terminating     bool
	// MarkedAt is the copy's reap mark (core.kbind.io/reap-marked-at), ""
	// when unmarked.
	MarkedAt string
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
	// Done means nothing of the consumer is left, its Leases included.
	Done Verdict = iota
	// Waiting means deletions were issued (or are in progress behind provider
	// finalizers); the next phase waits until they are gone.
	Waiting
	// Blocked means some deletion was refused; everything else went on, but the
	// Leases stay so the consumer keeps being reported and retried.
	Blocked
	// Stopped means the consumer renewed a Lease during the pass.
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

// Undiscovered sorts out a discovery error: the group versions it names as
// failed (an aggregated API that is down, reported stale), sorted, when
// discovery failed only for some groups; the error itself when it failed
// as a whole.
func Undiscovered(err error) ([]string, error) {
	if err == nil {
		return nil, nil
	}
	failed, ok := discovery.GroupDiscoveryFailedErrorGroups(err)
	if !ok || len(failed) == 0 {
		return nil, err
	}
	out := make([]string, 0, len(failed))
	for gv := range failed {
		out = append(out, gv.String())
	}
	sort.Strings(out)
	return out, nil
}

// NamespaceContents is what a pass could learn about what a namespace kbind
// created for the consumer holds.
type NamespaceContents struct {
	// Objects is everything listed in it (metadata only).
	Objects []Object
	// Forbidden names the resources the backend may not list there (RBAC,
	// e.g. the backend chart without rbac.namespaceCleanup).
	Forbidden []string
	// Failed names the resources whose list failed otherwise, with the error.
	Failed []string
	// Undiscovered names the API group versions discovery could not list:
	// whatever they hold in the namespace is unknown.
	Undiscovered []string
}

// NamespaceFate is what a pass does with a namespace kbind created for the
// consumer.
type NamespaceFate int

const (
	// KeepNamespace keeps a namespace that holds something else, or cannot be proven empty.
	KeepNamespace NamespaceFate = iota
	// DeleteNamespace deletes a namespace that holds nothing that counts.
	DeleteNamespace
	// DeleteNamespaceAfterLeases deletes a namespace holding only the consumer's own Leases
	// right after them.
	DeleteNamespaceAfterLeases
)

func (f NamespaceFate) String() string {
	return [...]string{"keep", "delete", "delete after the Leases"}[f]
}

// NamespaceDecision is the fate of one namespace and why.
type NamespaceDecision struct {
	Fate NamespaceFate
	// Blocking are the listed objects that keep it.
	Blocking []Object
	// Reason says why it is kept; empty otherwise.
	Reason string
	// Retry: the namespace could not be proven empty for a reason that may
	// pass (an API group that could not be discovered, a list that failed).
	// The pass must not finish then: the consumer's Leases stay, so it stays
	// reported and is retried. A namespace kept because it holds other
	// objects, or because the backend may not list its contents, is kept
	// for good (narrowed RBAC is a choice) and does not hold the Leases.
	Retry bool
}

// DecideNamespace decides whether a namespace kbind created for the
// consumer may be deleted: only when everything in it was listed and
// nothing in it counts, apart from the consumer's own Leases (then it goes
// right after them). A partial, failed or forbidden read never lets it go.
func DecideNamespace(c NamespaceContents, ownLease func(Object) bool) NamespaceDecision {
	var d NamespaceDecision
	var reasons []string
	if len(c.Undiscovered) > 0 {
		reasons = append(reasons, "cannot be proven empty: API groups could not be discovered: "+strings.Join(c.Undiscovered, ", "))
		d.Retry = true
	}
	if len(c.Failed) > 0 {
		reasons = append(reasons, "cannot be proven empty: listing failed: "+strings.Join(c.Failed, "; "))
		d.Retry = true
	}
	if len(c.Forbidden) > 0 {
		reasons = append(reasons, fmt.Sprintf("cannot be proven empty: not allowed to list %s there", summary(c.Forbidden, 3)))
	}
	d.Blocking = Blocking(c.Objects, ownLease)
	if len(d.Blocking) > 0 {
		names := make([]string, 0, len(d.Blocking))
		for _, o := range d.Blocking {
			names = append(names, o.String())
		}
		reasons = append(reasons, fmt.Sprintf("holds %d other object(s) (%s)", len(d.Blocking), summary(names, 3)))
	}
	if len(reasons) > 0 {
		d.Fate, d.Reason = KeepNamespace, strings.Join(reasons, "; ")
		return d
	}
	if len(Blocking(c.Objects, func(Object) bool { return false })) > 0 {
		d.Fate = DeleteNamespaceAfterLeases
		return d
	}
	d.Fate = DeleteNamespace
	return d
}

// summary is the first n items, then how many more.
func summary(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// Refused reports whether a delete was refused (RBAC, an admission policy
// or webhook): a 403 — except the one an API server answers while its
// admission still loads the policies and webhooks it enforces, right after
// it starts ("... is forbidden: not yet ready to handle request", from
// k8s.io/apiserver's admission.NewForbidden). That one is transient: the
// object is reported as failed and the next pass tries again. The engine
// tells the two apart the same way (engine/internal/refusal.NotYetReady).
func Refused(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return false
	}
	return !strings.HasSuffix(status.Status().Message, ": not yet ready to handle request")
}

// CopyAction is what the two-phase reaper does with one provider copy of a
// stale consumer (BE-3): the Lease's word alone never deletes. Phase 1
// marks the copy (core.kbind.io/reap-marked-at, the backend's clock); a
// live konnector, which watches its copies, removes the mark; only a mark
// that survived the grace period leads to a delete.
type CopyAction int

const (
	// KeepCopy means the copy is kept on purpose (core.kbind.io/kept): never
	// marked, never deleted.
	KeepCopy CopyAction = iota
	// MarkCopy means unmarked (never marked, or a live konnector cleared the
	// mark), or marked with a time that cannot count: mark it now.
	MarkCopy
	// WaitForGrace means marked less than the grace period ago.
	WaitForGrace
	// DeleteCopy means the mark survived the grace period.
	DeleteCopy
)

func (a CopyAction) String() string {
	return [...]string{"keep", "mark", "wait", "delete"}[a]
}

// Kept reports whether an object is kept on purpose by kbind (the
// core.kbind.io/kept label, any value): the reaper never marks nor deletes
// it.
func Kept(labels map[string]string) bool {
	_, ok := labels[kbindv1alpha1.KeptLabel]
	return ok
}

// DecideCopy decides one copy's fate from its labels, its mark and the
// backend's clock. A mark that cannot be parsed, or lies in the future (a
// replica with another clock wrote it), is written again: the grace
// period starts over, never shortens. So is a mark written before since,
// the consumer's last renewal the backend saw (zero: unknown): a renewal
// after the mark shows the consumer live after it, so the mark proves
// nothing — a mark an earlier stale episode left on a copy no konnector
// syncs (issue #52) never counts in a later one. Marks carry whole
// seconds: one written in the second of the renewal still counts.
func DecideCopy(labels map[string]string, markedAt string, since, now time.Time, grace time.Duration) CopyAction {
	if Kept(labels) {
		return KeepCopy
	}
	if markedAt == "" {
		return MarkCopy
	}
	t, err := time.Parse(time.RFC3339, markedAt)
	if err != nil || t.After(now) || t.Before(since.Truncate(time.Second)) {
		return MarkCopy
	}
	if now.Sub(t) < grace {
		return WaitForGrace
	}
	return DeleteCopy
}

// CopiesVerdict decides a consumer's copies as a whole: they are deleted
// only when every copy that is not kept or already terminating carries a
// mark that survived the grace period. One unmarked copy — new, or
// cleared by a live konnector — keeps them all: a konnector that clears
// any mark is live, whatever its Lease says.
func CopiesVerdict(actions []CopyAction) (deleteAll bool) {
	due := false
	for _, a := range actions {
		switch a {
		case KeepCopy:
			continue
		case DeleteCopy:
			due = true
		default:
			return false
		}
	}
	return due
}

// UntilDue is how long until the earliest of marks (valid ones, see
// DecideCopy) survived the grace period: when a pass can first delete
// anything. Before that, passes would only mark again the copies a live
// konnector unmarked. At least a second; grace when none is valid.
func UntilDue(marks []string, now time.Time, grace time.Duration) time.Duration {
	d := grace
	for _, m := range marks {
		t, err := time.Parse(time.RFC3339, m)
		if err != nil || t.After(now) {
			continue
		}
		d = min(d, t.Add(grace).Sub(now))
	}
	return max(d, time.Second)
}

// MarkValue is the reap mark's value at now: RFC 3339, UTC, seconds.
func MarkValue(now time.Time) string { return now.UTC().Format(time.RFC3339) }
