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

package syncer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// syncerReady reads kbind_syncer_ready{connection, api} as the konnector
// serves it; ok is false when there is no such series. (A registry of its
// own: the package's tests run several konnectors, whose collectors of
// other metrics repeat series in the shared one.)
func syncerReady(t *testing.T, connection, api string) (value float64, ok bool) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.SyncerReady)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kbind_syncer_ready" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["connection"] == connection && labels["api"] == api {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// kbind_syncer_ready (what KbindSyncerNotReady alerts on) is 0 while a
// bound API's syncer cannot start — here the provider refuses the
// Connection's credentials the list — also between its restarts, 1 once it
// runs, and gone once the API is unbound.
func TestSyncerReadyMetric(t *testing.T) {
	parallelEnv(t)
	ctx := context.Background()
	// The API and the Connection are the test's own: so is the series.
	gaugeGVK, gauges := namespacedAPI(t, "Gauge", "gauge.example.org")
	connection := unique("nolist")
	user := addUser(t, "kbind-nolist", "kbind:nolist")
	base := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{gaugeGVK.Group}, Resources: []string{"gauges"}, Verbs: []string{"get"}},
	}
	enginetest.Grant(t, env.Provider, user.Name, user.Name, base...)
	kc, err := testenv.KubeconfigFor(connection, user.Config)
	if err != nil {
		t.Fatal(err)
	}
	connectAs(t, connection, kc)
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: gauges}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: connection},
		APIs:          []kbindv1alpha1.APIReference{{Name: gauges}}}}
	if err := env.Consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	api := gaugeGVK.Kind + "." + gaugeGVK.Group

	// The syncer failed (the refusal is reported) and waits to restart:
	// the series is there, at 0.
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"the provider refuses this Connection's credentials the list of Gauge objects")
	enginetest.Eventually(t, "kbind_syncer_ready 0 after the refusal", func() error {
		if v, ok := syncerReady(t, connection, api); !ok || v != 0 {
			return fmt.Errorf("kbind_syncer_ready = %v (present: %v)", v, ok)
		}
		return nil
	})
	// Through the restarts that follow (each probes for 5 s, then waits 1 s,
	// 2 s …) it never goes away: a gap would reset the alert's `for`.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if v, ok := syncerReady(t, connection, api); !ok || v != 0 {
			t.Fatalf("kbind_syncer_ready = %v (present: %v) while the list is refused", v, ok)
		}
	}

	// Granted: the syncer starts on its next retry.
	enginetest.Grant(t, env.Provider, user.Name+"-gauges", user.Name,
		rbacv1.PolicyRule{APIGroups: []string{gaugeGVK.Group}, Resources: []string{"gauges"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	enginetest.EventuallyWithin(t, 2*enginetest.PollTimeout, "kbind_syncer_ready 1 once granted", func() error {
		if v, ok := syncerReady(t, connection, api); !ok || v != 1 {
			return fmt.Errorf("kbind_syncer_ready = %v (present: %v)", v, ok)
		}
		return nil
	})

	// Unbound: no series.
	if err := env.Consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "no kbind_syncer_ready once unbound", func() error {
		if v, ok := syncerReady(t, connection, api); ok {
			return fmt.Errorf("kbind_syncer_ready = %v", v)
		}
		return nil
	})
}
