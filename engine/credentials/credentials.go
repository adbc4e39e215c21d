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

// Package credentials reads what a provider credential is — its kind, the
// user it authenticates as, when it was issued and when it expires — and
// decides when a renewable one is renewed, when an expiring one is
// warned about, and which of two tokens a Connection uses (docs/connections.md#credentials).
// It never returns, logs or formats a credential's bytes: only the facts
// above.
//
// A JWT's claims are read without checking its signature: the provider
// checks it on every request, and kbind only needs the times and the
// subject to plan, never to trust.
package credentials

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// DefaultExpiryWarning is how long before a credential that is not
// renewed expires it is reported as expiring, by the konnector
// (--credential-expiry-warning) and by kubectl kbind doctor.
const DefaultExpiryWarning = 7 * 24 * time.Hour

// Credential is what kbind knows about one credential.
type Credential struct {
	Kind kbindv1alpha1.CredentialKind
	// Subject is the user the provider knows the credential as, "" when
	// kbind cannot tell (an opaque token).
	Subject string
	// IssuedAt and ExpiresAt are zero when unknown or, for ExpiresAt,
	// when the credential does not expire.
	IssuedAt, ExpiresAt time.Time
	// ServiceAccount is the ServiceAccount a ServiceAccountToken belongs
	// to (and may request a new token for).
	ServiceAccount types.NamespacedName
	// Audiences of a token.
	Audiences []string
}

// Of reads the credential of a provider client configuration: its bearer
// token, else its client certificate, else its username.
func Of(cfg *rest.Config) Credential {
	switch {
	case cfg.BearerToken != "":
		return FromToken(cfg.BearerToken)
	case len(cfg.CertData) > 0:
		return fromCertificate(cfg.CertData)
	case cfg.Username != "":
		return Credential{Kind: kbindv1alpha1.CredentialBasic, Subject: cfg.Username}
	}
	return Credential{Kind: kbindv1alpha1.CredentialNone}
}

// claims are the JWT claims kbind reads.
type claims struct {
	Subject   string     `json:"sub"`
	Audience  audiences  `json:"aud"`
	Expiry    *numericTS `json:"exp"`
	IssuedAt  *numericTS `json:"iat"`
	NotBefore *numericTS `json:"nbf"`
	// Kubernetes is the bound ServiceAccount token's private claim.
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount *struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// audiences is a JWT "aud": a string or a list of strings.
type audiences []string

// errAudience: the aud claim is neither a string nor a list of strings.
var errAudience = errors.New("has an aud claim that is neither a string nor a list of strings")

func (a *audiences) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audiences{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errAudience
	}
	*a = many
	return nil
}

// numericTS is a JWT NumericDate (seconds, possibly fractional).
type numericTS float64

func (n *numericTS) time() time.Time {
	if n == nil {
		return time.Time{}
	}
	return time.Unix(int64(*n), 0).UTC()
}

// FromToken reads a bearer token: a bound ServiceAccount token (a JWT with
// the kubernetes.io claim naming a ServiceAccount, and an expiry) is a
// ServiceAccountToken; anything else is a Token, with the subject and
// times a JWT carries, or none for an opaque token.
func FromToken(token string) Credential {
	c, _ := ParseToken(token)
	return c
}

// ParseToken is FromToken, with the reason a token is not a JWT kbind can
// read (an opaque token, say) as an error that names the problem and
// never the token. The Credential is a Token then, without subject or
// times.
func ParseToken(token string) (Credential, error) {
	c := Credential{Kind: kbindv1alpha1.CredentialToken}
	cl, err := parseJWT(token)
	if err != nil {
		return c, err
	}
	c.Subject, c.Audiences = cl.Subject, cl.Audience
	c.IssuedAt, c.ExpiresAt = cl.IssuedAt.time(), cl.Expiry.time()
	if c.IssuedAt.IsZero() {
		c.IssuedAt = cl.NotBefore.time()
	}
	if k := cl.Kubernetes; k != nil && k.ServiceAccount != nil && k.Namespace != "" && k.ServiceAccount.Name != "" && !c.ExpiresAt.IsZero() {
		c.Kind = kbindv1alpha1.CredentialServiceAccountToken
		c.ServiceAccount = types.NamespacedName{Namespace: k.Namespace, Name: k.ServiceAccount.Name}
		if c.Subject == "" {
			c.Subject = "system:serviceaccount:" + k.Namespace + ":" + k.ServiceAccount.Name
		}
	}
	return c, nil
}

// parseJWT decodes the claims of a compact JWS without verifying it.
func parseJWT(token string) (claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}, errors.New("is not a JWT (want three dot-separated parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return claims{}, errors.New("is not a JWT (its payload is not base64url)")
	}
	var cl claims
	if err := json.Unmarshal(payload, &cl); err != nil {
		if errors.Is(err, errAudience) {
			return claims{}, errAudience
		}
		return claims{}, errors.New("is not a JWT (its payload is not JSON)")
	}
	return cl, nil
}

// fromCertificate reads the first certificate of PEM data: its common name
// and validity.
func fromCertificate(data []byte) Credential {
	c := Credential{Kind: kbindv1alpha1.CredentialClientCertificate}
	block, _ := pem.Decode(data)
	if block == nil {
		return c
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return c
	}
	c.Subject = cert.Subject.CommonName
	c.IssuedAt, c.ExpiresAt = cert.NotBefore.UTC(), cert.NotAfter.UTC()
	return c
}

// Renewable reports whether kbind can renew the credential: a
// ServiceAccount token with a known lifetime.
func (c Credential) Renewable() bool {
	return c.Kind == kbindv1alpha1.CredentialServiceAccountToken && c.Lifetime() > 0
}

// Expires reports whether the credential has a known expiry.
func (c Credential) Expires() bool { return !c.ExpiresAt.IsZero() }

// Lifetime is ExpiresAt - IssuedAt, 0 when either is unknown.
func (c Credential) Lifetime() time.Duration {
	if c.IssuedAt.IsZero() || c.ExpiresAt.IsZero() || !c.ExpiresAt.After(c.IssuedAt) {
		return 0
	}
	return c.ExpiresAt.Sub(c.IssuedAt)
}

// Expired reports whether the credential expired at now.
func (c Credential) Expired(now time.Time) bool {
	return c.Expires() && !now.Before(c.ExpiresAt)
}

// RenewAt is when a renewable credential is renewed: once two thirds of
// its lifetime have passed, which leaves a third — ten days of a 30-day
// token, 200 s of the shortest token an API server issues — for retries.
func (c Credential) RenewAt() time.Time {
	return c.IssuedAt.Add(c.Lifetime() * 2 / 3)
}

// MinTokenLifetime is the shortest token the TokenRequest API issues.
const MinTokenLifetime = 600 * time.Second

// RequestLifetime is the lifetime asked for a renewed token: the current
// token's, at least MinTokenLifetime (the provider's admission policy caps
// it at what was granted).
func (c Credential) RequestLifetime() time.Duration {
	return max(c.Lifetime().Round(time.Second), MinTokenLifetime)
}

// WarnAt is when a credential that will not be renewed starts being
// reported as expiring: lead before it expires, and at the latest when a
// fifth of its lifetime is left. Zero for a credential that does not
// expire.
func (c Credential) WarnAt(lead time.Duration) time.Time {
	if !c.Expires() {
		return time.Time{}
	}
	at := c.ExpiresAt.Add(-lead)
	if l := c.Lifetime(); l > 0 {
		if fifth := c.ExpiresAt.Add(-l / 5); fifth.Before(at) {
			at = fifth
		}
	}
	return at
}

// Describe names the credential for messages: its kind and subject, never
// its bytes.
func (c Credential) Describe() string {
	if c.Subject == "" {
		return string(c.Kind)
	}
	return string(c.Kind) + " of " + c.Subject
}
