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

package enginetest

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/test/testenv"
)

// Fault decides what the Proxy does with a request: a non-zero status is
// answered at once with that status instead of forwarding, a delay holds
// the request first (until the client gives up, at most delay), Abort
// resets the request's stream without an answer (the client sees a
// transport error, as when a connection is reset after the request left:
// a write in doubt), Reply answers with that API status (its code and
// JSON body, as an API server answers), and a zero Fault forwards it.
type Fault struct {
	Status int
	Delay  time.Duration
	Abort  bool
	Reply  *metav1.Status
}

// Proxy is an HTTPS reverse proxy in front of a real API server, for tests
// that inject faults between the konnector and a provider: it forwards every
// request with the upstream's own credentials (whoever the client is), and a
// fault function picks requests to fail or delay.
type Proxy struct {
	server   *httptest.Server
	closed   chan struct{}
	mu       sync.Mutex
	fault    func(*http.Request) Fault
	requests atomic.Int64
}

// NewProxy starts a proxy to upstream (nil: a server that holds every
// request until the test ends, i.e. accepts connections and never
// answers); it stops with the test.
func NewProxy(t testing.TB, upstream *rest.Config) *Proxy {
	t.Helper()
	p := &Proxy{closed: make(chan struct{})}
	var forward http.Handler = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-p.closed:
		}
	})
	if upstream != nil {
		target, err := url.Parse(upstream.Host)
		if err != nil {
			t.Fatal(err)
		}
		transport, err := rest.TransportFor(upstream)
		if err != nil {
			t.Fatal(err)
		}
		forward = &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Header.Del("Authorization")
			},
			Transport:     transport,
			FlushInterval: -1, // watches stream
		}
	}
	p.server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.mu.Lock()
		fault := p.fault
		p.mu.Unlock()
		var f Fault
		if fault != nil {
			f = fault(r)
		}
		if f.Delay > 0 {
			timer := time.NewTimer(f.Delay)
			select {
			case <-timer.C:
			case <-r.Context().Done():
				timer.Stop()
				return
			case <-p.closed:
				timer.Stop()
				return
			}
		}
		if f.Abort {
			panic(http.ErrAbortHandler)
		}
		if f.Reply != nil {
			reply := *f.Reply
			reply.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			reply.Status = metav1.StatusFailure
			body, _ := json.Marshal(&reply)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(reply.Code))
			_, _ = w.Write(body)
			return
		}
		if f.Status != 0 {
			http.Error(w, http.StatusText(f.Status), f.Status)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(p.closed)
		p.server.CloseClientConnections()
		p.server.Close()
	})
	return p
}

// SetFault replaces the fault function (nil forwards everything).
func (p *Proxy) SetFault(fn func(*http.Request) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = fn
}

// CloseClientConnections closes every connection to the proxy (its
// clients reconnect; their watches resume with new requests).
func (p *Proxy) CloseClientConnections() { p.server.CloseClientConnections() }

// Requests is how many requests the proxy has received.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Kubeconfig is a kubeconfig for the proxy: its address, its certificate
// as the CA, and a placeholder token (the proxy uses the upstream's).
func (p *Proxy) Kubeconfig(t testing.TB) []byte {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.server.Certificate().Raw})
	kc, err := testenv.KubeconfigFor("proxy", &rest.Config{Host: p.server.URL, BearerToken: "proxied",
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// WaitRequests waits until the proxy has received at least n requests.
func (p *Proxy) WaitRequests(t testing.TB, n int64) {
	t.Helper()
	Eventually(t, "requests through the proxy", func() error {
		if got := p.Requests(); got < n {
			return context.DeadlineExceeded
		}
		return nil
	})
}
