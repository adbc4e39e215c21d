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

package connection_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/credentials"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// tokenConfig is the provider's address and CA with token as the only
// credential.
func tokenConfig(token string) *rest.Config {
	return providerConfigWith(func(c *rest.Config) {
		c.CertData, c.KeyData, c.BearerToken = nil, nil, token
	})
}

// providerServiceAccount creates a ServiceAccount on the provider for the
// test's lifetime (in a namespace of the test's own: the shared provider's
// "kbind" namespace is the konnector's to create), allowed rules — everything when none are given (the
// RBAC grant makes is tested in e2e) — and returns it and its username.
func providerServiceAccount(t *testing.T, namespace, name string, rules ...rbacv1.PolicyRule) (*corev1.ServiceAccount, string) {
	t.Helper()
	ctx := context.Background()
	if err := provider.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := provider.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := provider.Delete(ctx, sa.DeepCopy()); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting ServiceAccount %s/%s: %v", namespace, name, err)
		}
	})
	user := "system:serviceaccount:" + namespace + ":" + name
	if len(rules) == 0 {
		rules = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	}
	t.Cleanup(grantProvider(t, name, user, rules...))
	return sa, user
}

// refused reports whether the provider refuses token (401), nil when it
// accepts it.
func refused(ctx context.Context, token string) error {
	cs, err := kubernetes.NewForConfig(tokenConfig(token))
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	if err == nil {
		return errors.New("the provider still accepts the token")
	}
	if !apierrors.IsUnauthorized(err) {
		return fmt.Errorf("not refused as unauthorized: %w", err)
	}
	return nil
}

// TestTokenRenewal follows a Connection whose kubeconfig holds a bound
// ServiceAccount token of 30 s (signed with the test API server's own key:
// TokenRequest issues nothing under 10 minutes): the konnector renews it
// at two thirds of its life, keeps it in a Secret of its own without ever
// writing the user's, goes on through the old token's expiry on the same
// session (no relist), comes back Ready after a restart past that expiry
// with the renewed token, yields to a new kubeconfig the user applies, and
// is cut off once the ServiceAccount is deleted (revoke). Once the old
// token has expired, the test has the provider refuse it at once (it is
// bound to a Secret the test deletes) rather than wait out the API
// server's minute of leeway after its expiry: a konnector still using it
// fails the same way, a minute sooner.
//
// A consumer and an engine of its own: it restarts the engine, and reads
// its sessions.
func TestTokenRenewal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := unique("renew")
	saNS, saName := name, name+"-sa"
	cc, c := ownConsumer(t)
	eng, stop := env.RunEngineOn(t, cc.Config, nil)
	sa, user := providerServiceAccount(t, saNS, saName)

	first, revokeFirst, err := pair.Provider.RevocableServiceAccountToken(ctx, saNS, saName, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := &renewalRun{saNS: saNS, saName: saName, name: name, user: user, first: first, firstCred: credentials.FromToken(first), revokeFirst: revokeFirst, c: c, eng: eng}
	f.restart = func() {
		stop()
		f.eng, stop = env.RunEngineOn(t, cc.Config, nil)
		// Cleanups run last first: the Connection is deleted while the
		// restarted engine (stopped by a later cleanup) still runs.
		t.Cleanup(func() { deleteConnectionOn(t, c, name) })
	}
	f.secret = createSecretOn(t, c, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, tokenConfig(first))})
	createConnectionOn(t, c, name, secretNS, name)
	conn := waitConditionOn(t, c, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitConditionOn(t, c, name, kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, "renewed before")
	// Both results are served from the start, failures at 0 (a rate sees
	// the first failure; successes may have begun already).
	if v, ok := renewals(t, name, "failure"); !ok || v != 0 {
		t.Errorf("kbind_credentials_renewals_total{result=\"failure\"} = %v (present: %v), want 0 before any failure", v, ok)
	}
	if _, ok := renewals(t, name, "success"); !ok {
		t.Error("no kbind_credentials_renewals_total{result=\"success\"} series")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(f.secret), f.secret); err != nil {
		t.Fatal(err)
	}
	f.userRV = f.secret.ResourceVersion
	var ok bool
	if f.sess, ok = f.eng.Sessions.Get(name); !ok {
		t.Fatal("no published session")
	}
	f.leaseKey = client.ObjectKey{Namespace: "kbind", Name: name + "-" + conn.Status.LocalClusterUID[:10]}

	f.renewsBeforeExpiry(t)
	f.outlivesTheFirstToken(t)
	f.restartsOnTheRenewedToken(t)
	bundle := f.yieldsToANewKubeconfig(t)

	// revoke: deleting the ServiceAccount invalidates every token it has;
	// the next renewal of the heartbeat is refused.
	if err := provider.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}
	waitConditionOn(t, c, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	if err := refused(ctx, f.renewed); err != nil {
		t.Errorf("the renewed token after the ServiceAccount was deleted: %v", err)
	}
	assertNoLeak(t, c, getConnectionOn(t, c, name))
	for _, tok := range []string{first, f.renewed, bundle} {
		if strings.Contains(logs.String(), tok) {
			t.Error("a token in the engine logs")
		}
	}
}

// renewalRun is what TestTokenRenewal's phases share.
type renewalRun struct {
	saNS, saName, name, user string
	// first is the kubeconfig's token, renewed the one the konnector got
	// (renewedAt).
	first     string
	firstCred credentials.Credential
	// revokeFirst has the provider refuse first from then on.
	revokeFirst func(context.Context) error
	renewed     string
	renewedAt   time.Time
	// secret is the user's kubeconfig Secret at userRV, which the
	// konnector never writes.
	secret *corev1.Secret
	userRV string
	// sess is the session published before the renewal.
	sess     *session.Session
	leaseKey client.ObjectKey
	// c is the test's consumer, eng its running engine, which restart
	// stops and starts again (a konnector restart).
	c       client.Client
	eng     *engine.Engine
	restart func()
}

// renewsBeforeExpiry: renewed before the first token expires, into the
// konnector's Secret.
func (f *renewalRun) renewsBeforeExpiry(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	renewedKey := client.ObjectKey{Namespace: secretNS, Name: f.name + "-kbind-token"}
	enginetest.EventuallyWithin(t, time.Minute, "token renewed", func() error {
		c := getConnectionOn(t, f.c, f.name)
		if cr := c.Status.Credentials; cr == nil || cr.Source != kbindv1alpha1.CredentialSourceRenewed || cr.RenewedSecretRef == nil {
			return fmt.Errorf("credentials %+v", c.Status.Credentials)
		}
		return nil
	})
	seen := time.Now()
	conn := waitConditionOn(t, f.c, f.name, kbindv1alpha1.ConditionCredentialsRenewed, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "was renewed at")
	cr := conn.Status.Credentials
	if cr.Kind != kbindv1alpha1.CredentialServiceAccountToken || cr.Subject != f.user || !cr.Renews || cr.ExpiresAt == nil || !cr.ExpiresAt.After(f.firstCred.ExpiresAt) {
		t.Errorf("status.credentials %+v", cr)
	}
	kept := &corev1.Secret{}
	if err := f.c.Get(ctx, renewedKey, kept); err != nil {
		t.Fatal(err)
	}
	f.renewed = string(kept.Data["token"])
	if f.renewed == "" || f.renewed == f.first || !metav1.IsControlledBy(kept, conn) {
		t.Errorf("the konnector's Secret holds no new token, or is not controlled by the Connection")
	}
	// When it was renewed is when the provider issued the new token (its
	// iat claim), not when this poll saw it: a busy machine delays the
	// poll, not the renewal.
	f.renewedAt = credentials.FromToken(f.renewed).IssuedAt
	t.Logf("renewed at %s (issued), seen at %s; the first token expires at %s",
		f.renewedAt.Format(time.RFC3339), seen.Format(time.RFC3339), f.firstCred.ExpiresAt.Format(time.RFC3339))
	if f.renewedAt.IsZero() || !f.renewedAt.Before(f.firstCred.ExpiresAt) {
		t.Errorf("renewed at %v, after the first token expired (%v)", f.renewedAt, f.firstCred.ExpiresAt)
	}
	if got := credentials.FromToken(f.renewed); got.Lifetime() != credentials.MinTokenLifetime {
		t.Errorf("renewed token lives %v, want %v (the current token's, at least the TokenRequest minimum)", got.Lifetime(), credentials.MinTokenLifetime)
	}
}

// outlivesTheFirstToken: the old token expires, and the provider refuses
// it (revoked at once instead of after the API server's one-minute
// leeway past its expiry); the same session goes on renewing the
// heartbeat and syncing.
func (f *renewalRun) outlivesTheFirstToken(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	// The konnector's clock passes the first token's expiry (the renewal
	// came 10 s before it, at two thirds of its 30 s).
	enginetest.EventuallyWithin(t, time.Until(f.firstCred.ExpiresAt)+5*time.Second, "past the first token's expiry", func() error {
		if now := time.Now(); !now.After(f.firstCred.ExpiresAt) {
			return fmt.Errorf("it is %s, the first token expires at %s", now.Format(time.RFC3339), f.firstCred.ExpiresAt.Format(time.RFC3339))
		}
		return nil
	})
	if err := f.revokeFirst(ctx); err != nil {
		t.Fatal(err)
	}
	// The API server caches an accepted token for 10 s.
	enginetest.EventuallyWithin(t, time.Minute, "the first token refused by the provider", func() error { return refused(ctx, f.first) })
	expiredAt := time.Now()
	t.Logf("first token: expires %s, refused from %s; renewed at %s", f.firstCred.ExpiresAt.Format(time.RFC3339), expiredAt.Format(time.RFC3339), f.renewedAt.Format(time.RFC3339))
	enginetest.Eventually(t, "heartbeat renewed after the first token expired", func() error {
		lease := &coordinationv1.Lease{}
		if err := provider.Get(ctx, f.leaseKey, lease); err != nil {
			return err
		}
		if !lease.Spec.RenewTime.After(expiredAt) {
			return fmt.Errorf("last renewed %v", lease.Spec.RenewTime)
		}
		return renewedTokenLease(lease, f.user)
	})
	waitConditionOn(t, f.c, f.name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if now, _ := f.eng.Sessions.Get(f.name); now != f.sess {
		t.Error("the session was rebuilt: a renewal must swap the token in place, without relisting")
	}
	if f.sess.Token() != f.renewed {
		t.Error("the session does not carry the renewed token")
	}
	if err := f.c.Get(ctx, client.ObjectKeyFromObject(f.secret), f.secret); err != nil {
		t.Fatal(err)
	}
	if f.secret.ResourceVersion != f.userRV {
		t.Errorf("the user's kubeconfig Secret was written (resourceVersion %s, was %s)", f.secret.ResourceVersion, f.userRV)
	}
}

// renewedTokenLease checks the annotations of a Lease renewed with a
// ServiceAccount token of user that the konnector renews.
func renewedTokenLease(lease *coordinationv1.Lease, user string) error {
	if lease.Annotations[kbindv1alpha1.CredentialRenewsAnnotation] != "true" || lease.Annotations[kbindv1alpha1.CredentialKindAnnotation] != "ServiceAccountToken" ||
		lease.Annotations[kbindv1alpha1.ProviderUserAnnotation] != user || lease.Annotations[kbindv1alpha1.KonnectorVersionAnnotation] == "" ||
		lease.Annotations[kbindv1alpha1.APIVersionAnnotation] != "core.kbind.io/v1alpha1" || lease.Annotations[kbindv1alpha1.CredentialExpiryAnnotation] == "" {
		return fmt.Errorf("lease annotations %v", lease.Annotations)
	}
	return nil
}

// restartsOnTheRenewedToken: a restart past the first token's expiry
// comes up with the renewed one.
func (f *renewalRun) restartsOnTheRenewedToken(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	f.restart()
	restarted := time.Now()
	enginetest.Eventually(t, "Ready after the restart, on the renewed token", func() error {
		if sess, ok := f.eng.Sessions.Get(f.name); !ok || sess.Token() != f.renewed {
			return errors.New("no session with the renewed token yet")
		}
		lease := &coordinationv1.Lease{}
		if err := provider.Get(ctx, f.leaseKey, lease); err != nil {
			return err
		}
		if !lease.Spec.RenewTime.After(restarted) {
			return fmt.Errorf("heartbeat not renewed since the restart")
		}
		return nil
	})
	waitConditionOn(t, f.c, f.name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

// yieldsToANewKubeconfig: the user applies a new kubeconfig (a new
// bundle): it wins, although the renewed token would expire later. It
// returns the bundle's token.
func (f *renewalRun) yieldsToANewKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	bundle, err := pair.Provider.ServiceAccountToken(ctx, f.saNS, f.saName, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f.secret.Data["kubeconfig"] = kubeconfigOf(t, tokenConfig(bundle))
	if err := f.c.Update(ctx, f.secret); err != nil {
		t.Fatal(err)
	}
	bundleExp := credentials.FromToken(bundle).ExpiresAt
	enginetest.Eventually(t, "the user's new kubeconfig in use", func() error {
		c := getConnectionOn(t, f.c, f.name)
		if cr := c.Status.Credentials; cr == nil || cr.Source != kbindv1alpha1.CredentialSourceKubeconfig || cr.ExpiresAt == nil || !cr.ExpiresAt.Time.Equal(bundleExp) {
			return fmt.Errorf("credentials %+v", c.Status.Credentials)
		}
		if sess, ok := f.eng.Sessions.Get(f.name); !ok || sess.Token() != bundle {
			return errors.New("the session does not carry the new bundle's token")
		}
		return nil
	})
	return bundle
}

// TestCertificateExpiryWarning: a client certificate is not renewable; one
// within the warning time (the test API server's certificates live 7 days,
// the default lead) makes CredentialsExpiring True with its NotAfter, an
// Event and the Lease annotation, and no credential bytes anywhere.
func TestCertificateExpiryWarning(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("cert-expiry")
	u, err := addProviderUser("kbind-" + name)
	if err != nil {
		t.Fatal(err)
	}
	revoke := grantProvider(t, name, u.Name, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
	defer revoke()
	cert := credentials.Of(u.Config)
	if cert.Kind != kbindv1alpha1.CredentialClientCertificate || cert.ExpiresAt.IsZero() {
		t.Fatalf("test user's certificate: %+v", cert)
	}
	date := cert.ExpiresAt.Format(time.RFC3339)
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, u.Config)})
	createConnection(t, name, secretNS, name)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionTrue, kbindv1alpha1.ReasonExpiresSoon,
		"ClientCertificate of kbind-"+name, date, "Issue a new client certificate")
	if c := conn.Status.Credentials; c == nil || c.Kind != kbindv1alpha1.CredentialClientCertificate || c.Subject != u.Name || c.Renews ||
		c.ExpiresAt == nil || !c.ExpiresAt.Time.Equal(cert.ExpiresAt) || c.RenewedSecretRef != nil {
		t.Errorf("status.credentials %+v", conn.Status.Credentials)
	}
	if meta := findCondition(conn, kbindv1alpha1.ConditionCredentialsRenewed); meta != nil {
		t.Errorf("CredentialsRenewed on a credential kbind cannot renew: %+v", meta)
	}
	enginetest.Eventually(t, "ExpiresSoon Event", func() error { return expiresSoonEvent(ctx, name, date) })
	enginetest.Eventually(t, "Lease with the certificate's expiry", func() error {
		lease := &coordinationv1.Lease{}
		if err := provider.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: name + "-" + conn.Status.LocalClusterUID[:10]}, lease); err != nil {
			return err
		}
		return certificateLease(lease, u.Name, date)
	})
	// No credential bytes: neither the certificate, nor the key, nor their
	// base64 forms, in status, Events or logs.
	var events corev1.EventList
	if err := consumer.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	haystack := fmt.Sprint(getConnection(t, name).Status) + fmt.Sprint(events.Items) + logs.String()
	if containsCredentialLine(haystack, u.Config.CertData, u.Config.KeyData) {
		t.Fatal("credential bytes in status, Events or logs")
	}
}

// expiresSoonEvent finds the ExpiresSoon warning naming date on the
// Connection.
func expiresSoonEvent(ctx context.Context, name, date string) error {
	var events corev1.EventList
	if err := consumer.List(ctx, &events); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == string(kbindv1alpha1.ReasonExpiresSoon) && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, date) {
			return nil
		}
	}
	return errors.New("no ExpiresSoon Event on the Connection")
}

// certificateLease checks the annotations of a Lease renewed with the
// client certificate of user that expires at date.
func certificateLease(lease *coordinationv1.Lease, user, date string) error {
	if lease.Annotations[kbindv1alpha1.CredentialExpiryAnnotation] != date || lease.Annotations[kbindv1alpha1.CredentialKindAnnotation] != "ClientCertificate" ||
		lease.Annotations[kbindv1alpha1.ProviderUserAnnotation] != user || lease.Annotations[kbindv1alpha1.CredentialRenewsAnnotation] != "" {
		return fmt.Errorf("lease annotations %v", lease.Annotations)
	}
	return nil
}

// containsCredentialLine reports whether haystack holds a line of any of
// the PEM credentials (a body line, longer than 20 characters).
func containsCredentialLine(haystack string, pems ...[]byte) bool {
	for _, secretBytes := range pems {
		for _, line := range strings.Split(string(secretBytes), "\n") {
			if len(line) > 20 && !strings.HasPrefix(line, "-----") && strings.Contains(haystack, line) {
				return true
			}
		}
	}
	return false
}

func findCondition(conn *kbindv1alpha1.Connection, typ kbindv1alpha1.ConditionType) *metav1.Condition {
	for i := range conn.Status.Conditions {
		if conn.Status.Conditions[i].Type == string(typ) {
			return &conn.Status.Conditions[i]
		}
	}
	return nil
}

// TestRenewedSecretNotOurs: a Secret of the renewed-token name that the
// Connection does not control is never read, overwritten or deleted; the
// renewal still swaps the token in and says it could not be kept.
func TestRenewedSecretNotOurs(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("squat")
	saNS, saName := name, name+"-sa"
	providerServiceAccount(t, saNS, saName)
	token, err := pair.Provider.ServiceAccountToken(ctx, saNS, saName, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	squatter := createSecret(t, secretNS, name+"-kbind-token", map[string][]byte{"token": []byte("planted")})
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, tokenConfig(token))})
	createConnection(t, name, secretNS, name)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.EventuallyWithin(t, time.Minute, "renewed but not kept", func() error {
		c := getConnection(t, name)
		cond := findCondition(c, kbindv1alpha1.ConditionCredentialsRenewed)
		if cond == nil || cond.Reason != string(kbindv1alpha1.ReasonRenewalFailed) || !strings.Contains(cond.Message, "is not this Connection's renewed-token Secret") {
			return fmt.Errorf("CredentialsRenewed %+v", cond)
		}
		if c.Status.Credentials == nil || c.Status.Credentials.Source != kbindv1alpha1.CredentialSourceRenewed || c.Status.Credentials.RenewedSecretRef != nil {
			return fmt.Errorf("credentials %+v", c.Status.Credentials)
		}
		return nil
	})
	deleteConnection(t, name)
	got := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(squatter), got); err != nil {
		t.Fatalf("the Secret kbind does not own is gone: %v", err)
	}
	if string(got.Data["token"]) != "planted" || got.ResourceVersion != squatter.ResourceVersion {
		t.Error("the Secret kbind does not own was written")
	}
}

// TestRenewalRefused: a provider that does not let the ServiceAccount
// create its own token (what an older grant made) is reported with its
// refusal — CredentialsRenewed=False/RenewalFailed and a Warning Event —
// and, the token being within the warning time, CredentialsExpiring=True;
// the Connection stays Ready on the token it has.
func TestRenewalRefused(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("refused")
	saNS, saName := name, name+"-sa"
	providerServiceAccount(t, saNS, saName,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}})
	token, err := pair.Provider.ServiceAccountToken(ctx, saNS, saName, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, tokenConfig(token))})
	createConnection(t, name, secretNS, name)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	enginetest.EventuallyWithin(t, time.Minute, "the refused renewal reported", func() error {
		c := getConnection(t, name)
		cond := findCondition(c, kbindv1alpha1.ConditionCredentialsRenewed)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(kbindv1alpha1.ReasonRenewalFailed) ||
			!strings.Contains(cond.Message, "serviceaccounts \""+saName+"\" is forbidden") || !strings.Contains(cond.Message, "retrying at") {
			return fmt.Errorf("CredentialsRenewed %+v", cond)
		}
		exp := findCondition(c, kbindv1alpha1.ConditionCredentialsExpiring)
		if exp == nil || exp.Status != metav1.ConditionTrue || exp.Reason != string(kbindv1alpha1.ReasonExpiresSoon) {
			return fmt.Errorf("CredentialsExpiring %+v", exp)
		}
		if ready := findCondition(c, kbindv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", ready)
		}
		return nil
	})
	enginetest.Eventually(t, "RenewalFailed Event", func() error {
		var events corev1.EventList
		if err := consumer.List(ctx, &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == string(kbindv1alpha1.ReasonRenewalFailed) && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "forbidden") {
				return nil
			}
		}
		return errors.New("no RenewalFailed Event on the Connection")
	})
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name + "-kbind-token"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a renewed-token Secret without a renewal: %v", err)
	}
}
