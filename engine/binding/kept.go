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

package binding

// This file reports the provider copies a binding's deletion protection
// kept instead of deleting (BIND-5, docs/bindings.md#deletion-protection):
// status.keptCopies, the CopiesKept condition and a CopiesKept Event.
// The konnector's syncers keep them (label core.kbind.io/kept:
// DeletionProtection, annotation core.kbind.io/kept-by); this only counts
// (syncer.KeptCounter). status.keptCopies is also what remembers the APIs
// that left spec.apis and whose copies were kept: they are counted while
// they have an entry, which goes once its count reaches 0.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/syncer"
)

// keptCandidate is an API whose kept copies a binding counts.
type keptCandidate struct {
	// Name is the consumer API; ProviderAPI the provider's when projected.
	Name, ProviderAPI string
	// Listed: spec.apis still lists it (its copies were kept because
	// their objects are no longer selected); otherwise the API left
	// spec.apis.
	Listed bool
	// DroppedNow: the API left status.boundAPIs in this reconcile (its
	// unbinding just finished) and has no status.keptCopies entry yet:
	// if its count fails now, nothing would remember to count it again.
	DroppedNow bool
}

// keptCandidates decides which APIs a binding counts kept copies of:
// under protection, every API it binds or still unbinds (bound) and every
// API that left spec.apis since the last status (before.boundAPIs); with
// or without protection, every API status.keptCopies has an entry for
// (turning protection off deletes no kept copy, so they are still
// counted). Sorted by name.
func keptCandidates(protected bool, listed []string, bound []kbindv1alpha1.BoundAPI, before *kbindv1alpha1.BindingStatus) []keptCandidate {
	isListed, inBound := map[string]bool{}, map[string]bool{}
	for _, n := range listed {
		isListed[n] = true
	}
	out := map[string]keptCandidate{}
	add := func(name, providerAPI string, dropped bool) {
		c, seen := out[name]
		if !seen {
			c = keptCandidate{Name: name, ProviderAPI: providerAPI, Listed: isListed[name], DroppedNow: dropped}
		}
		if c.ProviderAPI == "" {
			c.ProviderAPI = providerAPI
		}
		c.DroppedNow = c.DroppedNow && dropped
		out[name] = c
	}
	if protected {
		for _, a := range bound {
			inBound[a.Name] = true
			add(a.Name, a.ProviderAPI, false)
		}
		for _, a := range before.BoundAPIs {
			if !isListed[a.Name] && !inBound[a.Name] {
				add(a.Name, a.ProviderAPI, true)
			}
		}
	}
	for _, k := range before.KeptCopies {
		add(k.Name, k.ProviderAPI, false)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	cs := make([]keptCandidate, 0, len(names))
	for _, n := range names {
		cs = append(cs, out[n])
	}
	return cs
}

// keptResult is the count of one candidate, or why it failed.
type keptResult struct {
	keptCandidate
	Count syncer.KeptCount
	Err   error
}

// keptOutcome is what the counts make of status.keptCopies.
type keptOutcome struct {
	// Entries is the new status.keptCopies, sorted by name.
	Entries []kbindv1alpha1.KeptCopies
	// Listed says, per entry, whether spec.apis still lists its API.
	Listed map[string]bool
	// Failed are the counts that failed, each "<api>: <error>"; the
	// entry keeps its last count (never 0).
	Failed []string
	// Lost is a failed count of an API that just left status.boundAPIs
	// with no entry to keep: the reconcile fails, so that status.boundAPIs
	// keeps it and the next one counts it again.
	Lost error
}

// mergeKept decides status.keptCopies from the counts and the last
// status: a count above 0 is the entry; a count of 0 drops it; a failed
// count keeps the last entry as it was and is reported.
func mergeKept(results []keptResult, before []kbindv1alpha1.KeptCopies) keptOutcome {
	last := map[string]kbindv1alpha1.KeptCopies{}
	for _, k := range before {
		last[k.Name] = k
	}
	o := keptOutcome{Listed: map[string]bool{}}
	for _, r := range results {
		switch prior, had := last[r.Name]; {
		case r.Err != nil && !had && !r.DroppedNow && errors.Is(r.Err, syncer.ErrKeptNotReadable):
			continue // not readable yet (a CRD not established): nothing known, nothing to report
		case r.Err != nil:
			o.Failed = append(o.Failed, fmt.Sprintf("%s: %v", r.Name, r.Err))
			if had {
				o.Entries = append(o.Entries, *prior.DeepCopy())
			} else if r.DroppedNow && o.Lost == nil {
				o.Lost = fmt.Errorf("counting the provider copies kept of %s, which left spec.apis: %w", r.Name, r.Err)
			}
		case r.Count.Count > 0:
			o.Entries = append(o.Entries, kbindv1alpha1.KeptCopies{Name: r.Name, ProviderAPI: r.ProviderAPI, Count: r.Count.Count,
				Namespaces: append([]string(nil), r.Count.Namespaces...)})
		default:
			continue
		}
		o.Listed[r.Name] = r.Listed
	}
	sort.Slice(o.Entries, func(i, j int) bool { return o.Entries[i].Name < o.Entries[j].Name })
	return o
}

// keptCommand is the kubectl kbind command that lists the copies binding
// b kept; with --delete it deletes them.
func keptCommand(b kbindv1alpha1.BindingObject) string {
	if b.BindingKind() == "ClusterBinding" {
		return "kubectl kbind kept clusterbinding/" + b.GetName()
	}
	return "kubectl kbind kept binding/" + b.GetName() + " -n " + b.GetNamespace()
}

// keptTotal is how many copies entries count.
func keptTotal(entries []kbindv1alpha1.KeptCopies) int64 {
	var n int64
	for _, k := range entries {
		n += int64(k.Count)
	}
	return n
}

// keptMessage is the CopiesKept message: how many copies of which APIs
// were kept and where, why, and how to delete them deliberately; then the
// counts that failed (their last count shown).
func keptMessage(command string, o keptOutcome) string {
	var parts []string
	for _, k := range o.Entries {
		what := fmt.Sprintf("%d of %s", k.Count, k.Name)
		if k.ProviderAPI != "" {
			what += " (the provider's " + k.ProviderAPI + ")"
		}
		if len(k.Namespaces) > 0 {
			what += " in " + strings.Join(k.Namespaces, ", ")
			if len(k.Namespaces) >= syncer.MaxKeptNamespaces && int(k.Count) > len(k.Namespaces) {
				what += " and possibly more namespaces"
			}
		}
		if o.Listed[k.Name] {
			what += ": objects no longer selected"
		} else {
			what += ": the API was removed from spec.apis (its consumer CRD and objects stay)"
		}
		parts = append(parts, what)
	}
	msg := fmt.Sprintf("%d provider cop(ies) kept by spec.deletionProtection instead of deleted, no longer synced: %s. "+
		"They stay until deleted deliberately: %s --delete (without --delete it lists them), "+
		"or select their objects again (they become their copies again and sync) and delete the objects",
		keptTotal(o.Entries), strings.Join(parts, "; "), command)
	if len(o.Failed) > 0 {
		msg += "; the last count is shown where a count failed: " + strings.Join(o.Failed, "; ")
	}
	return msg
}

// countKept counts the kept copies of b's candidate APIs (keptCandidates)
// into o. Without a usable Connection nothing is counted: the last
// status.keptCopies stays as it is.
func (r *Reconciler) countKept(ctx context.Context, b binding, before *kbindv1alpha1.BindingStatus, o *observation) error {
	if o.conn == nil || r.kept == nil {
		return nil
	}
	by := syncer.KeptBy(b.obj)
	var results []keptResult
	for _, c := range keptCandidates(b.spec.DeletionProtection, b.spec.ConsumerNames(), o.bound, before) {
		n, err := r.kept.KeptCopies(ctx, c.Name, o.connection, by, r.Resync)
		results = append(results, keptResult{keptCandidate: c, Count: n, Err: err})
	}
	out := mergeKept(results, before.KeptCopies)
	if out.Lost != nil {
		return out.Lost
	}
	o.keptCopies = &out
	return nil
}

// setKept writes status.keptCopies and the CopiesKept condition (absent
// while there are none; Unknown while no count is known because the
// counts failed). Informational: Ready does not look at it.
func setKept(b binding, o *observation) {
	k := o.keptCopies
	if k == nil {
		return // not counted: the last status stays
	}
	b.status.KeptCopies = k.Entries
	switch {
	case len(k.Entries) > 0:
		patch.SetCondition(&b.status.Conditions, metav1.Condition{
			Type: string(kbindv1alpha1.ConditionCopiesKept), Status: metav1.ConditionTrue, Reason: string(kbindv1alpha1.ReasonDeletionProtected),
			Message: keptMessage(keptCommand(b.obj), *k),
		}, b.obj.GetGeneration())
	case len(k.Failed) > 0 && b.spec.DeletionProtection:
		patch.SetCondition(&b.status.Conditions, metav1.Condition{
			Type: string(kbindv1alpha1.ConditionCopiesKept), Status: metav1.ConditionUnknown, Reason: string(kbindv1alpha1.ReasonPending),
			Message: "the provider copies spec.deletionProtection kept could not be counted (retried at the next resync): " + strings.Join(k.Failed, "; "),
		}, b.obj.GetGeneration())
	default:
		meta.RemoveStatusCondition(&b.status.Conditions, string(kbindv1alpha1.ConditionCopiesKept))
	}
}

// keptGrew decides the CopiesKept Event: the total kept grew over both
// the status the reconcile started from and the last total this process
// wrote (known; -1 when none), which the status read from the cache may
// lag behind.
func keptGrew(before, now []kbindv1alpha1.KeptCopies, known int64) bool {
	total := keptTotal(now)
	return total > keptTotal(before) && total > known
}

// announceKept records the Normal CopiesKept Event when the count grew
// (keptGrew), and remembers the total written for the binding.
func (r *Reconciler) announceKept(b binding, before []kbindv1alpha1.KeptCopies) {
	uid := b.obj.GetUID()
	known := int64(-1)
	if v, ok := r.keptKnown.Load(uid); ok {
		known = v.(int64)
	}
	now := b.status.KeptCopies
	r.keptKnown.Store(uid, keptTotal(now))
	if r.Events == nil || !keptGrew(before, now, known) {
		return
	}
	c := meta.FindStatusCondition(b.status.Conditions, string(kbindv1alpha1.ConditionCopiesKept))
	if c == nil {
		return
	}
	r.Events.Eventf(b.obj, nil, corev1.EventTypeNormal, string(kbindv1alpha1.ConditionCopiesKept), "Keep", "%s", c.Message)
}
