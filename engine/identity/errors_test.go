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

package identity_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/identity"
	"github.com/kbind/kbind/engine/test/testenv"
)

// stoppable hands out providers of a test's own, whose API server it stops.
var stoppable = testenv.ClusterPool("stoppable provider", testenv.ClusterOptions{})

// noKbindInternals fails when msg shows how kbind asked rather than what
// failed: kcp's API group (the kcp check's), a request path or query.
func noKbindInternals(t *testing.T, msg string) {
	t.Helper()
	for _, internal := range []string{"kcp", "/apis/", "/api/v1", "?timeout", `Get "`} {
		if strings.Contains(msg, internal) {
			t.Errorf("the error shows %q: %s", internal, msg)
		}
	}
}

// TestErrorWording: a refused credential is named as such whatever was
// asked; a request that got no answer says what the network said, not the
// request's URL; a failed kcp check is the provider's API discovery; an
// answer the API server refused keeps its words (a 403 names the user and
// what RBAC refuses).
func TestErrorWording(t *testing.T) {
	t.Parallel()
	const server = "https://provider.example:6443"
	refused := &url.Error{Op: "Get", URL: server + "/apis/core.kcp.io/v1alpha1?timeout=5s", Err: errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")}
	unauthorized := apierrors.NewUnauthorized("Unauthorized")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New(`User "u" cannot get resource "namespaces"`))
	cases := []struct {
		name string
		err  *identity.Error
		want string
	}{
		{"discovery unreachable", &identity.Error{Verb: "discover", Resource: "core.kcp.io/v1alpha1", Server: server, Err: refused},
			"reading the provider's API discovery at https://provider.example:6443: dial tcp 10.0.0.1:6443: connect: connection refused"},
		{"discovery, credential refused", &identity.Error{Verb: "discover", Resource: "core.kcp.io/v1alpha1", Server: server, Err: unauthorized},
			"the provider at https://provider.example:6443 refused the credential (401 Unauthorized): it is expired, revoked or not one this cluster accepts"},
		{"identity unreachable", &identity.Error{Verb: "get", Resource: "namespaces/kube-system", Server: server,
			Err: &url.Error{Op: "Get", URL: server + "/api/v1/namespaces/kube-system", Err: errors.New("net/http: TLS handshake timeout")}},
			"get namespaces/kube-system at https://provider.example:6443: net/http: TLS handshake timeout"},
		{"identity, credential refused", &identity.Error{Verb: "get", Resource: "namespaces/kube-system", Server: server, Err: unauthorized},
			"the provider at https://provider.example:6443 refused the credential (401 Unauthorized): it is expired, revoked or not one this cluster accepts"},
		{"identity forbidden", &identity.Error{Verb: "get", Resource: "namespaces/kube-system", Server: server, Err: forbidden},
			`get namespaces/kube-system: namespaces "kube-system" is forbidden: User "u" cannot get resource "namespaces"`},
		{"no server known", &identity.Error{Verb: "discover", Resource: "core.kcp.io/v1alpha1", Err: unauthorized},
			"the provider refused the credential (401 Unauthorized): it is expired, revoked or not one this cluster accepts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if !errors.Is(tc.err, tc.err.Err) {
				t.Error("the cause does not unwrap")
			}
		})
	}
}

// TestRefusedCredentialIsNamed: a provider that refuses the token says so
// — not "discover core.kcp.io/v1alpha1: Unauthorized" — and the error
// never carries the token.
func TestRefusedCredentialIsNamed(t *testing.T) {
	t.Parallel()
	cluster := shared.Get(t)
	const token = "kbind-test-refused-token-5f2c" //nolint:gosec // a made-up credential the API server refuses
	cfg := rest.CopyConfig(cluster.Config)
	cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, token
	r, err := identity.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ClusterUID(context.Background())
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("want a 401, got %v", err)
	}
	msg := err.Error()
	if want := "the provider at " + strings.TrimSuffix(cluster.Config.Host, "/") + " refused the credential (401 Unauthorized)"; !strings.Contains(msg, want) {
		t.Errorf("%q lacks %q", msg, want)
	}
	if strings.Contains(msg, token) {
		t.Errorf("the error carries the token: %s", msg)
	}
	noKbindInternals(t, msg)
}

// TestStoppedProviderIsNamed: with the provider's API server stopped, a
// new session's first read (the kcp check) says the provider's API
// discovery got no answer at its address, and a session that knows its
// provider is not kcp says which identity read got none; neither shows
// the kcp group or a request URL. A kubeconfig server URL with a user and
// password in it shows neither.
func TestStoppedProviderIsNamed(t *testing.T) {
	t.Parallel()
	cluster := stoppable.Take(t)
	ctx := context.Background()
	known, err := identity.NewReader(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := known.ClusterUID(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StopComponent(testenv.APIServer); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(cluster.Config.Host, "/")

	fresh, err := identity.NewReader(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fresh.ClusterUID(ctx)
	if err == nil {
		t.Fatal("read an identity from a stopped API server")
	}
	msg := err.Error()
	if want := "reading the provider's API discovery at " + host + ": "; !strings.HasPrefix(msg, want) || !strings.Contains(msg, "connection refused") {
		t.Errorf("%q: want %q… connection refused", msg, want)
	}
	noKbindInternals(t, msg)

	_, err = known.ClusterUID(ctx)
	if err == nil {
		t.Fatal("read an identity from a stopped API server")
	}
	msg = err.Error()
	if want := "get namespaces/kube-system at " + host + ": "; !strings.HasPrefix(msg, want) || !strings.Contains(msg, "connection refused") {
		t.Errorf("%q: want %q… connection refused", msg, want)
	}
	noKbindInternals(t, msg)

	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("someone", "hunter2-secret")
	withUser := rest.CopyConfig(cluster.Config)
	withUser.Host = u.String()
	r, err := identity.NewReader(withUser)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = r.ClusterUID(ctx); err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "someone") {
		t.Errorf("the server URL's user or password shows: %v", err)
	}
}
