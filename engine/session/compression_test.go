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

package session_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/session"
)

// compressionSeen records whether any response reached the client
// compressed (net/http decompresses it transparently and says so).
type compressionSeen struct {
	next       http.RoundTripper
	compressed atomic.Int32
	responses  atomic.Int32
}

func (c *compressionSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.responses.Add(1)
		if resp.Uncompressed {
			c.compressed.Add(1)
		}
	}
	return resp, err
}

// A session asks for compressed responses unless told not to: the API
// server gzips a streamed watch list (an informer's start) for a client
// that accepts it, which costs CPU on both sides for a provider that is
// near (--provider-compression=false).
func TestCompression(t *testing.T) {
	t.Parallel()
	cluster := session.SharedProvider.Get(t)
	for _, disable := range []bool{false, true} {
		seen := &compressionSeen{}
		cfg := rest.CopyConfig(cluster.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			seen.next = rt
			return seen
		}
		ctx, cancel := context.WithCancel(context.Background())
		m := session.NewManager(ctx, session.Options{Scheme: clientgoscheme.Scheme, QPS: 50, Burst: 100, Timeout: 10 * time.Second, DisableCompression: disable})
		session.RunningSession(ctx, t, m, cfg)
		m.Stop("p")
		cancel()
		compressed, responses := seen.compressed.Load(), seen.responses.Load()
		t.Logf("DisableCompression %v: %d of %d responses compressed", disable, compressed, responses)
		if disable && compressed > 0 {
			t.Errorf("DisableCompression: %d of %d responses were compressed", compressed, responses)
		}
		if !disable && compressed == 0 {
			t.Errorf("compression allowed, but none of %d responses was compressed (the watch list should be)", responses)
		}
	}
}
