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
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/credentials"
)

var credT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func saToken(lifetime time.Duration) credentials.Credential {
	return credentials.Credential{Kind: kbindv1alpha1.CredentialServiceAccountToken, Subject: "system:serviceaccount:kbind:c",
		ServiceAccount: types.NamespacedName{Namespace: "kbind", Name: "c"}, IssuedAt: credT0, ExpiresAt: credT0.Add(lifetime)}
}

func TestCredentialConditions(t *testing.T) {
	week := 7 * 24 * time.Hour
	cert := credentials.Credential{Kind: kbindv1alpha1.CredentialClientCertificate, Subject: "team-a", IssuedAt: credT0, ExpiresAt: credT0.Add(90 * 24 * time.Hour)}
	type want struct {
		status    metav1.ConditionStatus
		reason    kbindv1alpha1.Reason
		fragments []string
	}
	for _, tc := range []struct {
		name              string
		v                 credentialView
		now               time.Time
		renewed, expiring *want
	}{
		{"a token that renews, not due", credentialView{inUse: saToken(720 * time.Hour), renews: true, source: kbindv1alpha1.CredentialSourceKubeconfig}, credT0.Add(time.Hour),
			&want{metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, []string{"is renewed from 2026-12-21T00:00:00Z"}},
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, []string{"renewed before"}}},
		{"a renewed token", credentialView{inUse: saToken(720 * time.Hour), renews: true, source: kbindv1alpha1.CredentialSourceRenewed}, credT0.Add(time.Hour),
			&want{metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, []string{"was renewed at 2026-12-01T00:00:00Z"}},
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, nil}},
		{"a one-hour token that renews is never expiring", credentialView{inUse: saToken(time.Hour), renews: true}, credT0.Add(50 * time.Minute),
			&want{metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, nil},
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, nil}},
		{"renewal refused, early", credentialView{inUse: saToken(720 * time.Hour), renews: true, failure: errors.New("requesting a new token: forbidden"), retryAt: credT0.Add(481 * time.Hour)}, credT0.Add(480 * time.Hour),
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonRenewalFailed, []string{"forbidden", "retrying at 2026-12-21T01:00:00Z", "serviceaccounts/token create"}},
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, nil}},
		{"renewal refused, within the lead", credentialView{inUse: saToken(720 * time.Hour), renews: true, failure: errors.New("forbidden")}, credT0.Add(700 * time.Hour),
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonRenewalFailed, nil},
			&want{metav1.ConditionTrue, kbindv1alpha1.ReasonExpiresSoon, []string{"expires at 2026-12-31T00:00:00Z", "kubectl kbind grant"}}},
		{"renewed but not kept", credentialView{inUse: saToken(720 * time.Hour), renews: true, source: kbindv1alpha1.CredentialSourceRenewed, persistErr: errors.New("writing Secret kbind/x: forbidden")}, credT0,
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonRenewalFailed, []string{"could not be kept", "create and update on Secrets"}},
			&want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, nil}},
		{"a certificate far from expiry", credentialView{inUse: cert}, credT0.Add(24 * time.Hour),
			nil, &want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, []string{"reported from 2027-02-11T00:00:00Z"}}},
		{"a certificate within the lead", credentialView{inUse: cert}, credT0.Add(85 * 24 * time.Hour),
			nil, &want{metav1.ConditionTrue, kbindv1alpha1.ReasonExpiresSoon, []string{"ClientCertificate of team-a expires at 2027-03-01T00:00:00Z", "Issue a new client certificate"}}},
		{"an expired certificate", credentialView{inUse: cert}, credT0.Add(91 * 24 * time.Hour),
			nil, &want{metav1.ConditionTrue, kbindv1alpha1.ReasonExpired, []string{"expired at 2027-03-01T00:00:00Z"}}},
		{"a legacy token without expiry", credentialView{inUse: credentials.Credential{Kind: kbindv1alpha1.CredentialToken}}, credT0,
			nil, &want{metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected, []string{"no expiry"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[kbindv1alpha1.ConditionType]*want{}
			for _, c := range credentialConditions(tc.v, week, tc.now) {
				got[c.Type] = &want{c.Status, c.Reason, []string{c.Message}}
			}
			for typ, w := range map[kbindv1alpha1.ConditionType]*want{kbindv1alpha1.ConditionCredentialsRenewed: tc.renewed, kbindv1alpha1.ConditionCredentialsExpiring: tc.expiring} {
				g := got[typ]
				switch {
				case w == nil && g != nil:
					t.Errorf("%s = %s/%s, want none", typ, g.status, g.reason)
				case w == nil:
				case g == nil:
					t.Errorf("no %s, want %s/%s", typ, w.status, w.reason)
				case g.status != w.status || g.reason != w.reason:
					t.Errorf("%s = %s/%s (%s), want %s/%s", typ, g.status, g.reason, g.fragments[0], w.status, w.reason)
				default:
					for _, f := range w.fragments {
						if !strings.Contains(g.fragments[0], f) {
							t.Errorf("%s message %q lacks %q", typ, g.fragments[0], f)
						}
					}
				}
			}
		})
	}
}

func TestCredentialsDue(t *testing.T) {
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		name string
		v    credentialView
		now  time.Time
		want time.Duration
	}{
		{"unknown", credentialView{}, credT0, 0},
		{"renewal due first", credentialView{known: true, inUse: saToken(720 * time.Hour), renews: true}, credT0, 480*time.Hour + 50*time.Millisecond},
		{"retry after a failure", credentialView{known: true, inUse: saToken(720 * time.Hour), renews: true, failure: errors.New("x"), retryAt: credT0.Add(481 * time.Hour)}, credT0.Add(480 * time.Hour), time.Hour + 50*time.Millisecond},
		{"a certificate: its warning", credentialView{known: true, inUse: credentials.Credential{IssuedAt: credT0, ExpiresAt: credT0.Add(30 * 24 * time.Hour)}}, credT0, 23*24*time.Hour + 50*time.Millisecond},
		{"a certificate within the lead: its expiry", credentialView{known: true, inUse: credentials.Credential{IssuedAt: credT0, ExpiresAt: credT0.Add(30 * 24 * time.Hour)}}, credT0.Add(29 * 24 * time.Hour), 24*time.Hour + 50*time.Millisecond},
		{"expired: nothing more to wait for", credentialView{known: true, inUse: credentials.Credential{IssuedAt: credT0, ExpiresAt: credT0.Add(time.Hour)}}, credT0.Add(2 * time.Hour), 0},
		{"no expiry", credentialView{known: true, inUse: credentials.Credential{Kind: kbindv1alpha1.CredentialToken}}, credT0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := credentialsDue(tc.v, week, tc.now); got != tc.want {
				t.Errorf("credentialsDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenewalBackoff(t *testing.T) {
	long := saToken(720 * time.Hour)
	for _, tc := range []struct {
		failures int
		inUse    credentials.Credential
		now      time.Time
		want     time.Duration
	}{
		{1, long, credT0.Add(480 * time.Hour), 10 * time.Second},
		{2, long, credT0.Add(480 * time.Hour), 20 * time.Second},
		{6, long, credT0.Add(480 * time.Hour), 5 * time.Minute},
		{30, long, credT0.Add(480 * time.Hour), 5 * time.Minute},
		// 400 s left: never more than a tenth of it apart.
		{6, saToken(1200 * time.Second), credT0.Add(800 * time.Second), 40 * time.Second},
		// Expired: at least a second.
		{3, saToken(time.Hour), credT0.Add(2 * time.Hour), 40 * time.Second},
	} {
		if got := renewalBackoff(tc.failures, tc.inUse, tc.now); got != tc.want {
			t.Errorf("renewalBackoff(%d, %v left) = %v, want %v", tc.failures, tc.inUse.ExpiresAt.Sub(tc.now), got, tc.want)
		}
	}
}

func TestRenewedSecretName(t *testing.T) {
	if got := renewedSecretName("team-a"); got != "team-a-kbind-token" {
		t.Errorf("got %s", got)
	}
	long := strings.Repeat("a", 250)
	got := renewedSecretName(long)
	if len(got) > 253 || !strings.HasSuffix(got, "-kbind-token") || got == renewedSecretName(long[:249]+"b") {
		t.Errorf("long name %q (%d)", got, len(got))
	}
}
