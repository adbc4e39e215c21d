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

package connection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/credentials"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/kubeconfig"
	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/session"
)

// Credentials (CONN-9, docs/connections.md#credentials): a Connection whose
// kubeconfig holds a bound ServiceAccount token renews it through the
// TokenRequest API once two thirds of its lifetime have passed, swaps it
// into the live session (no new session, no relist) and keeps it in a
// Secret of its own next to the kubeconfig Secret, which it never writes.
// Every credential's kind, subject and expiry are reported (status,
// conditions, a metric, the heartbeat Lease), never its bytes.

// renewedTokenKey is the key of the renewed token in the konnector's
// Secret.
const renewedTokenKey = "token"

// renewedSecretType marks the Secret a konnector keeps a renewed token in.
const renewedSecretType corev1.SecretType = "core.kbind.io/renewed-token"

// credentialState is what the reconciler remembers of one Connection's
// renewal between reconciles.
type credentialState struct {
	// hash is the kubeconfig the state is about: a changed kubeconfig
	// Secret starts afresh.
	hash string
	// token is the renewed token, renewing the kubeconfig of hash from;
	// persisted once it is in the konnector's Secret.
	token, from string
	persisted   bool
	// failure is the last renewal's error, failures how many in a row,
	// retryAt when the next attempt is due.
	failure  error
	failures int
	retryAt  time.Time
	// expiring is the CredentialsExpiring reason last announced with an
	// Event, so that an Event marks each change only.
	expiring kbindv1alpha1.Reason
}

// credentialView is what one reconcile knows about the credential in use:
// the facts conditions, status, metric and Lease are made of.
type credentialView struct {
	known  bool
	inUse  credentials.Credential
	source kbindv1alpha1.CredentialSource
	// renews: the kubeconfig's credential is a ServiceAccount token kbind
	// renews.
	renews bool
	// failure is the last renewal failure, persistErr the failure to keep
	// a renewed token in the konnector's Secret.
	failure, persistErr error
	retryAt             time.Time
	// secret is the konnector's Secret when it holds a token.
	secret *kbindv1alpha1.SecretReference
}

// renewedSecretName is the name of the Secret a Connection keeps its
// renewed token in: "<connection>-kbind-token", shortened with a hash for
// a name that would not fit.
func renewedSecretName(connection string) string {
	name := connection + "-kbind-token"
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	h := kubeconfig.Hash([]byte(connection))[len("sha256:"):]
	return connection[:validation.DNS1123SubdomainMaxLength-len("-kbind-token")-len(h)-1] + "-" + h + "-kbind-token"
}

func renewedSecretRef(conn *kbindv1alpha1.Connection) kbindv1alpha1.SecretReference {
	return kbindv1alpha1.SecretReference{Namespace: conn.Spec.KubeconfigSecretRef.Namespace, Name: renewedSecretName(conn.Name)}
}

// useCredential decides which credential the session carries — the
// kubeconfig's or the renewed token (credentials.Choose) — and sets it.
// It reads the konnector's Secret from the cache only when it has no
// renewed token in memory (after a restart).
func (r *Reconciler) useCredential(ctx context.Context, conn *kbindv1alpha1.Connection, parsed *kubeconfig.Parsed, sess *session.Session, now time.Time) credentialView {
	user := credentials.Of(parsed.Config)
	v := credentialView{known: true, inUse: user, source: kbindv1alpha1.CredentialSourceKubeconfig, renews: user.Renewable()}
	st := r.creds.get(conn.Name)
	if st.hash != parsed.Hash {
		st = credentialState{hash: parsed.Hash, expiring: st.expiring}
	}
	if v.renews && st.token == "" {
		st.token, st.from, st.persisted = r.readRenewed(ctx, conn)
	}
	var renewed *credentials.Renewed
	if st.token != "" {
		renewed = &credentials.Renewed{Credential: credentials.FromToken(st.token), From: st.from}
	}
	token := parsed.Config.BearerToken
	if credentials.Choose(parsed.Hash, user, renewed, now) == kbindv1alpha1.CredentialSourceRenewed {
		v.inUse, v.source, token = renewed.Credential, kbindv1alpha1.CredentialSourceRenewed, st.token
	}
	sess.SetToken(token)
	if st.token != "" && st.persisted {
		ref := renewedSecretRef(conn)
		v.secret = &ref
	}
	v.failure, v.retryAt = st.failure, st.retryAt
	r.creds.set(conn.Name, st)
	return v
}

// readRenewed reads the token kept in the konnector's Secret, "" when
// there is none (or the Secret is not the konnector's: kbind trusts only
// a Secret it made, controlled by this Connection).
func (r *Reconciler) readRenewed(ctx context.Context, conn *kbindv1alpha1.Connection) (token, from string, ok bool) {
	secret, ours, err := r.renewedSecret(ctx, conn)
	if err != nil {
		log.FromContext(ctx).Info("Could not read the Secret holding the renewed token; using the kubeconfig's", "error", err.Error())
	}
	if !ours {
		return "", "", false
	}
	return string(secret.Data[renewedTokenKey]), secret.Annotations[kbindv1alpha1.RenewedFromAnnotation], true
}

// renewedSecret reads the Connection's renewed-token Secret from the
// cache: nil when there is none, ours only when this Connection controls
// it and it has kbind's type — kbind reads, writes and deletes no other.
func (r *Reconciler) renewedSecret(ctx context.Context, conn *kbindv1alpha1.Connection) (secret *corev1.Secret, ours bool, err error) {
	ref := renewedSecretRef(conn)
	secret = &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return secret, metav1.IsControlledBy(secret, conn) && secret.Type == renewedSecretType, nil
}

// renewIfDue requests a new token once the one in use is due (RenewAt) and
// no failed attempt waits for its retry, and keeps a renewed token that
// could not be written yet. It runs only through a verified session.
func (r *Reconciler) renewIfDue(ctx context.Context, conn *kbindv1alpha1.Connection, parsed *kubeconfig.Parsed, sess *session.Session, v *credentialView, now time.Time) {
	if !v.renews {
		return
	}
	// Both results exist from the first reconcile on, at 0: a counter born
	// at 1 shows no increase() over its first sample, so the first failure
	// would not count towards KbindCredentialRenewalFailing.
	metrics.CredentialRenewals.WithLabelValues(conn.Name, "failure").Add(0)
	metrics.CredentialRenewals.WithLabelValues(conn.Name, "success").Add(0)
	st := r.creds.get(conn.Name)
	if !now.Before(v.inUse.RenewAt()) && !now.Before(st.retryAt) {
		token, err := requestToken(ctx, sess, v.inUse)
		if err != nil {
			st.failures++
			st.retryAt = now.Add(renewalBackoff(st.failures, v.inUse, now))
			if st.failure == nil || st.failure.Error() != err.Error() {
				r.event(conn, corev1.EventTypeWarning, string(kbindv1alpha1.ReasonRenewalFailed), "%s; retrying", err.Error())
			}
			st.failure = err
			metrics.CredentialRenewals.WithLabelValues(conn.Name, "failure").Inc()
			log.FromContext(ctx).Info("Token renewal failed", "error", err.Error(), "retryAt", st.retryAt)
		} else {
			renewed := credentials.FromToken(token)
			st = credentialState{hash: parsed.Hash, token: token, from: parsed.Hash, expiring: st.expiring}
			sess.SetToken(token)
			v.inUse, v.source = renewed, kbindv1alpha1.CredentialSourceRenewed
			metrics.CredentialRenewals.WithLabelValues(conn.Name, "success").Inc()
			r.event(conn, corev1.EventTypeNormal, "CredentialsRenewed", "renewed the %s; the new token expires at %s",
				renewed.Describe(), renewed.ExpiresAt.Format(time.RFC3339))
			log.FromContext(ctx).Info("Renewed the provider token", "subject", renewed.Subject, "expiresAt", renewed.ExpiresAt)
		}
	}
	if st.token != "" && !st.persisted && st.from == parsed.Hash {
		if err := r.keepRenewed(ctx, conn, st.token, st.from); err != nil {
			v.persistErr = err
		} else {
			st.persisted = true
			ref := renewedSecretRef(conn)
			v.secret = &ref
		}
	}
	v.failure, v.retryAt = st.failure, st.retryAt
	r.creds.set(conn.Name, st)
}

// requestToken asks the provider for a new token of the ServiceAccount the
// current one belongs to, with the same lifetime (credentials.RequestLifetime)
// and the API server's own audiences: the request names none, and names
// the current token's only if what came back differs from them. It
// returns only a ServiceAccount token of the same subject.
func requestToken(ctx context.Context, sess *session.Session, current credentials.Credential) (string, error) {
	sa := current.ServiceAccount
	token, err := tokenRequest(ctx, sess, current, nil)
	if err == nil && !sameSet(credentials.FromToken(token).Audiences, current.Audiences) {
		token, err = tokenRequest(ctx, sess, current, current.Audiences)
	}
	if err != nil {
		return "", fmt.Errorf("requesting a new token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	got := credentials.FromToken(token)
	if got.Kind != kbindv1alpha1.CredentialServiceAccountToken || got.Subject != current.Subject {
		return "", fmt.Errorf("requesting a new token for ServiceAccount %s/%s: the provider returned a %s, not a token of %s", sa.Namespace, sa.Name, got.Describe(), current.Subject)
	}
	return token, nil
}

func tokenRequest(ctx context.Context, sess *session.Session, current credentials.Credential, audiences []string) (string, error) {
	seconds := int64(current.RequestLifetime().Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds, Audiences: audiences}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: current.ServiceAccount.Namespace, Name: current.ServiceAccount.Name}}
	if err := sess.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", err
	}
	if tr.Status.Token == "" {
		return "", errors.New("the provider returned no token")
	}
	return tr.Status.Token, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// renewalBackoff is the wait before another attempt after failures in a
// row: 10 s doubling, at most 5 minutes, and never past a tenth of the
// time the token in use has left (so that a failing renewal is tried
// many times before the token expires).
func renewalBackoff(failures int, inUse credentials.Credential, now time.Time) time.Duration {
	d := 10 * time.Second
	for i := 1; i < failures && d < 5*time.Minute; i++ {
		d *= 2
	}
	d = min(d, 5*time.Minute)
	if left := inUse.ExpiresAt.Sub(now) / 10; left > time.Second && left < d {
		d = left
	}
	return max(d, time.Second)
}

// keepRenewed writes the renewed token into the konnector's Secret:
// controlled by the Connection (garbage-collected with it), marked as
// kbind's, annotated with the kubeconfig hash it renews. A Secret of that
// name that is not the konnector's is never overwritten.
func (r *Reconciler) keepRenewed(ctx context.Context, conn *kbindv1alpha1.Connection, token, from string) error {
	ref := renewedSecretRef(conn)
	where := fmt.Sprintf("Secret %s/%s", ref.Namespace, ref.Name)
	secret, ours, err := r.renewedSecret(ctx, conn)
	switch {
	case err != nil:
		return err
	case secret == nil:
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	case !ours:
		return fmt.Errorf("%s exists and is not this Connection's renewed-token Secret; kbind leaves it alone: delete or rename it", where)
	}
	exists := secret.ResourceVersion != ""
	base := secret.DeepCopy()
	secret.Type = renewedSecretType
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[kbindv1alpha1.ManagedLabel] = kbindv1alpha1.ManagedLabelValue
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[kbindv1alpha1.ConnectionAnnotation] = conn.Name
	secret.Annotations[kbindv1alpha1.RenewedFromAnnotation] = from
	secret.Data = map[string][]byte{renewedTokenKey: []byte(token)}
	if err := controllerutil.SetControllerReference(conn, secret, r.Client.Scheme()); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if exists {
		err = r.Client.Patch(ctx, secret, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	} else {
		err = r.Client.Create(ctx, secret)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", where, err)
	}
	return nil
}

// deleteRenewed deletes the konnector's Secret of a Connection that is
// torn down (the garbage collector would, once the Connection is gone;
// this does not wait for it). Only a Secret this Connection controls.
func (r *Reconciler) deleteRenewed(ctx context.Context, conn *kbindv1alpha1.Connection) error {
	if !slices.Contains(r.SecretNamespaces, conn.Spec.KubeconfigSecretRef.Namespace) {
		// Never resolved, so never renewed: nothing of ours is there.
		return nil
	}
	secret, ours, err := r.renewedSecret(ctx, conn)
	if err != nil || !ours {
		return err
	}
	if err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the renewed-token Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// credentialConditions are CredentialsRenewed (only for a credential kbind
// renews) and CredentialsExpiring.
func credentialConditions(v credentialView, lead time.Duration, now time.Time) []patch.Condition {
	var out []patch.Condition
	c := v.inUse
	if v.renews {
		sa := c.ServiceAccount.Namespace + "/" + c.ServiceAccount.Name
		switch {
		case v.failure != nil:
			out = append(out, cond(kbindv1alpha1.ConditionCredentialsRenewed, metav1.ConditionFalse, kbindv1alpha1.ReasonRenewalFailed,
				"%s; retrying at %s; the token in use expires at %s. The provider must let ServiceAccount %s create its own token (serviceaccounts/token create; `kubectl kbind grant` grants it)",
				v.failure.Error(), stamp(v.retryAt), stamp(c.ExpiresAt), sa))
		case v.persistErr != nil:
			out = append(out, cond(kbindv1alpha1.ConditionCredentialsRenewed, metav1.ConditionFalse, kbindv1alpha1.ReasonRenewalFailed,
				"the token was renewed and is in use, but could not be kept: %s; a restarted konnector would use the kubeconfig's token. The konnector needs create and update on Secrets in namespace %s",
				v.persistErr.Error(), v.secretNamespace()))
		case v.source == kbindv1alpha1.CredentialSourceRenewed:
			out = append(out, cond(kbindv1alpha1.ConditionCredentialsRenewed, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
				"the token of %s was renewed at %s; it expires at %s and is renewed again from %s", c.Subject, stamp(c.IssuedAt), stamp(c.ExpiresAt), stamp(c.RenewAt())))
		default:
			out = append(out, cond(kbindv1alpha1.ConditionCredentialsRenewed, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
				"the token of %s expires at %s and is renewed from %s", c.Subject, stamp(c.ExpiresAt), stamp(c.RenewAt())))
		}
	}
	switch reason := credentials.Expiring(c, v.renews, v.failure != nil, lead, now); {
	case reason == kbindv1alpha1.ReasonExpired:
		out = append(out, cond(kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionTrue, reason,
			"the %s expired at %s: the provider refuses it. %s", c.Describe(), stamp(c.ExpiresAt), renewHint(c)))
	case reason != "":
		out = append(out, cond(kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionTrue, reason,
			"the %s expires at %s and will not be renewed in time. %s", c.Describe(), stamp(c.ExpiresAt), renewHint(c)))
	case !c.Expires():
		out = append(out, cond(kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected,
			"the %s has no expiry kbind can read", c.Describe()))
	case v.renews:
		out = append(out, cond(kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected,
			"the %s expires at %s and is renewed before", c.Describe(), stamp(c.ExpiresAt)))
	default:
		out = append(out, cond(kbindv1alpha1.ConditionCredentialsExpiring, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected,
			"the %s expires at %s; this is reported from %s", c.Describe(), stamp(c.ExpiresAt), stamp(c.WarnAt(lead))))
	}
	return out
}

func (v credentialView) secretNamespace() string {
	if v.secret != nil {
		return v.secret.Namespace
	}
	return "of the kubeconfig Secret"
}

// renewHint says how to replace a credential kbind does not renew.
func renewHint(c credentials.Credential) string {
	switch c.Kind {
	case kbindv1alpha1.CredentialServiceAccountToken:
		return "Run `kubectl kbind grant` for this consumer on the provider again and apply the new bundle, or fix the renewal (CredentialsRenewed)"
	case kbindv1alpha1.CredentialClientCertificate:
		return "Issue a new client certificate and update the kubeconfig Secret (spec.kubeconfigSecretRef)"
	}
	return "Put a new credential into the kubeconfig Secret (spec.kubeconfigSecretRef); `kubectl kbind grant` issues one that the konnector renews itself"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// credentialStatus is status.credentials.
func credentialStatus(v credentialView) *kbindv1alpha1.ConnectionCredentials {
	c := v.inUse
	out := &kbindv1alpha1.ConnectionCredentials{Kind: c.Kind, Subject: c.Subject, Renews: v.renews, Source: v.source, RenewedSecretRef: v.secret}
	if c.Expires() {
		out.ExpiresAt = &metav1.Time{Time: c.ExpiresAt}
	}
	if v.renews {
		out.RenewAt = &metav1.Time{Time: c.RenewAt()}
	}
	if v.source == kbindv1alpha1.CredentialSourceRenewed && !c.IssuedAt.IsZero() {
		out.LastRenewed = &metav1.Time{Time: c.IssuedAt}
	}
	return out
}

// credentialsDue is how long until the credential's state changes on its
// own — a renewal or retry falls due, a warning starts, it expires — 0 for
// never.
func credentialsDue(v credentialView, lead time.Duration, now time.Time) time.Duration {
	if !v.known {
		return 0
	}
	var due []time.Time
	if v.renews {
		if v.failure != nil {
			due = append(due, v.retryAt)
		} else {
			due = append(due, v.inUse.RenewAt())
		}
	}
	if v.inUse.Expires() {
		due = append(due, v.inUse.WarnAt(lead), v.inUse.ExpiresAt)
	}
	var next time.Duration
	for _, t := range due {
		if d := t.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	if next > 0 {
		// Never wake before the moment, and not every millisecond either.
		next = max(next+50*time.Millisecond, time.Second)
	}
	return next
}

// leaseInfo is what the heartbeat Lease says about this konnector and its
// credential.
func (r *Reconciler) leaseInfo(v credentialView) heartbeat.Info {
	info := heartbeat.Info{KonnectorVersion: r.Version, APIVersion: kbindv1alpha1.GroupVersion.String()}
	if v.known {
		info.User, info.CredentialKind, info.Renews = v.inUse.Subject, string(v.inUse.Kind), v.renews
		if v.inUse.Expires() {
			info.CredentialExpiry = stamp(v.inUse.ExpiresAt)
		}
	}
	return info
}

// reportCredentials sets status.credentials, the conditions, the expiry
// metric, and an Event when CredentialsExpiring changes reason.
func (r *Reconciler) reportCredentials(conn *kbindv1alpha1.Connection, v credentialView, now time.Time) {
	if !v.known {
		// No usable kubeconfig: nothing is known about a credential.
		meta.RemoveStatusCondition(&conn.Status.Conditions, string(kbindv1alpha1.ConditionCredentialsRenewed))
		meta.RemoveStatusCondition(&conn.Status.Conditions, string(kbindv1alpha1.ConditionCredentialsExpiring))
		conn.Status.Credentials = nil
		metrics.CredentialsExpiry.DeleteLabelValues(conn.Name)
		metrics.CredentialsExpiring.DeleteLabelValues(conn.Name)
		return
	}
	conds := credentialConditions(v, r.ExpiryWarning, now)
	if !v.renews {
		meta.RemoveStatusCondition(&conn.Status.Conditions, string(kbindv1alpha1.ConditionCredentialsRenewed))
	}
	patch.SetConditions(&conn.Status.Conditions, conds, conn.Generation)
	conn.Status.Credentials = credentialStatus(v)
	if v.inUse.Expires() {
		metrics.CredentialsExpiry.WithLabelValues(conn.Name).Set(float64(v.inUse.ExpiresAt.Unix()))
	} else {
		metrics.CredentialsExpiry.DeleteLabelValues(conn.Name)
	}
	reason := credentials.Expiring(v.inUse, v.renews, v.failure != nil, r.ExpiryWarning, now)
	metrics.CredentialsExpiring.WithLabelValues(conn.Name).Set(map[bool]float64{true: 1, false: 0}[reason != ""])
	st := r.creds.get(conn.Name)
	announce := st.expiring != reason
	st.expiring = reason
	r.creds.set(conn.Name, st)
	if announce && reason != "" {
		for _, c := range conds {
			if c.Type == kbindv1alpha1.ConditionCredentialsExpiring {
				r.event(conn, corev1.EventTypeWarning, string(reason), "%s", c.Message)
			}
		}
	}
}

// event records an Event on the Connection when a recorder is set.
func (r *Reconciler) event(conn *kbindv1alpha1.Connection, eventType, reason, format string, args ...any) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(conn, nil, eventType, reason, "Credentials", format, args...)
}
