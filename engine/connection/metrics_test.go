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

package connection_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// timeToReady is kbind_connection_time_to_ready_seconds as the konnector
// serves it: how many Connections it observed, and their total seconds.
func timeToReady(t *testing.T) (uint64, float64) {
	t.Helper()
	for _, m := range enginetest.Series(t, "kbind_connection_time_to_ready_seconds", nil) {
		h := m.GetHistogram()
		return h.GetSampleCount(), h.GetSampleSum()
	}
	return 0, 0
}

// renewals is kbind_credentials_renewals_total{connection, result} as the
// konnector serves it; ok is false when there is no such series.
func renewals(t *testing.T, connection, result string) (value float64, ok bool) {
	t.Helper()
	for _, m := range enginetest.Series(t, "kbind_credentials_renewals_total", map[string]string{"connection": connection, "result": result}) {
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// TestTimeToReady: a Connection that becomes Ready for the first time is
// observed once, with its age; further reconciles, and a konnector
// restart that finds it Ready, observe nothing.
//
// Not parallel: the histogram has no labels, so any other Connection
// turning Ready meanwhile (every engine of the process observes into the
// same registry) would be counted; and it restarts the shared engine,
// which only a test running alone may do.
func TestTimeToReady(t *testing.T) {
	useShared(t)
	ctx := context.Background()
	name := unique("timed")
	count, sum := timeToReady(t)
	// Not Ready at first (no Secret yet): the time to Ready includes that.
	createConnection(t, name, secretNS, name+"-kubeconfig")
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
	createSecret(t, secretNS, name+"-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	readyAt := apimeta.FindStatusCondition(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)).LastTransitionTime.Time
	age := readyAt.Sub(conn.CreationTimestamp.Time).Seconds()
	enginetest.Eventually(t, "the time to Ready observed", func() error {
		if n, _ := timeToReady(t); n != count+1 {
			return fmt.Errorf("%d observation(s), want %d", n, count+1)
		}
		return nil
	})
	// Both timestamps are in whole seconds.
	if _, s := timeToReady(t); s-sum < age-1 || s-sum > age+2 {
		t.Errorf("observed %.2f s, want about %.0f s (creation %s, Ready %s)", s-sum, age, conn.CreationTimestamp, readyAt)
	}

	// A restarted konnector finds it Ready: nothing more observed, by the
	// first reconcile or the later ones (a spec change makes one that
	// must have run once the Ready condition has its generation).
	env.StopEngine()
	if err := env.StartEngine(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	enginetest.Eventually(t, "the heartbeat renewed after the restart", func() error {
		var leases coordinationv1.LeaseList
		if err := provider.List(ctx, &leases, client.InNamespace("kbind")); err != nil {
			return err
		}
		for _, l := range leases.Items {
			if l.Name == name+"-"+conn.Status.LocalClusterUID[:10] && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(restarted) {
				return nil
			}
		}
		return fmt.Errorf("not renewed since the restart")
	})
	enginetest.Eventually(t, "a spec change", func() error {
		c := getConnection(t, name)
		c.Spec.NamespacedBindings = enginetest.AdmitAllNamespaces()
		return consumer.Update(ctx, c)
	})
	enginetest.Eventually(t, "Ready at the new generation", func() error {
		c := getConnection(t, name)
		if r := apimeta.FindStatusCondition(c.Status.Conditions, string(kbindv1alpha1.ConditionReady)); r == nil || r.Status != metav1.ConditionTrue || r.ObservedGeneration != c.Generation {
			return fmt.Errorf("Ready %+v at generation %d", r, c.Generation)
		}
		return nil
	})
	if n, _ := timeToReady(t); n != count+1 {
		t.Errorf("%d observation(s) after the restart, want still %d", n, count+1)
	}
}
