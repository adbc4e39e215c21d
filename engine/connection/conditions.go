package connection

import (
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/conditions"
	"github.com/kbind/kbind/engine/kubeconfig"
	"github.com/kbind/kbind/engine/schema"
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
	// identityChanged describes a pinned UID mismatch.
	identityChanged string
	// loopbackInPod: the provider address is a loopback address and the
	// konnector runs in a Pod.
	loopbackInPod string
	// verified: the provider identity was read and matches the pins.
	verified bool
	// discovery is the discovery outcome, nil on error or when not probed.
	discovery *schema.Result
	// discoveryErr is the discovery error.
	discoveryErr error
	// exports are the fresh exports plus the last known exports of groups
	// discovery could not read (unreadable).
	exports    []kbindv1alpha1.ExportedAPI
	unreadable []schema.GroupError
	// insecure lists the insecure kubeconfig features in use (each allowed
	// by spec.allowInsecure, or the Secret would have been refused).
	insecure []kubeconfig.Finding
	// draining lists the bindings a deleting Connection waits for.
	draining []string
	// heartbeat is the last renewal's result; heartbeatKnown is false
	// before the first.
	heartbeat      error
	heartbeatKnown bool
	leaseRef       string
	// leaseEvery is the heartbeat interval, for the message.
	leaseEvery time.Duration
	// lagging lists consumer CRDs whose schema lags the policy;
	// schemaKnown is false before any CRD was handled.
	lagging     []string
	schemaKnown bool
}

// condition is a condition without bookkeeping fields.
type condition struct {
	typ     kbindv1alpha1.ConditionType
	status  metav1.ConditionStatus
	reason  kbindv1alpha1.Reason
	message string
}

// desiredConditions decides the Connection conditions. A condition missing
// from the result is left as it is (nothing was learned about it). A
// deleting Connection that waits for its bindings is Ready=False with
// DrainingBindings, whatever else holds.
func desiredConditions(o observation) []condition {
	out := connectionConditions(o)
	if len(o.draining) == 0 {
		return out
	}
	for i := range out {
		if out[i].typ == kbindv1alpha1.ConditionReady {
			out[i] = drainingReady(o.draining)
		}
	}
	return out
}

func connectionConditions(o observation) []condition {
	var out []condition
	add := func(t kbindv1alpha1.ConditionType, s metav1.ConditionStatus, r kbindv1alpha1.Reason, format string, args ...any) {
		out = append(out, condition{t, s, r, fmt.Sprintf(format, args...)})
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
		add(kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "%s", msg)
		if apierrors.IsForbidden(o.identityErr) {
			add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden, "%s", o.identityErr.Error())
			ready(metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, msg)
		} else {
			ready(metav1.ConditionFalse, kbindv1alpha1.ReasonPending, msg)
		}
		return withHeartbeat(out, o)
	}
	add(kbindv1alpha1.ConditionConnected, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "the provider cluster identity matches")

	switch {
	case o.discoveryErr != nil && apierrors.IsForbidden(o.discoveryErr):
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
		if refused := joinErrors(o.unreadable, apierrors.IsForbidden); refused != "" {
			add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden, "%s", refused)
		} else {
			add(kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, "identity and discovery are allowed")
		}
		ready(metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, msg)
	}
	return withHeartbeat(out, o)
}

// joinErrors joins the group errors keep selects (all when nil).
func joinErrors(errs []schema.GroupError, keep func(error) bool) string {
	var out []string
	for _, e := range errs {
		if keep == nil || keep(e.Err) {
			out = append(out, e.Error())
		}
	}
	return strings.Join(out, "; ")
}

// drainingReady is Ready of a deleting Connection that waits for the
// bindings still referencing it (CONN-7).
func drainingReady(draining []string) condition {
	return condition{kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings,
		fmt.Sprintf("waiting for %d binding(s) referencing this Connection to be deleted: %s", len(draining), strings.Join(draining, ", "))}
}

func withHeartbeat(out []condition, o observation) []condition {
	if o.schemaKnown {
		if len(o.lagging) == 0 {
			out = append(out, condition{kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
				"every consumer CRD supplied by this Connection carries the schema its policy calls for"})
		} else {
			out = append(out, condition{kbindv1alpha1.ConditionSchemaInSync, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
				fmt.Sprintf("%d consumer CRD(s) lag behind the provider schema: %s", len(o.lagging), strings.Join(o.lagging, ", "))})
		}
	}
	if !o.heartbeatKnown {
		return out
	}
	switch {
	case o.heartbeat == nil:
		out = append(out, condition{kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
			fmt.Sprintf("Lease %s is renewed every %s", o.leaseRef, o.leaseEvery)})
	case apierrors.IsForbidden(o.heartbeat):
		out = append(out, condition{kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, o.heartbeat.Error()})
	default:
		out = append(out, condition{kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, o.heartbeat.Error()})
	}
	return out
}

// isReady reports whether the decided conditions make the Connection Ready.
func isReady(conds []condition) bool {
	for _, c := range conds {
		if c.typ == kbindv1alpha1.ConditionReady {
			return c.status == metav1.ConditionTrue
		}
	}
	return false
}

// apply sets the decided conditions on the status, keeping transition times
// of unchanged ones (so an unchanged status is byte-identical and not
// written).
func apply(conds *[]metav1.Condition, decided []condition, generation int64) {
	for _, c := range decided {
		conditions.Set(conds, metav1.Condition{Type: string(c.typ), Status: c.status, Reason: string(c.reason), Message: c.message}, generation)
	}
}
