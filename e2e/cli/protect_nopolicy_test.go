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

package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// TestBundleDeletedWithoutThePolicy is issue #54's "without the policy"
// case, as a new user meets it: the konnector runs outside the cluster
// (as the quickstart's does), so the chart's admission policy is not
// there, and `kubectl delete -f` of the bundle grant printed is accepted
// by the API server. The konnector's finalizers then hold the protected
// Connection and ClusterBinding: nothing is drained, every consumer object
// and provider copy stays (same UIDs) and the consumer CRD stays, for many
// binding resyncs, and both say DeletionProtected. Turning protection off
// lets the deletion the user asked for proceed, and nothing is left
// Terminating.
func TestBundleDeletedWithoutThePolicy(t *testing.T) {
	t.Parallel() // its own pair and konnector
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org")
	bundle := writeFile(t, "team-b.yaml", mustPlugin(t, "--kubeconfig", provider, "grant", "team-b", "--apis", "widgets.example.org"))
	kubectl(t, consumer, "apply", "-f", bundle)

	const resync = 2 * time.Second
	startKonnector(t, consumer, "--binding-resync", resync.String())
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "clusterbinding/provider", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "widgets.yaml", widget("default", "w1")+"---\n"+widget("default", "w2")))
	eventuallyGet(t, provider, "default/w1 on the provider", "widget", "-n", "kbind-team-b", "default.w1")
	eventuallyGet(t, provider, "default/w2 on the provider", "widget", "-n", "kbind-team-b", "default.w2")
	copies := jsonpath(t, provider, "{.items[*].metadata.uid}", "widgets", "-n", "kbind-team-b")
	objects := jsonpath(t, consumer, "{.items[*].metadata.uid}", "widgets", "-n", "default")
	crd := jsonpath(t, consumer, "{.metadata.uid}", "crd", "widgets.example.org")

	// (Namespace isolation, grant's default: the copies live in
	// kbind-team-b.)
	// The whole bundle, as a user would delete it: accepted (no policy).
	kubectl(t, consumer, "delete", "-f", bundle, "--wait=false")

	// Both protected objects say why they stay (the konnector reacts to
	// the deletion's own update event; 30 s is many resyncs).
	for _, obj := range []string{"connection/provider", "clusterbinding/provider"} {
		enginetest.EventuallyWithin(t, 30*time.Second, obj+" reports DeletionProtected", func() error {
			got := jsonpath(t, consumer, `{.metadata.deletionTimestamp} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}`, strings.Split(obj, "/")...)
			if f := strings.Fields(got); len(f) != 3 || f[1] != "False" || f[2] != "DeletionProtected" {
				return fmt.Errorf("deletionTimestamp, Ready, reason: %q", got)
			}
			return nil
		})
	}
	if msg := jsonpath(t, consumer, `{.status.conditions[?(@.type=="Ready")].message}`, "clusterbinding", "provider"); !strings.Contains(msg, "deletionProtection") {
		t.Errorf("the ClusterBinding's Ready message does not say how to go on: %q", msg)
	}

	// Held: for 10 binding resyncs nothing is drained nor deleted, on
	// either cluster.
	held := func() error {
		for _, c := range []struct{ what, before, now string }{
			{"provider copies", copies, jsonpath(t, provider, "{.items[*].metadata.uid}", "widgets", "-n", "kbind-team-b")},
			{"consumer objects", objects, jsonpath(t, consumer, "{.items[*].metadata.uid}", "widgets", "-n", "default")},
			{"consumer CRD", crd, jsonpath(t, consumer, "{.metadata.uid}", "crd", "widgets.example.org")},
		} {
			if c.now != c.before {
				return fmt.Errorf("%s: UIDs %q became %q", c.what, c.before, c.now)
			}
		}
		return nil
	}
	for deadline := time.Now().Add(10 * resync); time.Now().Before(deadline); {
		if err := held(); err != nil {
			t.Fatalf("a protected bundle's deletion without the policy changed what exists: %v", err)
		}
		<-time.After(resync / 2) // sampling the state while it must not change: no wait for a state
	}

	// Protection off: the deletion the user asked for proceeds, and
	// nothing is left behind or Terminating.
	kubectl(t, consumer, "patch", "clusterbinding", "provider", "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`)
	kubectl(t, consumer, "patch", "connection", "provider", "--type=merge", "-p", `{"spec":{"deletionProtection":false}}`)
	for _, gone := range [][]string{
		{consumer, "clusterbinding", "provider"}, {consumer, "connection", "provider"}, {consumer, "secret", "-n", "kbind", "provider-kubeconfig"},
		{consumer, "crd", "widgets.example.org"}, {provider, "widget", "-n", "kbind-team-b", "default.w1"}, {provider, "widget", "-n", "kbind-team-b", "default.w2"},
	} {
		enginetest.EventuallyWithin(t, 60*time.Second, strings.Join(gone[1:], " ")+" gone", func() error {
			if _, err := testenv.Kubectl(context.Background(), gone[0], append([]string{"get"}, gone[1:]...)...); err == nil || !strings.Contains(err.Error(), "NotFound") {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	}
}
