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

package credentials

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// jwt is an unsigned compact JWS with the claims (the package never checks
// signatures).
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(b) + ".c2ln"
}

func saClaims(iat, exp time.Time, aud any) map[string]any {
	return map[string]any{
		"iss": "https://kubernetes.default.svc", "sub": "system:serviceaccount:kbind:kbind-consumer-a",
		"aud": aud, "iat": iat.Unix(), "nbf": iat.Unix(), "exp": exp.Unix(),
		"kubernetes.io": map[string]any{"namespace": "kbind", "serviceaccount": map[string]any{"name": "kbind-consumer-a", "uid": "u1"}},
	}
}

func TestFromToken(t *testing.T) {
	exp := t0.Add(720 * time.Hour)
	for _, tc := range []struct {
		name      string
		token     string
		kind      kbindv1alpha1.CredentialKind
		subject   string
		expires   time.Time
		audiences []string
		renewable bool
	}{
		{"bound ServiceAccount token, aud list", jwt(t, saClaims(t0, exp, []string{"https://a", "https://b"})),
			kbindv1alpha1.CredentialServiceAccountToken, "system:serviceaccount:kbind:kbind-consumer-a", exp, []string{"https://a", "https://b"}, true},
		{"bound ServiceAccount token, aud string", jwt(t, saClaims(t0, exp, "https://a")),
			kbindv1alpha1.CredentialServiceAccountToken, "system:serviceaccount:kbind:kbind-consumer-a", exp, []string{"https://a"}, true},
		{"legacy token Secret's token: no expiry, not renewable", jwt(t, map[string]any{
			"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:kbind:old",
			"kubernetes.io/serviceaccount/namespace": "kbind"}),
			kbindv1alpha1.CredentialToken, "system:serviceaccount:kbind:old", time.Time{}, nil, false},
		{"an OIDC token: expiry, not renewable", jwt(t, map[string]any{"sub": "alice", "aud": "kubernetes", "iat": t0.Unix(), "exp": exp.Unix()}),
			kbindv1alpha1.CredentialToken, "alice", exp, []string{"kubernetes"}, false},
		{"opaque token", "abcdef.0123456789abcdef", kbindv1alpha1.CredentialToken, "", time.Time{}, nil, false},
		{"three parts, payload not base64", "a.%%%.c", kbindv1alpha1.CredentialToken, "", time.Time{}, nil, false},
		{"three parts, payload not JSON", "a." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c", kbindv1alpha1.CredentialToken, "", time.Time{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := FromToken(tc.token)
			if c.Kind != tc.kind || c.Subject != tc.subject || !c.ExpiresAt.Equal(tc.expires) || c.Renewable() != tc.renewable {
				t.Errorf("got kind %s subject %q expires %v renewable %v, want %s %q %v %v", c.Kind, c.Subject, c.ExpiresAt, c.Renewable(), tc.kind, tc.subject, tc.expires, tc.renewable)
			}
			if len(c.Audiences) != len(tc.audiences) {
				t.Errorf("audiences %v, want %v", c.Audiences, tc.audiences)
			}
			if c.Renewable() && (c.ServiceAccount.Namespace != "kbind" || c.ServiceAccount.Name != "kbind-consumer-a") {
				t.Errorf("service account %v", c.ServiceAccount)
			}
		})
	}
}

func TestOf(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := t0.Add(90 * 24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "team-a"}, NotBefore: t0, NotAfter: notAfter,
	}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}}, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, tc := range []struct {
		name    string
		cfg     rest.Config
		kind    kbindv1alpha1.CredentialKind
		subject string
		expires time.Time
	}{
		{"client certificate", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: certPEM}}, kbindv1alpha1.CredentialClientCertificate, "team-a", notAfter},
		{"certificate data that is not PEM", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("x")}}, kbindv1alpha1.CredentialClientCertificate, "", time.Time{}},
		{"basic", rest.Config{Username: "bob", Password: "p"}, kbindv1alpha1.CredentialBasic, "bob", time.Time{}},
		{"token wins over a certificate", rest.Config{BearerToken: "opaque", TLSClientConfig: rest.TLSClientConfig{CertData: certPEM}}, kbindv1alpha1.CredentialToken, "", time.Time{}},
		{"nothing", rest.Config{}, kbindv1alpha1.CredentialNone, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Of(&tc.cfg)
			if c.Kind != tc.kind || c.Subject != tc.subject || !c.ExpiresAt.Equal(tc.expires) {
				t.Errorf("got %s %q %v, want %s %q %v", c.Kind, c.Subject, c.ExpiresAt, tc.kind, tc.subject, tc.expires)
			}
		})
	}
}

func TestTimes(t *testing.T) {
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		name            string
		lifetime        time.Duration
		renewAt, warnAt time.Duration // after t0
		requestLifetime time.Duration
	}{
		// 30 days: renewed on day 20; warned 7 days before (the fifth, 6 days, comes later).
		{"720h", 720 * time.Hour, 480 * time.Hour, 720*time.Hour - week, 720 * time.Hour},
		// 60 days: the fifth (12 days) comes before the 7-day lead.
		{"1440h", 1440 * time.Hour, 960 * time.Hour, 1440*time.Hour - 288*time.Hour, 1440 * time.Hour},
		// 1 hour: within the lead from the start.
		{"1h", time.Hour, 40 * time.Minute, time.Hour - week, time.Hour},
		// Shorter than TokenRequest issues: renewal asks for the minimum.
		{"30s", 30 * time.Second, 20 * time.Second, 30*time.Second - week, MinTokenLifetime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Credential{Kind: kbindv1alpha1.CredentialServiceAccountToken, IssuedAt: t0, ExpiresAt: t0.Add(tc.lifetime)}
			if got := c.RenewAt(); !got.Equal(t0.Add(tc.renewAt)) {
				t.Errorf("RenewAt %v, want %v", got.Sub(t0), tc.renewAt)
			}
			if got := c.WarnAt(week); !got.Equal(t0.Add(tc.warnAt)) {
				t.Errorf("WarnAt %v, want %v", got.Sub(t0), tc.warnAt)
			}
			if got := c.RequestLifetime(); got != tc.requestLifetime {
				t.Errorf("RequestLifetime %v, want %v", got, tc.requestLifetime)
			}
		})
	}
	if !(Credential{}).WarnAt(week).IsZero() {
		t.Error("a credential that does not expire has a WarnAt")
	}
}

func TestChoose(t *testing.T) {
	now := t0.Add(500 * time.Hour)
	user := Credential{Kind: kbindv1alpha1.CredentialServiceAccountToken, Subject: "system:serviceaccount:kbind:a", IssuedAt: t0, ExpiresAt: t0.Add(720 * time.Hour)}
	renewed := func(mut func(*Renewed)) *Renewed {
		r := &Renewed{From: "h1", Credential: Credential{Kind: kbindv1alpha1.CredentialServiceAccountToken, Subject: user.Subject,
			IssuedAt: t0.Add(480 * time.Hour), ExpiresAt: t0.Add(1200 * time.Hour)}}
		if mut != nil {
			mut(r)
		}
		return r
	}
	userExpired := user
	userExpired.IssuedAt, userExpired.ExpiresAt = t0.Add(-800*time.Hour), t0.Add(-80*time.Hour)
	for _, tc := range []struct {
		name    string
		hash    string
		user    Credential
		renewed *Renewed
		want    kbindv1alpha1.CredentialSource
	}{
		{"no renewed token", "h1", user, nil, kbindv1alpha1.CredentialSourceKubeconfig},
		{"renewed from this kubeconfig, expires later", "h1", user, renewed(nil), kbindv1alpha1.CredentialSourceRenewed},
		{"the user's token expired, the renewed one not", "h1", userExpired, renewed(nil), kbindv1alpha1.CredentialSourceRenewed},
		{"the user changed the Secret: theirs wins", "h2", user, renewed(nil), kbindv1alpha1.CredentialSourceKubeconfig},
		{"the user changed the Secret to a shorter token: theirs still wins", "h2", userExpired, renewed(nil), kbindv1alpha1.CredentialSourceKubeconfig},
		{"renewed token expired", "h1", user, renewed(func(r *Renewed) { r.Credential.ExpiresAt = now.Add(-time.Second) }), kbindv1alpha1.CredentialSourceKubeconfig},
		{"renewed token expires sooner", "h1", user, renewed(func(r *Renewed) { r.Credential.ExpiresAt = t0.Add(600 * time.Hour) }), kbindv1alpha1.CredentialSourceKubeconfig},
		{"renewed token of another subject", "h1", user, renewed(func(r *Renewed) { r.Credential.Subject = "system:serviceaccount:kbind:b" }), kbindv1alpha1.CredentialSourceKubeconfig},
		{"renewed Secret holds no ServiceAccount token", "h1", user, renewed(func(r *Renewed) { r.Credential.Kind = kbindv1alpha1.CredentialToken }), kbindv1alpha1.CredentialSourceKubeconfig},
		{"the kubeconfig's credential is not renewable", "h1", Credential{Kind: kbindv1alpha1.CredentialClientCertificate, ExpiresAt: t0.Add(time.Hour)}, renewed(nil), kbindv1alpha1.CredentialSourceKubeconfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Choose(tc.hash, tc.user, tc.renewed, now); got != tc.want {
				t.Errorf("Choose = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestExpiring(t *testing.T) {
	week := 7 * 24 * time.Hour
	c := Credential{IssuedAt: t0, ExpiresAt: t0.Add(720 * time.Hour)}
	for _, tc := range []struct {
		name            string
		c               Credential
		renews, failing bool
		now             time.Time
		want            kbindv1alpha1.Reason
	}{
		{"does not expire", Credential{}, false, false, t0, ""},
		{"far from expiry", c, false, false, t0.Add(24 * time.Hour), ""},
		{"within the lead", c, false, false, t0.Add(720*time.Hour - week), kbindv1alpha1.ReasonExpiresSoon},
		{"within the lead but it renews", c, true, false, t0.Add(719 * time.Hour), ""},
		{"within the lead and renewal fails", c, true, true, t0.Add(719 * time.Hour), kbindv1alpha1.ReasonExpiresSoon},
		{"renewal fails, not within the lead yet", c, true, true, t0.Add(500 * time.Hour), ""},
		{"expired", c, false, false, t0.Add(720 * time.Hour), kbindv1alpha1.ReasonExpired},
		{"expired although it renews (renewal came too late)", c, true, false, t0.Add(721 * time.Hour), kbindv1alpha1.ReasonExpired},
		{"a one-hour token that does not renew: expiring all its life", Credential{IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}, false, false, t0, kbindv1alpha1.ReasonExpiresSoon},
		{"a one-hour token that renews: never", Credential{IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}, true, false, t0.Add(50 * time.Minute), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Expiring(tc.c, tc.renews, tc.failing, week, tc.now); got != tc.want {
				t.Errorf("Expiring = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseTokenErrors: why a token is not a JWT kbind can read, without
// the token's bytes.
func TestParseTokenErrors(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, tc := range []struct{ token, want string }{
		{"s3cr3t-opaque", "three dot-separated parts"},
		{"h.s3cr3t!!.s", "not base64url"},
		{"h." + enc([]byte("s3cr3t")) + ".s", "not JSON"},
		{"h." + enc([]byte(`{"aud":7}`)) + ".s", "neither a string nor a list"},
	} {
		c, err := ParseToken(tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") || c.Kind != kbindv1alpha1.CredentialToken {
			t.Errorf("ParseToken(%q) = %v, %v; want a Token and an error naming %q", tc.token, c.Kind, err, tc.want)
		}
	}
	if c, err := ParseToken("h." + enc([]byte(`{"aud":null,"sub":"x"}`)) + ".s"); err != nil || len(c.Audiences) != 0 || c.Subject != "x" {
		t.Errorf("a null aud: %+v, %v", c, err)
	}
}
