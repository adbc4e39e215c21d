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
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kbind/kbind/engine/credentials"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// TestGrantedTokenRenews: a consumer onboarded with `kubectl kbind grant`
// keeps syncing across its token's expiry. The bundle's token is swapped
// for one of 30 s of the same ServiceAccount (signed with the test API
// server's key: TokenRequest issues nothing under 10 minutes), so the real
// konnector renews it within seconds — through exactly the RBAC and
// admission policy grant installed — and goes on syncing after the first
// token is refused. `kubectl kbind consumers` shows it renewing; revoke
// cuts it off at the next request. The first token is bound to a Secret
// the test deletes once the token has expired, so that the provider
// refuses it then, not a minute later (the API server's leeway).
func TestGrantedTokenRenews(t *testing.T) {
	t.Parallel() // its own pair (and konnector): a consumer identity of its own
	ctx := context.Background()
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org")
	bundle := writeFile(t, "team-r.yaml", mustPlugin(t, "--kubeconfig", provider, "grant", "team-r", "--apis", "widgets.example.org", "--duration", "1h"))
	kubectl(t, consumer, "apply", "-f", bundle)

	// The same kubeconfig, with a 30 s token of the granted ServiceAccount.
	first, revokeFirst, err := pair.Provider.RevocableServiceAccountToken(ctx, "kbind", "kbind-consumer-team-r", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load([]byte(decode(t, kubectl(t, consumer, "get", "secret", "-n", "kbind", "provider-kubeconfig", "-o", "jsonpath={.data.kubeconfig}"))))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range kc.AuthInfos {
		u.Token = first
	}
	short, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, consumer, "delete", "secret", "-n", "kbind", "provider-kubeconfig")
	kubectl(t, consumer, "create", "secret", "generic", "provider-kubeconfig", "-n", "kbind", "--from-file=kubeconfig="+writeFile(t, "short.kubeconfig", string(short)))
	firstExp := credentials.FromToken(first).ExpiresAt

	startKonnector(t, consumer)
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "w1.yaml", widget("default", "w1")))
	eventuallyGet(t, provider, "default/w1 on the provider", "widget", "-n", "kbind-team-r", "default.w1")

	// Renewed through grant's RBAC and token policy, before the first token expires.
	var renewedAt time.Time
	enginetest.EventuallyWithin(t, time.Minute, "the konnector renewed its token", func() error {
		src := kubectl(t, consumer, "get", "connection", "provider", "-o", `jsonpath={.status.credentials.source} {.status.conditions[?(@.type=="CredentialsRenewed")].message}`)
		if !strings.HasPrefix(src, "Renewed ") {
			return fmt.Errorf("credentials: %s", src)
		}
		renewedAt = time.Now()
		return nil
	})
	if !renewedAt.Before(firstExp) {
		t.Errorf("renewed at %s, after the first token expired at %s", renewedAt.Format(time.RFC3339), firstExp.Format(time.RFC3339))
	}
	renewed := decode(t, kubectl(t, consumer, "get", "secret", "-n", "kbind", "provider-kbind-token", "-o", "jsonpath={.data.token}"))
	if got := credentials.FromToken(renewed); got.Subject != "system:serviceaccount:kbind:kbind-consumer-team-r" || got.Lifetime() != credentials.MinTokenLifetime {
		t.Errorf("renewed token: %s, lifetime %v", got.Describe(), got.Lifetime())
	}

	// Past the first token's expiry the provider refuses it (revoked then,
	// rather than after the API server's one-minute leeway); the konnector
	// syncs on.
	cs, err := kubernetes.NewForConfig(tokenOnly(t, pair.Provider.Config.Host, pair.Provider.Config.CAData, first))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyWithin(t, time.Until(firstExp)+5*time.Second, "past the first token's expiry", func() error {
		if now := time.Now(); !now.After(firstExp) {
			return fmt.Errorf("it is %s, the first token expires at %s", now.Format(time.RFC3339), firstExp.Format(time.RFC3339))
		}
		return nil
	})
	if err := revokeFirst(ctx); err != nil {
		t.Fatal(err)
	}
	// The API server caches an accepted token for 10 s.
	enginetest.EventuallyWithin(t, time.Minute, "the first token refused", func() error {
		if _, err := cs.Discovery().ServerVersion(); err == nil {
			return errors.New("still accepted")
		}
		return nil
	})
	refusedAt := time.Now()
	kubectl(t, consumer, "apply", "-f", writeFile(t, "w2.yaml", widget("default", "w2")))
	eventuallyGet(t, provider, "default/w2 synced after the first token expired", "widget", "-n", "kbind-team-r", "default.w2")
	syncedAt := time.Now()
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "--timeout=10s")
	t.Logf("first token expires %s; renewed by %s; refused by the provider from %s; w2 created after that and synced by %s",
		firstExp.Format(time.RFC3339), renewedAt.Format(time.RFC3339), refusedAt.Format(time.RFC3339), syncedAt.Format(time.RFC3339))

	// The provider's view.
	out := mustPlugin(t, "--kubeconfig", provider, "consumers")
	t.Logf("$ kubectl kbind consumers\n%s", out)
	if !strings.Contains(out, "team-r") || !strings.Contains(out, "renews") || !strings.Contains(out, "connected") {
		t.Errorf("consumers does not show team-r connected and renewing:\n%s", out)
	}
	var list struct {
		Consumers []struct {
			Name              string   `json:"name"`
			Status            string   `json:"status"`
			KonnectorVersions []string `json:"konnectorVersions"`
			Token             struct {
				Kind   string `json:"kind"`
				Renews bool   `json:"renews"`
			} `json:"token"`
		} `json:"consumers"`
	}
	if err := json.Unmarshal([]byte(mustPlugin(t, "--kubeconfig", provider, "consumers", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Consumers) != 1 || list.Consumers[0].Name != "team-r" || list.Consumers[0].Status != "connected" ||
		!list.Consumers[0].Token.Renews || list.Consumers[0].Token.Kind != "ServiceAccountToken" || len(list.Consumers[0].KonnectorVersions) != 1 {
		t.Errorf("consumers -o json: %+v", list.Consumers)
	}

	// Revoke: every token of the ServiceAccount is dead, the heartbeat
	// refused at its next renewal.
	mustPlugin(t, "--kubeconfig", provider, "revoke", "team-r")
	enginetest.EventuallyWithin(t, 30*time.Second, "the heartbeat refused after revoke", func() error {
		hb := kubectl(t, consumer, "get", "connection", "provider", "-o", `jsonpath={.status.conditions[?(@.type=="Heartbeat")].status}`)
		if hb != "False" {
			return fmt.Errorf("Heartbeat=%s", hb)
		}
		return nil
	})
}

// tokenOnly is a client configuration authenticating with token alone.
func tokenOnly(t *testing.T, host string, ca []byte, token string) *rest.Config {
	t.Helper()
	return &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}
