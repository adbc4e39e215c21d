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

package session

import (
	"net/http"
	"sync/atomic"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// bearer holds a session's bearer token; requests read it when they are
// sent.
type bearer struct {
	v atomic.Pointer[string]
}

func (b *bearer) get() string {
	if p := b.v.Load(); p != nil {
		return *p
	}
	return ""
}

func (b *bearer) set(token string) bool {
	old := b.v.Swap(&token)
	return old == nil || *old != token
}

// wrap is the rest.Config transport wrapper that authenticates requests
// with the current token.
func (b *bearer) wrap(rt http.RoundTripper) http.RoundTripper {
	return &bearerRoundTripper{token: b, next: rt}
}

type bearerRoundTripper struct {
	token *bearer
	next  http.RoundTripper
}

func (r *bearerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return r.next.RoundTrip(req)
	}
	req = utilnet.CloneRequest(req)
	req.Header.Set("Authorization", "Bearer "+r.token.get())
	return r.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's debugging wrappers see through.
func (r *bearerRoundTripper) WrappedRoundTripper() http.RoundTripper { return r.next }
