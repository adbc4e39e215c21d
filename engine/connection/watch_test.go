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
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// slowPolling is an engine that re-reads nothing on a timer within a
// test's time: discovery every 10 minutes, identity and the direct list
// of the exports every 10 minutes. Whatever it notices within seconds, it
// noticed through a watch or its heartbeat.
func slowPolling(o *engine.Options) {
	o.DiscoveryInterval, o.RecheckInterval = 10*time.Minute, 10*time.Minute
}

// connectOn creates, on consumer c, the kubeconfig Secret and a Connection
// (schema source CRD) named name, and waits until it is Ready.
func connectOn(t *testing.T, c client.Client, name string, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNS, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.ConnectionSpec{
			KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: secretNS, Name: name},
			Schema:              kbindv1alpha1.SchemaPolicy{Source: kbindv1alpha1.SchemaSourceCRD}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.WaitCondition(t, c, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}},
		kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

// waitExports waits until the Connection's exportedAPIs are exactly want
// ("name" or "name:version,version").
func waitExports(t *testing.T, c client.Client, name string, want ...string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("exports %v", want), func() error {
		conn := &kbindv1alpha1.Connection{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
			return err
		}
		var got []string
		for _, e := range conn.Status.ExportedAPIs {
			got = append(got, e.Name+":"+strings.Join(e.Versions, ","))
		}
		for i, w := range want {
			if !strings.Contains(w, ":") {
				want[i] = w + ":v1alpha1"
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return fmt.Errorf("exports %v", got)
		}
		return nil
	})
}

// TestDiscoveryFollowsTheWatch: with nothing polled within the test, a
// provider CRD that is exported, changed, unlabelled or deleted shows in
// the Connection's exports within seconds — through the watch of the
// exported CRDs, which is also how an idle Connection reads them without
// a request.
//
// A consumer and an engine of its own (slowPolling), and a provider of its
// own (it adds and deletes CRDs).
func TestDiscoveryFollowsTheWatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other, oc := ownProvider(t, widgetCRD("widgets", "example.org", true))
	cc, c := ownConsumer(t)
	env.StartEngineOn(t, cc.Config, slowPolling)
	connectOn(t, c, "watched", other.Kubeconfig)
	waitExports(t, c, "watched", "widgets.example.org")

	// Added.
	gadgets := widgetCRD("gadgets", "example.org", true)
	if err := oc.Create(ctx, gadgets); err != nil {
		t.Fatal(err)
	}
	waitExports(t, c, "watched", "gadgets.example.org", "widgets.example.org")

	// Changed: a second served version.
	enginetest.Eventually(t, "gadgets v1beta1 added", func() error {
		if err := oc.Get(ctx, client.ObjectKeyFromObject(gadgets), gadgets); err != nil {
			return err
		}
		v := *gadgets.Spec.Versions[0].DeepCopy()
		v.Name, v.Storage = "v1beta1", false
		gadgets.Spec.Versions = append(gadgets.Spec.Versions, v)
		return oc.Update(ctx, gadgets)
	})
	waitExports(t, c, "watched", "gadgets.example.org:v1alpha1,v1beta1", "widgets.example.org")

	// Unlabelled.
	enginetest.Eventually(t, "gadgets unlabelled", func() error {
		if err := oc.Get(ctx, client.ObjectKeyFromObject(gadgets), gadgets); err != nil {
			return err
		}
		delete(gadgets.Labels, kbindv1alpha1.ExportedLabel)
		return oc.Update(ctx, gadgets)
	})
	waitExports(t, c, "watched", "widgets.example.org")

	// Deleted: the last export goes (and with it the exports list).
	if err := oc.Delete(ctx, widgetCRD("widgets", "example.org", true)); err != nil {
		t.Fatal(err)
	}
	waitExports(t, c, "watched")
}

// TestUnreachableNoticedByTheHeartbeat: with the identity re-read only every
// 10 minutes, a provider that stops answering is still reported within
// seconds (the failed heartbeat re-reads the identity at once), and the
// Connection is Ready again once it answers.
//
// A consumer and an engine of its own (slowPolling); the provider is the
// shared one, behind a proxy of the test's own.
func TestUnreachableNoticedByTheHeartbeat(t *testing.T) {
	t.Parallel()
	cc, c := ownConsumer(t)
	proxy := enginetest.NewProxy(t, pair.Provider.Config)
	env.StartEngineOn(t, cc.Config, slowPolling)
	connectOn(t, c, "flaky", proxy.Kubeconfig(t))

	proxy.SetFault(func(*http.Request) enginetest.Fault { return enginetest.Fault{Status: http.StatusServiceUnavailable} })
	start := time.Now()
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "flaky"}}
	enginetest.WaitCondition(t, c, conn, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, "unable to handle the request")
	t.Logf("unreachable reported after %s", time.Since(start).Round(100*time.Millisecond))

	proxy.SetFault(nil)
	start = time.Now()
	enginetest.WaitCondition(t, c, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	t.Logf("Ready again after %s", time.Since(start).Round(100*time.Millisecond))
}
