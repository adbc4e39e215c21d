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

package faults

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/e2e/harness"
)

// reaperRenewalsRefused (issue #52, path 4): the provider refuses the
// konnector's heartbeat Lease renewals (a ValidatingAdmissionPolicy, as a
// webhook on Leases would) while sync goes on, and the backend runs with
// its reaper on, a short stale window and grace period. The backend judges
// the consumer stale and marks its copies; the konnector clears every mark
// while it syncs, so nothing is deleted — the suite's invariants (0 lost)
// and the backend's own log say so. The Connection stays Ready and reports
// the refusal on its Heartbeat condition and a Warning Event.
func reaperRenewalsRefused() scenario {
	const policy = "faults-refuse-lease-renewals"
	// The backend's windows (its flags below). Renewals are refused for
	// long enough that the backend judges the consumer stale
	// (staleAfter) and goes twice through a round of marking, waiting
	// out the grace and reaping (reapInterval + reapGrace each): two
	// rounds in which a mark the konnector failed to clear would have
	// been acted on. 45 s (it was 75 s, with no formula).
	const (
		staleAfter   = 5 * time.Second
		reapGrace    = 15 * time.Second
		reapInterval = 5 * time.Second
		refusedFor   = staleAfter + 2*(reapInterval+reapGrace)
	)
	var backend *harness.Process
	var logPath string
	return scenario{
		name: "lease-renewals-refused-with-reaper", objects: 200, lasts: refusedFor, ready: readyBound, converge: convergeBound,
		setup: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			dir := t.TempDir()
			bin := filepath.Join(dir, "backend")
			must(t, harness.Build(ctx, bin, "github.com/kbind/kbind/backend/cmd/backend"))
			logs, err := os.MkdirTemp("", "kbind-faults-")
			must(t, err)
			logPath = filepath.Join(logs, "backend.log")
			backend, err = harness.NewProcess(bin, logPath, "--kubeconfig", e.pair.Provider.KubeconfigPath, "--namespace", "default",
				"--reap", "--stale-after", staleAfter.String(), "--reap-grace", reapGrace.String(), "--reap-interval", reapInterval.String(), "--metrics-bind-address", "0")
			must(t, err)
			must(t, backend.Start(ctx))
			return func() {
				backend.Stop(ctx)
				// The clean-up deleted every Widget through the live
				// konnector: the reaper must not have deleted a copy or a
				// related copy of it, then or before. Its empty namespace
				// and Lease may go once no copy is left and its Lease looks
				// stale (staleAfter is shorter than the heartbeat interval
				// here): the documented limit (docs/backend.md), which the
				// konnector recovers from at its next renewal.
				if data, err := os.ReadFile(logPath); err == nil {
					data, empty := reapedData(string(data))
					for _, d := range data {
						t.Errorf("the backend deleted an object of a live consumer (during the scenario or its clean-up): %s (%s)", d, logPath)
					}
					for _, d := range empty {
						t.Logf("the backend deleted %s of the consumer, whose copies were all gone (the documented limit)", d)
					}
				}
				if !t.Failed() {
					_ = os.RemoveAll(logs)
				} else {
					t.Logf("backend log: %s", logPath)
				}
			}
		},
		inject: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			must(t, e.provider.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: policy},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
					MatchConstraints: &admissionregistrationv1.MatchResources{
						ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}},
						ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
							Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
							Rule:       admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"}},
						}}},
					},
					// A renewal changes renewTime; the backend's own
					// annotation of the Lease does not, and goes through.
					Validations: []admissionregistrationv1.Validation{{
						Expression: "!has(object.spec.renewTime) || !has(oldObject.spec.renewTime) || object.spec.renewTime == oldObject.spec.renewTime",
						Message:    "heartbeat renewals are refused (fault suite)",
					}},
				},
			}))
			must(t, e.provider.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				ObjectMeta: metav1.ObjectMeta{Name: policy},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy,
					ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
			}))
			return func() {
				must(t, client.IgnoreNotFound(e.provider.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy}})))
				must(t, client.IgnoreNotFound(e.provider.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}})))
			}
		},
		check: func(t *testing.T, e *env) {
			ctx := context.Background()
			data, err := os.ReadFile(logPath)
			must(t, err)
			log := string(data)
			if !strings.Contains(log, "Marked the stale consumer's copies") {
				t.Errorf("the backend never judged the consumer stale and marked its copies (the fault did not bite): %s", logPath)
			}
			if strings.Contains(log, "Deleted an object of a stale consumer") {
				t.Errorf("the backend deleted objects of a live consumer whose renewals were refused: %s", logPath)
			}
			var events corev1.EventList
			must(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				if err := e.consumer.List(ctx, &events); err != nil {
					return false, nil
				}
				for _, ev := range events.Items {
					if ev.InvolvedObject.Kind == "Connection" && ev.InvolvedObject.Name == connectionName && ev.Type == corev1.EventTypeWarning &&
						strings.Contains(ev.Message, "heartbeat Lease renewal fails") {
						return true, nil
					}
				}
				return false, nil
			}))
		},
	}
}

// reapedData splits the backend log's "Deleted an object of a stale
// consumer" lines into the deletes of data (copies, related copies) and
// those of a consumer's namespaces and heartbeat Leases, each as
// "resource namespace/name".
func reapedData(log string) (data, empty []string) {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "Deleted an object of a stale consumer") {
			continue
		}
		var entry struct{ Resource, Namespace, Name string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			data = append(data, "an unparsed log line: "+line)
			continue
		}
		what := entry.Resource + " " + entry.Namespace + "/" + entry.Name
		if entry.Resource == "namespaces" || entry.Resource == "leases.coordination.k8s.io" {
			empty = append(empty, what)
			continue
		}
		data = append(data, what)
	}
	return data, empty
}

// TestReapedData reads the backend's log lines as it writes them (the
// controller's own namespace and name come first, the deleted object's
// last): a copy is data, a namespace or Lease is not.
func TestReapedData(t *testing.T) {
	log := `{"level":"info","msg":"Deleted an object of a stale consumer","controller":"liveness","namespace":"","name":"uid-1","resource":"widgets.example.org","namespace":"f-x","name":"w-00415"}
{"level":"info","msg":"Marked the stale consumer's copies"}
{"level":"info","msg":"Deleted an object of a stale consumer","controller":"liveness","namespace":"","name":"uid-1","resource":"leases.coordination.k8s.io","namespace":"kbind","name":"provider-uid-1"}
{"level":"info","msg":"Deleted an object of a stale consumer","controller":"liveness","namespace":"","name":"uid-1","resource":"namespaces","namespace":"","name":"kbind"}`
	data, empty := reapedData(log)
	if len(data) != 1 || data[0] != "widgets.example.org f-x/w-00415" {
		t.Errorf("data = %q, want the one copy", data)
	}
	if len(empty) != 2 || empty[0] != "leases.coordination.k8s.io kbind/provider-uid-1" || empty[1] != "namespaces /kbind" {
		t.Errorf("empty = %q, want the Lease and the namespace", empty)
	}
}
