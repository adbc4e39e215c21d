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

package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Action is what the installer does with one consumer CRD.
type Action string

const (
	// ActionNone leaves the CRD: it is as the policy wants it.
	ActionNone Action = "None"
	// ActionCreate installs the desired CRD.
	ActionCreate Action = "Create"
	// ActionUpdate replaces the spec of kbind's CRD with the desired one.
	ActionUpdate Action = "Update"
	// ActionStamp puts kbind's markers on an existing CRD (pullPolicy None,
	// CRD source) without touching its spec.
	ActionStamp Action = "Stamp"
	// ActionReport leaves the CRD alone and reports Problem on the binding.
	ActionReport Action = "Report"
	// ActionTakeOver makes kbind's CRD of another Connection, which only
	// namespaced Bindings hold, the desired one for this Connection (BIND-3).
	ActionTakeOver Action = "TakeOver"
	// ActionRestamp makes kbind's CRD of another Connection, which only
	// namespaced Bindings hold, this Connection's without touching its spec
	// (pullPolicy None: kbind writes no schema; BIND-3).
	ActionRestamp Action = "Restamp"
)

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Problem explains ActionReport.
	Problem string
}

// Decide applies pullPolicy, updatePolicy and the ownership rules (spec
// SCHEMA-3..5) to the existing consumer CRD (nil when absent) and the
// desired one (nil when the source cannot produce it, e.g. the CRD source
// under pullPolicy None needs none). Only a CRD kbind created (see
// CreatedByKbind) is ever updated: a CRD stamped under pullPolicy None stays
// the user's whatever the policy says later, so a policy change can never
// hand kbind a CRD — and with it the objects — it did not create.
func Decide(existing, desired *apiextensionsv1.CustomResourceDefinition, name, connection string,
	policy kbindv1alpha1.SchemaPolicy, source kbindv1alpha1.ActiveSchemaSource) Decision {
	if existing == nil {
		if policy.PullPolicy == kbindv1alpha1.PullPolicyNone {
			return Decision{Action: ActionReport, Problem: fmt.Sprintf(
				"CRD %s is not present; with pullPolicy None kbind never creates CRDs, install it outside kbind", name)}
		}
		return Decision{Action: ActionCreate}
	}
	owner, stamped := existing.Annotations[kbindv1alpha1.ConnectionAnnotation]
	switch {
	case stamped && owner != connection:
		return Decision{Action: ActionReport, Problem: fmt.Sprintf(
			"CRD %s is supplied by Connection %q; kbind never takes over a CRD stamped for another Connection", name, owner)}
	case !stamped && policy.PullPolicy == kbindv1alpha1.PullPolicyNone && source == kbindv1alpha1.ActiveSchemaSourceCRD:
		return Decision{Action: ActionStamp}
	case !stamped && policy.PullPolicy == kbindv1alpha1.PullPolicyNone:
		return Decision{Action: ActionReport, Problem: fmt.Sprintf(
			"CRD %s has no kbind markers; with pullPolicy None and the OpenAPI source, add the label %s=%s and the annotation %s=%s yourself",
			name, kbindv1alpha1.ManagedLabel, kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.ConnectionAnnotation, connection)}
	case !stamped:
		return Decision{Action: ActionReport, Problem: fmt.Sprintf(
			"CRD %s exists and was not created by kbind; kbind never takes over a CRD it did not create (set pullPolicy: None to use it as it is)", name)}
	case !CreatedByKbind(existing, connection):
		// Stamped for this Connection (pullPolicy None, or the user's
		// markers) but not created by kbind: used as it is, never written.
		return Decision{Action: ActionNone}
	}
	// kbind's own CRD for this Connection.
	if desired != nil && desired.Spec.Scope != "" && existing.Spec.Scope != desired.Spec.Scope {
		return Decision{Action: ActionReport, Problem: scopeChanged(name, existing.Spec.Scope, desired.Spec.Scope, desired.Spec.Names.Kind)}
	}
	if policy.PullPolicy == kbindv1alpha1.PullPolicyNone || policy.UpdatePolicy == kbindv1alpha1.UpdatePolicyOnce || desired == nil {
		return Decision{Action: ActionNone}
	}
	if existing.Annotations[kbindv1alpha1.SchemaHashAnnotation] == desired.Annotations[kbindv1alpha1.SchemaHashAnnotation] {
		return Decision{Action: ActionNone}
	}
	return Decision{Action: ActionUpdate}
}

// DecideTakeOver decides how a ClusterBinding's Connection takes over the
// consumer CRD existing from Connection from, which the caller found held
// by namespaced Bindings only — no ClusterBinding through from lists it and
// from's pullPolicy is not All (BIND-3: a namespaced Binding never blocks
// an API a ClusterBinding serves). ok is false when there is nothing to
// take over: the CRD is absent, not stamped for from, or not created by
// kbind for from — a CRD kbind did not create is never taken over
// (SCHEMA-5), and Decide then reports it as before.
func DecideTakeOver(existing, desired *apiextensionsv1.CustomResourceDefinition, name, connection, from string,
	policy kbindv1alpha1.SchemaPolicy) (d Decision, ok bool) {
	if existing == nil || from == "" || from == connection || existing.Annotations[kbindv1alpha1.ConnectionAnnotation] != from || !CreatedByKbind(existing, from) {
		return Decision{}, false
	}
	if desired != nil && desired.Spec.Scope != "" && existing.Spec.Scope != desired.Spec.Scope {
		return Decision{Action: ActionReport, Problem: scopeChanged(name, existing.Spec.Scope, desired.Spec.Scope, desired.Spec.Names.Kind)}, true
	}
	if policy.PullPolicy == kbindv1alpha1.PullPolicyNone || desired == nil {
		return Decision{Action: ActionRestamp}, true
	}
	// Under updatePolicy Once too: this is the Connection's first install.
	return Decision{Action: ActionTakeOver}, true
}

// ActionReplace deletes kbind's consumer CRD of another provider API,
// which nothing holds, so that a ClusterBinding's entry installs its own
// under that name (see DecideReplace).
const ActionReplace Action = "Replace"

// Holders is what holds kbind's consumer CRD of another provider API that
// a ClusterBinding's entry collides with (DecideReplace): the other
// bindings whose entries it serves, its objects, and its Connection's
// policy.
type Holders struct {
	// ClusterBindings names the ClusterBindings (deleting ones too: they
	// drain through it) that list the CRD's API.
	ClusterBindings []string
	// Bindings names, as namespace/name, the Bindings not being deleted
	// that list it.
	Bindings []string
	// Objects counts its objects, read from the consumer API server.
	Objects int64
	// PullsAll is true when the CRD's Connection installs every export
	// (pullPolicy All), on a cluster admin's word.
	PullsAll bool
}

// DecideReplace decides whether a ClusterBinding's entry whose consumer
// CRD desired collides (Collision) with existing, kbind's consumer CRD of
// another provider API for Connection owner, takes the name (SCHEMA-7,
// docs/shaping.md#projection): only when nothing holds existing — no
// ClusterBinding lists it (a ClusterBinding never takes from another), no
// live Binding does, it holds no object (its objects would go with it:
// never kbind's decision) and its Connection does not install every export
// — is it deleted (ActionReplace) and desired created in its place; else
// the entry is refused saying what holds it (ActionReport). This is
// DecideTakeOver for another API: that one keeps the CRD and its objects,
// since they stay the same API's; here the CRD's kind, schema and provider
// API change, so only an empty one is replaced. ok is false when existing
// is not such a CRD (absent, not kbind's own for owner, no collision):
// Collision's message stands.
func DecideReplace(existing, desired *apiextensionsv1.CustomResourceDefinition, owner string, h Holders) (d Decision, ok bool) {
	if !Replaceable(existing, desired, owner) {
		return Decision{}, false
	}
	var held []string
	if len(h.ClusterBindings) > 0 {
		held = append(held, fmt.Sprintf("ClusterBinding %s lists it (a ClusterBinding never takes a consumer API another ClusterBinding serves)", strings.Join(h.ClusterBindings, ", ")))
	}
	if len(h.Bindings) > 0 {
		held = append(held, fmt.Sprintf("Binding %s lists it", strings.Join(h.Bindings, ", ")))
	}
	if h.PullsAll {
		held = append(held, fmt.Sprintf("Connection %q installs every export (pullPolicy All)", owner))
	}
	if h.Objects > 0 {
		held = append(held, fmt.Sprintf("it holds %d object(s), which deleting it would delete", h.Objects))
	}
	if len(held) == 0 {
		return Decision{Action: ActionReplace}, true
	}
	return Decision{Action: ActionReport, Problem: fmt.Sprintf(
		"the consumer API %s collides: CRD %s serves the provider's %s (Connection %q), and kbind replaces it with %s only once nothing holds it: %s; "+
			"remove %s from those bindings and delete its objects, or project %s onto another group or kind",
		existing.Name, existing.Name, ProviderAPI(existing), owner, ProviderAPI(desired), strings.Join(held, "; "),
		ProviderAPI(existing), ProviderAPI(desired))}, true
}

// Replaceable reports whether existing is a consumer CRD DecideReplace
// decides about: kbind's own for Connection owner, colliding with desired
// (Collision). The caller reads what holds it only then.
func Replaceable(existing, desired *apiextensionsv1.CustomResourceDefinition, owner string) bool {
	return existing != nil && desired != nil && owner != "" && CreatedByKbind(existing, owner) && Collision(existing, desired) != ""
}

// RefusedNeverServed is the consumer API server's refusal of the names of
// kbind's consumer CRD crd for connection ("reason: message" of
// NamesAccepted=False) when crd was never established, "" otherwise. Such
// a CRD never served, so no object was ever stored under it, and it must
// not stay: once the CRD holding its names goes it would get them, ahead
// of that CRD created again. The API server never turns Established back
// to False (its naming controller keeps an Established condition it finds),
// so not established now is never established.
func RefusedNeverServed(crd *apiextensionsv1.CustomResourceDefinition, connection string) string {
	if crd == nil || !CreatedByKbind(crd, connection) || Established(crd) || !crd.DeletionTimestamp.IsZero() {
		return ""
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
			return fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	return ""
}

// scopeChanged explains a provider CRD whose scope changed: the API server
// never changes a CRD's scope, so kbind cannot follow, and the only way to
// the new scope deletes every consumer object of the kind — the operator's
// decision, never kbind's.
func scopeChanged(name string, from, to apiextensionsv1.ResourceScope, kind string) string {
	return fmt.Sprintf("the provider serves %s %s-scoped now, the consumer CRD is %s-scoped and a CRD's scope cannot change; "+
		"syncing this API waits: restore the provider's scope, or delete the consumer CRD %s — which deletes every %s on this cluster — and kbind installs it %s-scoped",
		name, to, from, name, kind, to)
}

// InSync reports whether a consumer CRD carries the schema the policy calls
// for (the Connection's SchemaInSync): under Once or None any installed CRD
// is what the policy wants; under Always it must be kbind's own CRD for the
// connection with the desired hash — a CRD kbind did not create is never
// updated, so it lags whenever the policy asks kbind to follow the provider.
func InSync(existing, desired *apiextensionsv1.CustomResourceDefinition, connection string, policy kbindv1alpha1.SchemaPolicy) bool {
	if existing == nil {
		return false
	}
	if policy.PullPolicy == kbindv1alpha1.PullPolicyNone || policy.UpdatePolicy == kbindv1alpha1.UpdatePolicyOnce || desired == nil {
		return true
	}
	return CreatedByKbind(existing, connection) &&
		existing.Annotations[kbindv1alpha1.SchemaHashAnnotation] == desired.Annotations[kbindv1alpha1.SchemaHashAnnotation]
}

// Established reports whether the API server serves the CRD.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// NamesGrace is how long a new CRD may go without a NamesAccepted
// condition before kbind calls it stuck: the API server's naming controller
// writes one within a second normally, and its retries back off to tens of
// seconds, so a CRD still without one after this long is one whose status
// the API server cannot write.
const NamesGrace = 30 * time.Second

// Unestablished explains why the consumer API server does not serve crd
// (kbind's consumer CRD), or is "" while there is nothing to explain
// (established, or written a moment ago). Names refused carry the API
// server's own message. No status at all long after its creation is a CRD
// that fits the API server's storage limit but not together with the
// status the API server must add: its naming controller fails with
// "etcdserver: request is too large" in the API server's log only, and the
// binding said "not established yet" for ever. Only a smaller schema or a
// larger limit helps.
func Unestablished(crd *apiextensionsv1.CustomResourceDefinition, now time.Time) string {
	if Established(crd) {
		return ""
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
			return fmt.Sprintf("CRD %s is not established: the consumer API server refuses its names (%s: %s)", crd.Name, c.Reason, c.Message)
		}
		if c.Type == apiextensionsv1.NamesAccepted {
			return ""
		}
	}
	age := now.Sub(crd.CreationTimestamp.Time)
	if crd.CreationTimestamp.IsZero() || age < NamesGrace {
		return ""
	}
	return fmt.Sprintf("CRD %s (%s) is not established: the consumer API server stored it %s ago but has written no status since, "+
		"which happens when a CRD is too large to store together with its status (etcd's --max-request-bytes, 1.5 MiB by default); "+
		"make the provider's schema smaller (fewer properties, shorter descriptions) or raise the consumer etcd's limit",
		crd.Name, encodedSize(crd), age.Round(time.Second))
}

// encodedSize is the size of crd's JSON in MiB, about what etcd stores.
func encodedSize(crd *apiextensionsv1.CustomResourceDefinition) string {
	data, err := json.Marshal(crd)
	if err != nil {
		return "size unknown"
	}
	return fmt.Sprintf("%.2f MiB", float64(len(data))/(1<<20))
}

// CreatedByKbind reports whether kbind created the CRD for connection: it
// carries kbind's markers and a schema hash. kbind writes the hash only
// when it creates a CRD and when it updates one that already carries it;
// stamping under pullPolicy None writes none, and Decide never updates a
// CRD without one — so no policy change can make a CRD kbind did not
// create look like its own.
func CreatedByKbind(crd *apiextensionsv1.CustomResourceDefinition, connection string) bool {
	return crd.Labels[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue &&
		crd.Annotations[kbindv1alpha1.ConnectionAnnotation] == connection &&
		crd.Annotations[kbindv1alpha1.SchemaHashAnnotation] != ""
}
