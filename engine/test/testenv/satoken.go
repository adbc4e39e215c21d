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

package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServiceAccountToken signs a bound ServiceAccount token for the
// ServiceAccount namespace/name with the API server's own signing key,
// issued now and valid for lifetime: the way to get tokens shorter than
// the TokenRequest API issues (at least 10 minutes), so that a test can
// watch one expire. The API server accepts it exactly like one it issued
// (same issuer, audience, claims and key), a minute past its expiry
// included (the validator's leeway).
func (c *Cluster) ServiceAccountToken(ctx context.Context, namespace, name string, lifetime time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return "", err
	}
	return c.signServiceAccountToken(ctx, cs, namespace, name, lifetime, nil)
}

// RevocableServiceAccountToken is ServiceAccountToken bound to a Secret
// it creates in namespace (a bound token, like one TokenRequest issues
// with a boundObjectRef): revoke deletes that Secret, and from then on
// the API server refuses the token — as it refuses every bound token
// whose object is gone — while other tokens of the ServiceAccount stay
// valid. A test that needs the provider to refuse one token no longer in
// use revokes it once the token's expiry has passed, instead of waiting
// out the validator's minute of leeway after it.
func (c *Cluster) RevocableServiceAccountToken(ctx context.Context, namespace, name string, lifetime time.Duration) (token string, revoke func(context.Context) error, err error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return "", nil, err
	}
	secret, err := cs.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-bound-token-"}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("creating the Secret a token of ServiceAccount %s/%s is bound to: %w", namespace, name, err)
	}
	token, err = c.signServiceAccountToken(ctx, cs, namespace, name, lifetime, map[string]any{"name": secret.Name, "uid": string(secret.UID)})
	if err != nil {
		return "", nil, err
	}
	revoke = func(ctx context.Context) error {
		return cs.CoreV1().Secrets(namespace).Delete(ctx, secret.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &secret.UID}})
	}
	return token, revoke, nil
}

// signServiceAccountToken signs a token of ServiceAccount namespace/name,
// bound to the Secret boundSecret names (its name and uid) unless nil.
func (c *Cluster) signServiceAccountToken(ctx context.Context, cs kubernetes.Interface, namespace, name string, lifetime time.Duration, boundSecret map[string]any) (string, error) {
	sa, err := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading ServiceAccount %s/%s: %w", namespace, name, err)
	}
	api := c.env.ControlPlane.APIServer
	key, err := readSigningKey(filepath.Join(api.CertDir, "sa-signer.key"))
	if err != nil {
		return "", err
	}
	issuer := api.SecureServing.URL("https", "/").String()
	now := time.Now()
	claims := map[string]any{
		"iss": issuer, "aud": []string{issuer}, "sub": "system:serviceaccount:" + namespace + ":" + name,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(lifetime).Unix(),
		"jti":           fmt.Sprintf("kbind-test-%d", now.UnixNano()),
		"kubernetes.io": map[string]any{"namespace": namespace, "serviceaccount": map[string]any{"name": name, "uid": string(sa.UID)}},
	}
	if boundSecret != nil {
		claims["kubernetes.io"].(map[string]any)["secret"] = boundSecret
	}
	return signES256(key, claims)
}

func readSigningKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the service account signing key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("the service account signing key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the service account signing key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the service account signing key is a %T, want ECDSA", k)
	}
	return ec, nil
}

// signES256 is a compact JWS of claims, with the key ID the API server
// derives from the public key.
func signES256(key *ecdsa.PrivateKey, claims map[string]any) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	kid := sha256.Sum256(der)
	enc := base64.RawURLEncoding.EncodeToString
	header, err := json.Marshal(map[string]string{"alg": "ES256", "kid": enc(kid[:]), "typ": "JWT"})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := enc(header) + "." + enc(payload)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc(sig), nil
}
