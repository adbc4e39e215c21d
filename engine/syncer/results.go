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

package syncer

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/metrics"
)

// State is the engine's own per-object sync result.
type State string

// The per-object states: the provider copy matches; not delivered yet;
// refused by the provider; left alone because of an ownership conflict.
const (
	StateSynced   State = "Synced"
	StatePending  State = "Pending"
	StateFailed   State = "Failed"
	StateConflict State = "Conflict"
)

// Result is the last sync result of one consumer object.
type Result struct {
	State State
	// Conflict is the conflict reason for StateConflict.
	Conflict kbindv1alpha1.Reason
	Message  string
	// Forbidden names the verb and resource type the provider refused
	// (not the object: objects are counted per refusal).
	Forbidden string
	// Deleting marks a pending deleting object that waits for its
	// provider copy to be gone.
	Deleting bool
	// Imported marks a synced imported copy (providerObjects: Import).
	Imported bool
	// Refused names what kbind itself refuses to do for the object (a
	// "hand-over" its binding would undo), with Message saying why; the
	// binding's PermissionDenied condition names it.
	Refused string
}

// Results holds per-object results of every Syncer, for the bindings'
// counts and conditions.
type Results struct {
	mu    sync.RWMutex
	byAPI map[string]map[types.NamespacedName]Result
	// refusals are provider refusals of a whole API, not of an object
	// (watching the provider's Events).
	refusals map[string]string
	onChange func(connection string, gk schema.GroupKind)
}

// NewResults returns an empty Results; onChange (may be nil) is called,
// without locks held, when an object's result changes.
func NewResults(onChange func(connection string, gk schema.GroupKind)) *Results {
	return &Results{byAPI: map[string]map[types.NamespacedName]Result{}, refusals: map[string]string{}, onChange: onChange}
}

// setRefusal records what the provider refuses an API as a whole ("" when
// it no longer does); the bindings of the API report it.
func (r *Results) setRefusal(t Target, refusal string) {
	k := apiKey(t.Connection, t.GVK.GroupKind())
	r.mu.Lock()
	changed := r.refusals[k] != refusal
	if refusal == "" {
		delete(r.refusals, k)
	} else {
		r.refusals[k] = refusal
	}
	r.mu.Unlock()
	if changed && r.onChange != nil {
		r.onChange(t.Connection, t.GVK.GroupKind())
	}
}

func apiKey(connection string, gk schema.GroupKind) string { return connection + "/" + gk.String() }

// set records a result and reports whether it changed.
func (r *Results) set(t Target, key types.NamespacedName, res Result) bool {
	k := apiKey(t.Connection, t.GVK.GroupKind())
	r.mu.Lock()
	m, ok := r.byAPI[k]
	if !ok {
		m = map[types.NamespacedName]Result{}
		r.byAPI[k] = m
	}
	old, had := m[key]
	changed := !had || old != res
	m[key] = res
	r.mu.Unlock()
	metrics.Syncs.WithLabelValues(t.Connection, t.GVK.GroupKind().String(), strings.ToLower(string(res.State))).Inc()
	if changed && r.onChange != nil {
		r.onChange(t.Connection, t.GVK.GroupKind())
	}
	return changed
}

// get returns the recorded result of key, if any.
func (r *Results) get(t Target, key types.NamespacedName) (Result, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.byAPI[apiKey(t.Connection, t.GVK.GroupKind())][key]
	return res, ok
}

func (r *Results) forget(t Target, key types.NamespacedName) {
	k := apiKey(t.Connection, t.GVK.GroupKind())
	r.mu.Lock()
	_, had := r.byAPI[k][key]
	delete(r.byAPI[k], key)
	r.mu.Unlock()
	if had && r.onChange != nil {
		r.onChange(t.Connection, t.GVK.GroupKind())
	}
}

// drop forgets every result of an API.
func (r *Results) drop(connection string, gk schema.GroupKind) {
	r.mu.Lock()
	delete(r.byAPI, apiKey(connection, gk))
	delete(r.refusals, apiKey(connection, gk))
	r.mu.Unlock()
}

// Summary counts results in a scope.
type Summary struct {
	Synced, Pending, Failed, Conflicts int32
	// Deleting counts the pending objects whose deletion waits for their
	// provider copy.
	Deleting int32
	// Imported counts the synced imported copies.
	Imported int32
	// ConflictReason is the more frequent conflict reason.
	ConflictReason kbindv1alpha1.Reason
	// Forbidden lists the refused verbs and resource types with how many
	// objects each refusal hit, sorted.
	Forbidden []string
	// Failures holds up to three failure messages for the binding.
	Failures []string
	// Refused holds, per kind of refusal, how many objects kbind refuses
	// it and the first message (by object key), sorted.
	Refused []string
}

// Summarize counts the results of an API in one namespace, or in all when
// allNamespaces; only in the namespaces selected (nil: every one) admits,
// so that a ClusterBinding with a namespaceSelector counts the objects it
// routes, not those a namespace's Binding routes through the same
// Connection elsewhere.
func (r *Results) Summarize(connection string, gk schema.GroupKind, namespace string, allNamespaces bool, selected func(namespace string) bool) Summary {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var s Summary
	reasons := map[kbindv1alpha1.Reason]int{}
	forbidden := map[string]int{}
	refused := refusals{}
	for key, res := range r.byAPI[apiKey(connection, gk)] {
		if !allNamespaces && key.Namespace != namespace || selected != nil && !selected(key.Namespace) {
			continue
		}
		switch res.State {
		case StateSynced:
			s.Synced++
			if res.Imported {
				s.Imported++
			}
		case StatePending:
			s.Pending++
			if res.Deleting {
				s.Deleting++
			}
		case StateFailed:
			s.Failed++
			if len(s.Failures) < 3 {
				s.Failures = append(s.Failures, key.String()+": "+res.Message)
			}
		case StateConflict:
			s.Conflicts++
			reasons[res.Conflict]++
		}
		if res.Forbidden != "" {
			forbidden[res.Forbidden]++
		}
		refused.add(key, res)
	}
	s.Refused = refused.summary()
	if reasons[kbindv1alpha1.ReasonOwnedByAnother] > reasons[kbindv1alpha1.ReasonForeignObjectExists] {
		s.ConflictReason = kbindv1alpha1.ReasonOwnedByAnother
	} else if s.Conflicts > 0 {
		s.ConflictReason = kbindv1alpha1.ReasonForeignObjectExists
	}
	for f, n := range forbidden {
		s.Forbidden = append(s.Forbidden, fmt.Sprintf("%s: forbidden (%d object(s))", f, n))
	}
	if refusal := r.refusals[apiKey(connection, gk)]; refusal != "" {
		s.Forbidden = append(s.Forbidden, refusal+": forbidden")
	}
	sort.Strings(s.Forbidden)
	sort.Strings(s.Failures)
	return s
}

// refusals counts, per kind of refusal (Result.Refused), the objects
// kbind refuses it and the message of the first of them by key.
type refusals map[string]*refusedObjects

// refusedObjects are the objects of one kind of refusal.
type refusedObjects struct {
	n     int
	first types.NamespacedName
	msg   string
}

func (r refusals) add(key types.NamespacedName, res Result) {
	if res.Refused == "" {
		return
	}
	rf := r[res.Refused]
	if rf == nil {
		rf = &refusedObjects{first: key, msg: res.Message}
		r[res.Refused] = rf
	}
	if rf.n++; key.String() < rf.first.String() {
		rf.first, rf.msg = key, res.Message
	}
}

// summary is "hand-over of 2 object(s), team-a/db: <why>", per kind, sorted.
func (r refusals) summary() []string {
	var out []string
	for what, rf := range r {
		out = append(out, fmt.Sprintf("%s of %d object(s), %s: %s", what, rf.n, rf.first, rf.msg))
	}
	sort.Strings(out)
	return out
}

// Conflicts implements metrics.ConflictSource.
func (r *Results) Conflicts(fn func(connection, api, reason string, n int)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for key, m := range r.byAPI {
		counts := map[kbindv1alpha1.Reason]int{}
		for _, res := range m {
			if res.State == StateConflict {
				counts[res.Conflict]++
			}
		}
		connection, api, _ := strings.Cut(key, "/")
		for reason, n := range counts {
			fn(connection, api, string(reason), n)
		}
	}
}

// Objects implements metrics.ObjectSource: every API with a results entry
// (from its first result until the API is dropped), all states counted.
func (r *Results) Objects(fn func(connection, api string, counts metrics.ObjectCounts)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for key, m := range r.byAPI {
		var c metrics.ObjectCounts
		for _, res := range m {
			switch res.State {
			case StateSynced:
				c.Synced++
			case StatePending:
				c.Pending++
			case StateFailed:
				c.Failed++
			case StateConflict:
				c.Conflict++
			}
		}
		connection, api, _ := strings.Cut(key, "/")
		fn(connection, api, c)
	}
}

func fromUnstructured(m map[string]any, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, out)
}

func toUnstructured(in any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(in)
}
