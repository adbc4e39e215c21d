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
	"net/http"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/identity"
)

// paths records the request paths a rest.Config's transport carries.
type paths struct {
	mu   sync.Mutex
	seen []string
}

func (p *paths) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		p.mu.Lock()
		p.seen = append(p.seen, req.URL.Path)
		p.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestClusterUIDAsksDiscoveryOnce: the identity is kube-system's UID, and
// reading it again through the same Reader is one request (whether the
// cluster is kcp is asked once).
func TestClusterUIDAsksDiscoveryOnce(t *testing.T) {
	t.Parallel()
	cluster := shared.Get(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &paths{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = p.wrap
	r, err := identity.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		uid, err := r.ClusterUID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if uid != string(ns.UID) {
			t.Errorf("identity %s, want kube-system's UID %s", uid, ns.UID)
		}
	}
	want := []string{"/apis/core.kcp.io/v1alpha1", "/api/v1/namespaces/kube-system", "/api/v1/namespaces/kube-system", "/api/v1/namespaces/kube-system"}
	if len(p.seen) != len(want) {
		t.Fatalf("requests %v, want %v", p.seen, want)
	}
	for i := range want {
		if p.seen[i] != want[i] {
			t.Errorf("request %d: %s, want %s", i, p.seen[i], want[i])
		}
	}
}
