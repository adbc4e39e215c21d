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

package connection

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/kubeconfig"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

// observation is what one reconcile learned; conditions are a pure function
// of it (desiredConditions), so the decision logic is table-tested apart
// from the API machinery.
type observation struct {
	// secretErr is the kubeconfig Secret problem, nil when usable.
	secretErr error
	// probed is true when identity and discovery were attempted; fresh
	// when they ran in this reconcile (not remembered from an earlier one).
	probed, fresh bool
	// identityErr is the provider identity read error.
	identityErr error
	// unanswered: identityErr is a heartbeat renewal that got no answer.
	unanswered bool
	// identityChanged describes a pinned UID mismatch.
	identityChanged string
	// loopbackInPod: the provider address is a loopback address and the
	// konnector runs in a Pod.
	loopbackInPod string
	// verified: the provider identity was read and matches the pins.
	verified bool
	// discovery is the discovery outcome, nil on error or when not probed.
	discovery *kbindschema.Result
	// discoveryErr is the discovery error.
	discoveryErr error
	// exports are the fresh exports plus the last known exports of groups
	// discovery could not read (unreadable).
	exports    []kbindv1alpha1.ExportedAPI
	unreadable []kbindschema.GroupError
	// insecure lists the insecure kubeconfig features in use (each allowed
	// by spec.allowInsecure, or the Secret would have been refused).
	insecure []kubeconfig.Finding
	// draining lists the bindings a deleting Connection waits for.
	draining []string
	// deleting: the Connection is being deleted, and its deletion is not
	// held.
	deleting bool
	// held: the Connection is being deleted and its deletion is held by
	// spec.deletionProtection (holdDeletion); autoBinding and referencing
	// are what its deletion would take (deletion).
	held        bool
	autoBinding string
	referencing []string
	// published: the session of this kubeconfig is the published one.
	published bool
	// heartbeat is the last renewal's result; heartbeatKnown is false
	// before the first.
	heartbeat      error
	heartbeatKnown bool
	leaseRef       string
	// leaseEvery is the heartbeat interval, for the message.
	leaseEvery time.Duration
	// duplicate: another live konnector renews the heartbeat Lease with
	// this consumer's identity (heartbeat.Duplicate).
	duplicate bool
	// lagging lists consumer CRDs whose schema lags the policy;
	// schemaKnown is false before any CRD was handled.
	lagging     []string
	schemaKnown bool
	// refusedSwitches names the consumer CRDs whose provider
	// storage-version switch kbind refused (schema.DecideStorageSwitch).
	refusedSwitches []string
	// creds is the credential in use and its renewal.
	creds credentialView
}

// desiredConditions decides the Connection conditions. A condition missing
// from the result is left as it is (nothing was learned about it). A
// deleting Connection that waits for its bindings is Ready=False with
// DrainingBindings, and one whose deletion is held Ready=False with
// DeletionProtected, whatever else holds.
func desiredConditions(o observation) []patch.Condition {
	out := connectionConditions(o)
	if len(o.draining) == 0 && !o.held {
		return out
	}
	for i := range out {
		switch {
		case out[i].Type != kbindv1alpha1.ConditionReady:
		case o.held:
			out[i] = heldReady(o, out[i])
		default:
			out[i] = drainingReady(o.draining)
		}
	}
	return out
}

func connectionConditions(o observation) []patch.Condition {
	var out []patch.Condition
	add := func(t kbindv1alpha1.ConditionType, s metav1.ConditionStatus, r kbindv1alpha1.Reason, format string, args ...any) {
		out = append(out, cond(t, s, r, format, args...))
	}
	ready := func(s metav1.ConditionStatus, r kbindv1alpha1.Reason, msg string) {
		add(kbindv1alpha1.ConditionReady, s, r, "%s", msg)
	}

	if o.secretErr != nil {
		add(kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound, "%s", o.secretErr.Error())
		add(kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "waiting for a usable kubeconfig Secret")
		ready(metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound, o.secretErr.Error())
		return withHeartbeat(out, o)
	}
	if len(o.insecure) > 0 {
		where := make([]string, 0, len(o.insecure))
		for _, f := range o.insecure {
			where = append(where, f.Where)
		}
		add(kbindv1alpha1.ConditionSecretValid, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
			"the kubeconfig Secret is usable; insecure features allowed by spec.allowInsecure: %s (%s)",
			strings.Join(kubeconfig.Features(o.insecure), ", "), strings.Join(where, ", "))
	} else {
		add(kbindv1alpha1.ConditionSecretValid, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "the kubeconfig Secret is usable")
	}
	if !o.probed {
		ready(metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "connecting to the provider")
		return withHeartbeat(out, o)
	}

	switch {
	case o.identityChanged != "":
		add(kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged, "%s", o.identityChanged)
		ready(metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged, "sync stopped: "+o.identityChanged)
		return withHeartbeat(out, o)
	case o.identityErr != nil:
		msg := "reading the provider cluster identity failed: " + o.identityErr.Error() + o.loopbackInPod
		if o.unanswered {
			msg = "the provider does not answer: " + o.identityErr.Error() + o.loopbackInPod
		}
		add(kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "%s", msg)
		if refusal.IsForbidden(o.identityErr) {
			add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden, "%s", o.identityErr.Error())
			ready(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, msg)
		} else {
			ready(metav1.ConditionFalse, kbindv1alpha1.ReasonPending, msg)
		}
		return withHeartbeat(out, o)
	}
	add(kbindv1alpha1.ConditionConnected, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "the provider cluster identity matches")
	if o.duplicate {
		// Which of the two is production cannot be told from here: both
		// stop writing to and deleting from the provider.
		ready(metav1.ConditionFalse, kbindv1alpha1.ReasonDuplicateConsumer, "sync paused: "+duplicateMessage(o))
		return withHeartbeat(out, o)
	}

	switch {
	case o.discoveryErr != nil && refusal.IsForbidden(o.discoveryErr):
		add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden, "%s", o.discoveryErr.Error())
		ready(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "discovering exported APIs failed: "+o.discoveryErr.Error())
	case o.discoveryErr != nil:
		ready(metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "discovering exported APIs failed: "+o.discoveryErr.Error())
	default:
		msg := fmt.Sprintf("connected; %d API(s) exported through the %s source", len(o.exports), o.discovery.Source)
		if len(o.unreadable) > 0 {
			msg += fmt.Sprintf("; %d API group(s) could not be read, their last known exports are kept until a read succeeds: %s",
				len(o.unreadable), joinErrors(o.unreadable, nil))
		}
		if refused := joinErrors(o.unreadable, refusal.IsForbidden); refused != "" {
			add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden, "%s", refused)
		} else {
			add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, "identity and discovery are allowed")
		}
		ready(metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, msg)
	}
	return withHeartbeat(out, o)
}

// joinErrors joins the group errors keep selects (all when nil).
func joinErrors(errs []kbindschema.GroupError, keep func(error) bool) string {
	var out []string
	for _, e := range errs {
		if keep == nil || keep(e.Err) {
			out = append(out, e.Error())
		}
	}
	return strings.Join(out, "; ")
}

// decision is what a reconcile does, given what it observed.
type decision struct {
	ready bool
	// useSession: syncers and bindings may use the session (published,
	// cache running); otherwise its watches stop.
	useSession bool
	heartbeat  heartbeatAction
	requeue    requeueKind
}

type heartbeatAction int

const (
	heartbeatKeep heartbeatAction = iota // leave it as it is
	heartbeatRun                         // renew through this (verified) session
	heartbeatStop                        // stop renewing
)

type requeueKind int

const (
	requeueDiscovery requeueKind = iota // at the next discovery pass
	requeueSecret                       // at the discovery interval: the Secret watch re-triggers sooner
	requeueBackoff                      // with the per-Connection exponential backoff
)

// decide turns an observation (and whether the conditions say Ready) into
// what to do. The session serves syncers and bindings while the Connection
// is Ready, and while it is deleting and drains through a verified
// provider — unless another konnector renews the Lease with this
// consumer's identity (duplicate): then nothing writes to or deletes from
// the provider, and a drain waits (or releases Orphan objects) as for an
// unreachable provider. The heartbeat renews through any verified session, whatever
// else fails: liveness means "the konnector serves this Connection"; it
// stops only when the very kubeconfig it uses now reaches another cluster.
func decide(o observation, ready bool) decision {
	d := decision{ready: ready, useSession: ready || (o.deleting && o.verified && !o.duplicate)}
	switch {
	case o.verified:
		d.heartbeat = heartbeatRun
	case o.identityChanged != "" && o.published:
		d.heartbeat = heartbeatStop
	}
	switch {
	case d.useSession:
		d.requeue = requeueDiscovery
	case o.secretErr != nil:
		d.requeue = requeueSecret
	default:
		d.requeue = requeueBackoff
	}
	return d
}

// drainingReady is Ready of a deleting Connection that waits for the
// bindings still referencing it (CONN-7).
func drainingReady(draining []string) patch.Condition {
	return cond(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings,
		"waiting for %d binding(s) referencing this Connection to be deleted: %s", len(draining), strings.Join(draining, ", "))
}

// cond is a decided condition with a formatted message.
func cond(t kbindv1alpha1.ConditionType, s metav1.ConditionStatus, r kbindv1alpha1.Reason, format string, args ...any) patch.Condition {
	return patch.Condition{Type: t, Status: s, Reason: r, Message: fmt.Sprintf(format, args...)}
}

// withHeartbeat appends the conditions that are decided on every path,
// however far the Connection got: SchemaInSync (when the consumer CRDs this
// Connection supplies have been compared with the provider's schemas) and
// Heartbeat (once the heartbeat has reported).
func withHeartbeat(out []patch.Condition, o observation) []patch.Condition {
	if o.schemaKnown {
		switch {
		case len(o.lagging) == 0:
			out = append(out, cond(kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
				"every consumer CRD supplied by this Connection carries the schema its policy calls for"))
		case len(o.refusedSwitches) > 0:
			out = append(out, cond(kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionFalse, kbindv1alpha1.ReasonStorageVersionChange,
				"%d consumer CRD(s) lag behind the provider schema: %s; the provider moved the storage version of %d of them and kbind refuses to follow "+
					"until the operator accepts (the bindings' Ready condition says why and how, docs/bindings.md#storage-version-changes): %s",
				len(o.lagging), strings.Join(o.lagging, ", "), len(o.refusedSwitches), strings.Join(o.refusedSwitches, "; ")))
		default:
			out = append(out, cond(kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
				"%d consumer CRD(s) lag behind the provider schema: %s", len(o.lagging), strings.Join(o.lagging, ", ")))
		}
	}
	if !o.heartbeatKnown {
		return out
	}
	var held *heartbeat.HeldByAnother
	switch {
	case o.duplicate:
		out = append(out, cond(kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonDuplicateConsumer, "%s", duplicateMessage(o)))
	case o.heartbeat == nil:
		out = append(out, cond(kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
			"Lease %s is renewed every %s", o.leaseRef, o.leaseEvery))
	case errors.As(o.heartbeat, &held):
		out = append(out, cond(kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonOwnedByAnother,
			"the heartbeat Lease %s/%s on the provider is held by %q, not by this consumer cluster (%s): kbind leaves it untouched and cannot renew it, so the provider cannot tell this consumer is live; a provider admin should find out who changed its spec.holderIdentity and delete it (kbind then creates it again)",
			held.Namespace, held.Name, held.Holder, held.Consumer))
	case refusal.IsForbidden(o.heartbeat):
		out = append(out, cond(kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "%s", o.heartbeat.Error()))
	default:
		out = append(out, cond(kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "%s", o.heartbeat.Error()))
	}
	return out
}

// duplicateMessage says that another konnector renews the Connection's
// Lease with this consumer's identity, and what to do.
func duplicateMessage(o observation) string {
	return fmt.Sprintf("another konnector renews the heartbeat Lease %s with this consumer cluster's identity: its nonce (annotation %s) alternates with this konnector's — "+
		"two consumer clusters with one identity, such as one restored from an etcd snapshot of the other (a disaster-recovery drill, a staging clone). "+
		"Neither writes to nor deletes from the provider until the other stops renewing for %s; on the clone, set every binding's deletionPolicy to Orphan and never drain there "+
		"(docs/troubleshooting.md#duplicate-consumer)",
		o.leaseRef, kbindv1alpha1.KonnectorNonceAnnotation, heartbeat.DuplicateWindow(o.leaseEvery))
}

// works reports whether the Connection works — its session serves the
// bindings, its exports and autoBind are kept — given the decided
// conditions: when they say Ready, and for a Connection whose deletion is
// held (Ready=False, DeletionProtected) when it would be Ready without the
// hold: a held Connection works as before while the operator decides.
func works(o observation, conds []patch.Condition) bool {
	if o.held {
		return isReady(connectionConditions(o))
	}
	return isReady(conds)
}

// isReady reports whether the decided conditions make the Connection Ready.
func isReady(conds []patch.Condition) bool {
	for _, c := range conds {
		if c.Type == kbindv1alpha1.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// firstReady reports whether a Connection that is Ready now becomes Ready
// for the first time in its life, for
// kbind_connection_time_to_ready_seconds. Its status as read (before this
// reconcile's write) tells: Ready=True there, or an activeSchemaSource
// (written only while Ready, never cleared), means it was Ready before — so
// a restarted konnector never observes the age of an old Connection, even
// one that lost Ready meanwhile.
func firstReady(before kbindv1alpha1.ConnectionStatus, readyNow bool) bool {
	if !readyNow || before.ActiveSchemaSource != "" {
		return false
	}
	return !meta.IsStatusConditionTrue(before.Conditions, string(kbindv1alpha1.ConditionReady))
}
