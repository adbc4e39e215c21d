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

package backend_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/backendtest"
	"github.com/kbind/kbind/backend/liveness"
)

// TestTakenOverLeaseIsNeverReaped reproduces the takeover of the attack
// review: victim V (Namespace isolation, tenant namespace tenant-v) keeps
// its heartbeat Lease in its tenant namespace; tenant T, whose credentials
// may update Leases there, rewrites the Lease's holderIdentity and stops
// renewing it (V's konnector then refuses to touch it, so nothing renews
// it). With reaping on, after the stale window nothing of V is deleted:
// the Lease no longer counts for V. The takeover is reported once — a
// Warning Event on the Lease, the taken-over gauge, one log line naming
// both holders — and the gauge goes back to 0 once the Lease is gone.
// Consumer W, whose own Lease simply stops, is reaped by the same backend
// meanwhile: reaping works, only the taken-over Lease is not a reason. The
// dry run agrees.
func TestTakenOverLeaseIsNeverReaped(t *testing.T) {
	t.Parallel()
	const lease = "provider-cccccccc-3"
	ctx := context.Background()
	env := newEnv(t)
	victim, other := env.consumer("c"), env.consumer("d")
	tenantV, tenantW := env.name("tenant-v"), env.name("tenant-w")
	attackerName := env.name("tenant-t") // a user: RBAC grants to a name add up across tests
	env.Namespace(t, tenantV, "")        // the provider admin's, as under Namespace isolation
	isolatedCopy(t, env, tenantV, "team-a.w1", victim, "team-a", "w1")
	env.Lease(t, tenantV, lease, victim)
	env.Namespace(t, tenantW, "")
	isolatedCopy(t, env, tenantW, "team-a.w1", other, "team-a", "w1")
	env.Lease(t, tenantW, "provider-dddddddd-4", other)

	// T may read and update Leases in V's tenant namespace (a shared
	// namespace, or a Role granted too widely).
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenantV, Name: "leases"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantV, Name: "leases"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: attackerName}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leases"}},
	} {
		env.Create(t, obj)
	}
	attacker, err := client.New(env.AddUser(t, attackerName), client.Options{Scheme: backendtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	l := &coordinationv1.Lease{}
	if err := attacker.Get(ctx, client.ObjectKey{Namespace: tenantV, Name: lease}, l); err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To(attackerName)
	if err := attacker.Update(ctx, l); err != nil {
		t.Fatalf("the attacker taking over the Lease: %v", err)
	}

	// The dry run would reap W and nothing of V.
	var out bytes.Buffer
	if err := backend.DryRun(log.IntoContext(ctx, env.logger("dry-run")), env.Config, backend.Options{StaleAfter: window}, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, tenantW+"/team-a.w1 (consumer "+other+")") || strings.Contains(got, victim) {
		t.Errorf("dry run output:\n%s\nwant W's objects and nothing of V", got)
	}

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond})

	// The positive control: W is reaped within the window and a bit.
	// Stale a window after the start, deleted a reap grace (500ms,
	// startBackend) after being marked: window + grace + settle.
	backendtest.Eventually(t, window+500*time.Millisecond+settle, "W reaped", func() error {
		if found, _ := exists(t, env, widget("Widget"), tenantW, "team-a.w1"); found {
			return fmt.Errorf("W's copy still there")
		}
		return nil
	})
	// Well past V's stale window too: nothing of V goes.
	backendtest.Consistently(t, window, "nothing of the victim reaped", func() error {
		for _, o := range []struct {
			obj      client.Object
			ns, name string
		}{
			{widget("Widget"), tenantV, "team-a.w1"}, {&coordinationv1.Lease{}, tenantV, lease}, {&corev1.Namespace{}, "", tenantV},
		} {
			if found, terminating := exists(t, env, o.obj, o.ns, o.name); !found || terminating {
				return fmt.Errorf("V's %T %s/%s: found=%v terminating=%v", o.obj, o.ns, o.name, found, terminating)
			}
		}
		return nil
	})
	if n := events(t, env, tenantV, lease, liveness.ReasonReaping); n != 0 {
		t.Errorf("%d ReapingConsumer Events on the taken-over Lease", n)
	}
	if _, ok := staleSince(t, env, tenantV, lease); ok {
		t.Error("the taken-over Lease was judged (marked stale) for the victim")
	}

	// Reported, once: touching the Lease again adds no Event and no log line.
	for i := range 3 {
		l := &coordinationv1.Lease{}
		if err := attacker.Get(ctx, client.ObjectKey{Namespace: tenantV, Name: lease}, l); err != nil {
			t.Fatal(err)
		}
		renew := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &renew
		l.Spec.LeaseDurationSeconds = ptr.To(int32(60 + i))
		if err := attacker.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	backendtest.Eventually(t, settle, "the takeover reported", func() error {
		if n := events(t, env, tenantV, lease, liveness.ReasonTakenOver); n != 1 {
			return fmt.Errorf("%d %s Events on the Lease, want 1", n, liveness.ReasonTakenOver)
		}
		if v, ok := metricValue(t, "kbind_backend_heartbeat_leases_taken_over", map[string]string{"consumer_cluster_uid": victim}); !ok || v != 1 {
			return fmt.Errorf("kbind_backend_heartbeat_leases_taken_over{consumer_cluster_uid=%s} = %v (%v), want 1", victim, v, ok)
		}
		n := 0
		for _, line := range env.logLines() {
			if strings.Contains(line, "taken over") && strings.Contains(line, `"name"="`+lease+`"`) && !strings.Contains(line, "dry-run") {
				if !strings.Contains(line, `"consumerClusterUID"="`+victim+`"`) || !strings.Contains(line, `"holder"="`+attackerName+`"`) {
					return fmt.Errorf("the log line does not name both holders: %s", line)
				}
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("the takeover logged %d times, want once", n)
		}
		return nil
	})

	// Gone, the Lease leaves no series behind.
	if err := env.Client.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tenantV, Name: lease}}); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, settle, "the gauge back to 0", func() error {
		if v, ok := metricValue(t, "kbind_backend_heartbeat_leases_taken_over", map[string]string{"consumer_cluster_uid": victim}); ok && v != 0 {
			return fmt.Errorf("still %v", v)
		}
		return nil
	})
}
