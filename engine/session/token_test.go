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
	"testing"
)

// recorder is a RoundTripper that keeps the Authorization header it saw.
type recorder struct{ seen []string }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.seen = append(r.seen, req.Header.Get("Authorization"))
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// TestBearerSwap: every request carries the token current when it is
// sent; a swap reaches requests made through a transport built before it;
// an explicit Authorization header is left alone; the caller's request is
// never modified.
func TestBearerSwap(t *testing.T) {
	b := &bearer{}
	if !b.set("first") || b.set("first") || b.get() != "first" {
		t.Fatal("set reports a change only when the token changes")
	}
	next := &recorder{}
	rt := b.wrap(next)
	send := func(req *http.Request) {
		t.Helper()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodGet, "https://provider.example/api", nil)
	send(req)
	if !b.set("renewed") {
		t.Fatal("a new token is a change")
	}
	send(req)
	other, _ := http.NewRequest(http.MethodGet, "https://provider.example/api", nil)
	other.Header.Set("Authorization", "Bearer explicit")
	send(other)
	want := []string{"Bearer first", "Bearer renewed", "Bearer explicit"}
	for i := range want {
		if next.seen[i] != want[i] {
			t.Errorf("request %d carried %q, want %q", i, next.seen[i], want[i])
		}
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was modified")
	}
}

// TestSetTokenWithoutBearer: a session whose kubeconfig authenticates
// otherwise (a client certificate) has no token to swap.
func TestSetTokenWithoutBearer(t *testing.T) {
	s := &Session{}
	if s.SetToken("x") || s.Token() != "" {
		t.Error("a session without a bearer token took one")
	}
}
