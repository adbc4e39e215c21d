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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/testenv"
)

// A provider that does not answer, or refuses the credential, is reported
// in kbind's words (issue #54): what failed, at which address — never
// "discover core.kcp.io/v1alpha1: …", the kcp check every new session
// makes first, nor a request URL — and never the credential. Conditions,
// the Connection's Events and the engine's log lines about it alike.
func TestProviderErrorsNameWhatFailed(t *testing.T) {
	t.Parallel()
	useShared(t)

	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		stopped, _ := ownProvider(t)
		if err := stopped.StopComponent(testenv.APIServer); err != nil {
			t.Fatal(err)
		}
		name := unique("provider-stopped")
		createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": stopped.Kubeconfig})
		createConnection(t, name, secretNS, name)
		what := "reading the provider cluster identity failed: reading the provider's API discovery at " + strings.TrimSuffix(stopped.Config.Host, "/") + ": "
		conn := waitCondition(t, name, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, what, "connection refused")
		waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, what, "connection refused")
		assertNoProviderInternals(t, conn, "")
	})

	t.Run("credential refused", func(t *testing.T) {
		t.Parallel()
		const token = "kbind-refused-token-MARKER-91c4" //nolint:gosec // a made-up credential the provider refuses
		cfg := rest.CopyConfig(pair.Provider.Config)
		cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, token
		name := unique("provider-refuses")
		createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, cfg)})
		createConnection(t, name, secretNS, name)
		what := "the provider at " + strings.TrimSuffix(pair.Provider.Config.Host, "/") + " refused the credential (401 Unauthorized)"
		conn := waitCondition(t, name, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, what)
		waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, what)
		assertNoProviderInternals(t, conn, token)
	})
}

// assertNoProviderInternals fails when the Connection's conditions, its
// Events or the engine log lines naming it show kcp's API group, a request
// URL, or secret ("" for none).
func assertNoProviderInternals(t *testing.T, conn *kbindv1alpha1.Connection, secret string) {
	t.Helper()
	check := func(where, text string) {
		for _, bad := range []string{"kcp", "/apis/", "/api/v1", "?timeout"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s shows %q: %s", where, bad, text)
			}
		}
		if secret != "" && strings.Contains(text, secret) {
			t.Errorf("%s shows the credential: %s", where, text)
		}
	}
	for _, c := range conn.Status.Conditions {
		check("condition "+c.Type, c.Message)
	}
	var events corev1.EventList
	if err := consumer.List(context.Background(), &events, client.MatchingFields{"involvedObject.name": conn.Name}); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		check("Event "+e.Reason, e.Message)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"`+conn.Name+`"`) {
			check("log line", line)
		}
	}
}
