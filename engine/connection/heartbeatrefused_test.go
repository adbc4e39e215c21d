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
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// TestHeartbeatRefusedIsReported (issue #52, path 4): Lease renewals
// refused by the provider (RBAC narrowed) while everything else works: the
// Connection says Heartbeat=False with the refusal and a Warning Event, and
// stays Ready — a heartbeat error never makes a healthy sync fail.
func TestHeartbeatRefusedIsReported(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("no-leases")
	user, err := addProviderUser("kbind-"+name, "kbind:"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer grantProvider(t, name+"-identity", user.Name, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}})()
	defer grantProvider(t, name+"-crds", user.Name, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list", "watch"}})()
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, user.Config)})
	createConnection(t, name, secretNS, name)

	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "leases.coordination.k8s.io")
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	eventually(t, "a Warning Event on the Connection quoting the refusal", func() error {
		var events corev1.EventList
		if err := consumer.List(ctx, &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == "Connection" && e.Type == corev1.EventTypeWarning &&
				e.Reason == string(kbindv1alpha1.ReasonForbidden) && strings.Contains(e.Message, "heartbeat Lease renewal fails") &&
				strings.Contains(e.Message, "leases.coordination.k8s.io") {
				return nil
			}
		}
		return errors.New("no Warning Event about the refused heartbeat")
	})
	// Ready stays: the renewals go on failing (retried with backoff). The
	// window is 3 × HeartbeatInterval (1 s in enginetest): a busy machine
	// only makes it see fewer retries, never fail one.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		conn := &kbindv1alpha1.Connection{}
		if err := consumer.Get(ctx, client.ObjectKey{Name: name}, conn); err != nil {
			t.Fatal(err)
		}
		if !apimeta.IsStatusConditionTrue(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)) {
			t.Fatalf("Ready changed while the heartbeat is refused: %+v", conn.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
