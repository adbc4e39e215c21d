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

package doctor

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func withCredentials(creds kbindv1alpha1.ConnectionCredentials, conds ...metav1.Condition) func(*kbindv1alpha1.Connection) {
	return func(c *kbindv1alpha1.Connection) {
		c.Status.Credentials = &creds
		c.Status.Conditions = append(c.Status.Conditions, conds...)
	}
}

func in(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(d))
	return &t
}

// TestCheckCredentials: a credential that expires within 7 days and is not
// renewed, or that the konnector says expires soon, is a warning with the
// date and the command that renews it; an expired one is an error; a
// failed renewal is reported with the provider's refusal and what to
// check. Only kind, subject and expiry are ever shown.
func TestCheckCredentials(t *testing.T) {
	const renew = "kubectl kbind grant a --apis widgets.example.org --isolation Namespace --connection provider --secret-namespace kbind --context=provider"
	saToken := kbindv1alpha1.ConnectionCredentials{Kind: kbindv1alpha1.CredentialServiceAccountToken, Subject: "system:serviceaccount:kbind:kbind-consumer-a"}
	cert := kbindv1alpha1.ConnectionCredentials{Kind: kbindv1alpha1.CredentialClientCertificate, Subject: "team-x"}
	at := func(c kbindv1alpha1.ConnectionCredentials, d time.Duration, renews bool) kbindv1alpha1.ConnectionCredentials {
		c.ExpiresAt, c.Renews = in(d), renews
		return c
	}
	expiring := metav1.Condition{Type: string(kbindv1alpha1.ConditionCredentialsExpiring), Status: metav1.ConditionTrue, Reason: string(kbindv1alpha1.ReasonExpiresSoon),
		Message: "the client certificate expires at 2026-12-20T00:00:00Z"}
	renewalFailed := metav1.Condition{Type: string(kbindv1alpha1.ConditionCredentialsRenewed), Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonRenewalFailed),
		Message: `serviceaccounts "kbind-consumer-a" is forbidden: User cannot create resource "serviceaccounts/token"`}
	for _, tc := range []struct {
		name   string
		conn   kbindv1alpha1.Connection
		checks []string
		sev    Severity
		has    []string
	}{
		{"no credential status (an older konnector)", connection(), []string{}, "", nil},
		{"a token that expires in 30 days", connection(withCredentials(at(saToken, 30*24*time.Hour, false))), []string{}, "", nil},
		{"a token that renews, expiring in 3 days", connection(withCredentials(at(saToken, 72*time.Hour, true))), []string{}, "", nil},
		{"a granted token expiring in 3 days", connection(withCredentials(at(saToken, 72*time.Hour, false))), []string{"connection.credentialExpiry"}, SeverityWarning,
			[]string{"expires at 2026-12-06T12:00:00Z", "in 3d", "ServiceAccountToken", "system:serviceaccount:kbind:kbind-consumer-a", renew + " > bundle.yaml", "apply -f bundle.yaml"}},
		{"a certificate expiring in 3 days", connection(withCredentials(at(cert, 72*time.Hour, false))), []string{"connection.credentialExpiry"}, SeverityWarning,
			[]string{"expires at 2026-12-06T12:00:00Z", "ClientCertificate", "team-x", "issue a new client certificate for team-x", "Secret kbind/provider-kubeconfig"}},
		{"an expired certificate", connection(withCredentials(at(cert, -time.Hour, false))), []string{"connection.credentialExpiry"}, SeverityError,
			[]string{"expired at 2026-12-03T11:00:00Z", "issue a new client certificate"}},
		{"the konnector says it expires soon (its lead time)", connection(withCredentials(at(cert, 20*24*time.Hour, false), expiring)), []string{"connection.credentialExpiry"}, SeverityWarning,
			[]string{"CredentialsExpiring=True reason ExpiresSoon", "expires at 2026-12-23T12:00:00Z"}},
		{"a renewal that fails", connection(withCredentials(at(saToken, 20*24*time.Hour, true), renewalFailed)), []string{"connection.credentialRenewal"}, SeverityWarning,
			[]string{"CredentialsRenewed=False reason RenewalFailed", "is forbidden", "serviceaccounts/token", "admission policy", "expires at 2026-12-23T12:00:00Z"}},
	} {
		fs := checkCredentials(tc.conn, now, renew, cmd)
		if got := checks(fs); strings.Join(got, ",") != strings.Join(tc.checks, ",") {
			t.Errorf("%s: checks %v, want %v", tc.name, got, tc.checks)
			continue
		}
		if len(fs) == 0 {
			continue
		}
		f := fs[0]
		if f.Severity != tc.sev {
			t.Errorf("%s: severity %s, want %s", tc.name, f.Severity, tc.sev)
		}
		text := f.Problem + " | " + f.Evidence + " | " + f.Fix
		for _, want := range tc.has {
			if !strings.Contains(text, want) {
				t.Errorf("%s: finding lacks %q: %s", tc.name, want, text)
			}
		}
	}
	// Without a grant command (a credential not made by grant), the fix
	// says what to renew and where to put it.
	fs := checkCredentials(connection(withCredentials(at(kbindv1alpha1.ConnectionCredentials{Kind: kbindv1alpha1.CredentialToken, Subject: "oidc:alice"}, time.Hour, false))), now, "", cmd)
	if len(fs) != 1 || !strings.Contains(fs[0].Fix, "Secret kbind/provider-kubeconfig") || !strings.Contains(fs[0].Fix, "oidc:alice") {
		t.Errorf("a token not made by grant: %+v", fs)
	}
}

func TestSkew(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want SkewVerdict
	}{
		{"0.4.0", "0.4.3", SkewSupported},
		{"0.4.0", "0.5.1", SkewSupported},
		{"v0.5.0", "0.4.0", SkewSupported},
		{"0.4.0-rc.1", "0.3.9", SkewSupported},
		{"0.4.0", "0.6.0", SkewUnsupported},
		{"0.6.0", "0.4.0", SkewUnsupported},
		{"1.0.0", "0.9.0", SkewUnsupported},
		{"1.2.0", "2.2.0", SkewUnsupported},
		{"dev", "0.4.0", SkewUnknown},
		{"0.4.0", "", SkewUnknown},
		{"0.4.0", "unknown", SkewUnknown},
		{"0.4.0", "latest", SkewUnknown},
		{"0.4", "0.4.0", SkewSupported},
	} {
		if got := Skew(tc.a, tc.b); got != tc.want {
			t.Errorf("Skew(%q, %q) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCheckVersions: a konnector outside the supported skew of this
// kubectl-kbind is a warning, an API version the cluster's CRDs do not
// serve an error; unknown versions are no finding, and the checked line
// says what was compared.
func TestCheckVersions(t *testing.T) {
	withVersion := func(v string) kbindv1alpha1.Connection {
		return connection(func(c *kbindv1alpha1.Connection) { c.Status.KonnectorVersion = v })
	}
	served := []string{"core.kbind.io/v1alpha1"}
	for _, tc := range []struct {
		name       string
		conn       kbindv1alpha1.Connection
		cli        string
		apiVersion string
		served     []string
		checks     []string
		checked    string
		has        []string
	}{
		{"the same minor", withVersion("0.4.1"), "0.4.0", "core.kbind.io/v1alpha1", served, []string{}, "versions of Connection provider: konnector 0.4.1, kubectl-kbind 0.4.0 (supported)", nil},
		{"a konnector two minors behind", withVersion("0.2.0"), "0.4.0", "core.kbind.io/v1alpha1", served, []string{"connection.versionSkew"},
			"versions of Connection provider: konnector 0.2.0, kubectl-kbind 0.4.0 (outside the supported skew)",
			[]string{"konnector 0.2.0", "kubectl-kbind 0.4.0", "one minor version", "docs/versioning.md", "\nhelm upgrade konnector charts/konnector -n kbind --reuse-values\n"}},
		{"a development build", withVersion("0.2.0"), "dev", "", served, []string{}, "versions of Connection provider: konnector 0.2.0, kubectl-kbind dev (skew unknown)", nil},
		{"no version written yet", withVersion(""), "0.4.0", "", served, []string{}, "versions of Connection provider: konnector unknown, kubectl-kbind 0.4.0 (skew unknown)", nil},
		{"an API version the CRDs do not serve", withVersion("0.4.0"), "0.4.0", "core.kbind.io/v1beta1", served, []string{"connection.apiVersion"},
			"versions of Connection provider: konnector 0.4.0, kubectl-kbind 0.4.0 (supported)", []string{"core.kbind.io/v1beta1", "core.kbind.io/v1alpha1", "CRDs", "helm upgrade konnector charts/konnector -n kbind --reuse-values   #"}},
		{"the served versions are unknown", withVersion("0.4.0"), "0.4.0", "core.kbind.io/v1beta1", nil, []string{},
			"versions of Connection provider: konnector 0.4.0, kubectl-kbind 0.4.0 (supported)", nil},
	} {
		helm := cmd
		helm.KonnectorRelease = &HelmRelease{Name: "konnector", Namespace: "kbind"}
		fs, checked := checkVersions(tc.conn, tc.cli, tc.apiVersion, tc.served, helm)
		if got := checks(fs); strings.Join(got, ",") != strings.Join(tc.checks, ",") {
			t.Errorf("%s: checks %v, want %v", tc.name, got, tc.checks)
		}
		if checked != tc.checked {
			t.Errorf("%s: checked %q, want %q", tc.name, checked, tc.checked)
		}
		for _, f := range fs {
			text := f.Problem + " | " + f.Evidence + " | " + f.Fix + " | " + f.Doc
			for _, want := range tc.has {
				if !strings.Contains(text, want) {
					t.Errorf("%s: finding lacks %q: %s", tc.name, want, text)
				}
			}
		}
	}
}
