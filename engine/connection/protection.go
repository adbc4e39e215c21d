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

// This file is the deletion protection of Connections (BIND-4, issue #54,
// docs/connections.md#deletion-protection): a Connection being deleted
// whose spec.deletionProtection is true is held by the konnector's cleanup
// finalizer — its autoBind ClusterBinding is not deleted, no session is
// retired, no binding drained, its renewed-token Secret is kept — and
// works as a live one (session, heartbeat, renewal, exports) while the
// operator decides; Ready says DeletionProtected, what its deletion would
// take and the way forward. Turning protection off (a spec change: the
// Connection's update event) lets the deletion proceed as without it.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
)

// holdDeletion decides whether the konnector holds a Connection's
// deletion: it is being deleted, protected, and still carries the
// konnector's cleanup finalizer (what it holds it with).
func holdDeletion(deleting, protected, finalizer bool) bool {
	return deleting && protected && finalizer
}

// autoBindingOf names the autoBind ClusterBinding a deletion of conn would
// delete ("" when there is none it manages).
func (r *Reconciler) autoBindingOf(ctx context.Context, conn *kbindv1alpha1.Connection) (string, error) {
	if !conn.Spec.AutoBind {
		return "", nil
	}
	cb := &kbindv1alpha1.ClusterBinding{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: conn.Name}, cb); err != nil || !metav1.IsControlledBy(cb, conn) {
		return "", client.IgnoreNotFound(err)
	}
	return cb.Name, nil
}

// protectionNote says, after a binding's name in the list a deleting
// Connection waits for, how to let a protected binding go.
func protectionNote(b kbindv1alpha1.BindingObject) string {
	switch {
	case !b.BindingSpec().DeletionProtection:
		return ""
	case !b.GetDeletionTimestamp().IsZero():
		return " (its deletion is held by its spec.deletionProtection: set it to false to let the deletion proceed)"
	}
	return " (protected: set its spec.deletionProtection to false, then delete it)"
}

// heldReady is Ready of a Connection whose deletion is held: what the
// deletion would take (its autoBind ClusterBinding, the bindings it would
// wait for), that the Connection works as before (working, its own Ready
// message), and the way forward.
func heldReady(o observation, working patch.Condition) patch.Condition {
	state := "it works as before"
	if working.Status != metav1.ConditionTrue {
		state = fmt.Sprintf("it works as before, and is not ready: %s: %s", working.Reason, working.Message)
	}
	var would []string
	if o.autoBinding != "" {
		would = append(would, fmt.Sprintf("delete its autoBind ClusterBinding %s (which drains its objects' provider copies and may delete consumer CRDs, see its status.boundAPIs)", o.autoBinding))
	}
	if n := len(o.referencing); n > 0 {
		would = append(would, fmt.Sprintf("wait for the %d binding(s) referencing it to be deleted: %s", n, strings.Join(o.referencing, ", ")))
	}
	msg := "deletion held: spec.deletionProtection is true, so no binding is drained, no session retired and nothing deleted; " + state
	if len(would) > 0 {
		msg += "; its deletion would " + strings.Join(would, " and ")
	}
	msg += "; set spec.deletionProtection to false to let the deletion proceed (a Terminating Connection cannot be revived)"
	return cond(kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDeletionProtected, "%s", msg)
}

// heldBefore reports whether status already said the deletion is held.
func heldBefore(status kbindv1alpha1.ConnectionStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, string(kbindv1alpha1.ConditionReady))
	return c != nil && c.Reason == string(kbindv1alpha1.ReasonDeletionProtected)
}

// announceHeld records the Warning Event of a Connection whose deletion is
// now held: once, when Ready turns DeletionProtected, not at every
// reconcile.
func (r *Reconciler) announceHeld(conn *kbindv1alpha1.Connection) {
	c := meta.FindStatusCondition(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady))
	if r.Events == nil || c == nil {
		return
	}
	r.Events.Eventf(conn, nil, corev1.EventTypeWarning, string(kbindv1alpha1.ReasonDeletionProtected), "Delete", "%s", c.Message)
}
