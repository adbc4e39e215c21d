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

package access

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestTokenAudiences: the aud claim of a JWT, a string or a list; a token
// that is not a JWT is a clear error that never holds the token's bytes.
func TestTokenAudiences(t *testing.T) {
	jwt := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2lnbmF0dXJlLXNlY3JldA"
	}
	cases := []struct {
		name, token string
		want        string // joined by ","; "" when an error is wanted
		err         string
	}{
		{"a list", jwt(`{"aud":["https://kubernetes.default.svc.cluster.local","k3s"],"sub":"x"}`), "https://kubernetes.default.svc.cluster.local,k3s", ""},
		{"a string", jwt(`{"aud":"https://127.0.0.1:6443/"}`), "https://127.0.0.1:6443/", ""},
		{"padded base64url", "h." + base64.URLEncoding.EncodeToString([]byte(`{"aud":"a?b"}`)) + ".s", "a?b", ""},
		{"no aud", jwt(`{"sub":"x"}`), "", "carries no audience"},
		{"an empty list", jwt(`{"aud":[]}`), "", "carries no audience"},
		{"aud a number", jwt(`{"aud":7}`), "", "neither a string nor a list"},
		{"not a JWT", "s3cr3t-opaque-token", "", "not a JWT"},
		{"payload not base64", "h.s3cr3t!!.s", "", "not a JWT"},
		{"payload not JSON", "h." + base64.RawURLEncoding.EncodeToString([]byte("s3cr3t")) + ".s", "", "not a JWT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TokenAudiences(tc.token)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error naming %q", got, err, tc.err)
				}
				for _, secret := range []string{"s3cr3t", "c2lnbmF0dXJl", tc.token} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error holds the token's bytes: %v", err)
					}
				}
				return
			}
			if err != nil || strings.Join(got, ",") != tc.want {
				t.Errorf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}
