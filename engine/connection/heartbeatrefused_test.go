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
	ctx := context.Background()
	user, err := pair.Provider.AddUser("kbind-no-leases", "kbind:no-leases")
	if err != nil {
		t.Fatal(err)
	}
	defer grantProvider(t, "no-leases-identity", user.Name, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}})()
	defer grantProvider(t, "no-leases-crds", user.Name, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list", "watch"}})()
	createSecret(t, secretNS, "no-leases", map[string][]byte{"kubeconfig": kubeconfigOf(t, user.Config)})
	createConnection(t, "no-leases", secretNS, "no-leases")

	waitCondition(t, "no-leases", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "leases.coordination.k8s.io")
	waitCondition(t, "no-leases", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	eventually(t, "a Warning Event on the Connection quoting the refusal", func() error {
		var events corev1.EventList
		if err := consumer.List(ctx, &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "no-leases" && e.InvolvedObject.Kind == "Connection" && e.Type == corev1.EventTypeWarning &&
				e.Reason == string(kbindv1alpha1.ReasonForbidden) && strings.Contains(e.Message, "heartbeat Lease renewal fails") &&
				strings.Contains(e.Message, "leases.coordination.k8s.io") {
				return nil
			}
		}
		return errors.New("no Warning Event about the refused heartbeat")
	})
	// Ready stays: the renewals go on failing (retried with backoff).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		conn := &kbindv1alpha1.Connection{}
		if err := consumer.Get(ctx, client.ObjectKey{Name: "no-leases"}, conn); err != nil {
			t.Fatal(err)
		}
		if !apimeta.IsStatusConditionTrue(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)) {
			t.Fatalf("Ready changed while the heartbeat is refused: %+v", conn.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
