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
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/version"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
	"github.com/kbind/kbind/engine/credentials"
)

// The sections of the docs the credential and version findings link to.
const (
	docCredentials = "docs/troubleshooting.md#credentials-expire-soon"
	docVersions    = "docs/versioning.md"
)

// ExpiryWarning is how long before a credential that is not renewed
// expires doctor warns (the konnector's default lead time).
const ExpiryWarning = credentials.DefaultExpiryWarning

// checkCredentials reads what the konnector says of a Connection's
// credential (status.credentials and its conditions) — kind, subject and
// expiry, never the credential — and reports one expiring without renewal,
// one expired, and a renewal that fails. renew is the kubectl kbind grant
// that issues a new one ("" when the credential was not made by grant).
func checkCredentials(c kbindv1alpha1.Connection, now time.Time, renew string, cmd Commands) []Finding {
	creds := c.Status.Credentials
	if creds == nil {
		return nil
	}
	obj := connectionObject(c)
	var out []Finding
	expiring := meta(c.Status.Conditions, kbindv1alpha1.ConditionCredentialsExpiring)
	expiringTrue := expiring != nil && expiring.Status == metav1.ConditionTrue
	expired := (creds.ExpiresAt != nil && !creds.ExpiresAt.After(now)) || (expiringTrue && expiring.Reason == string(kbindv1alpha1.ReasonExpired))
	soon := creds.ExpiresAt != nil && !creds.Renews && creds.ExpiresAt.Sub(now) <= ExpiryWarning
	if expired || soon || expiringTrue {
		f := Finding{Check: "connection.credentialExpiry", Severity: SeverityWarning, Object: obj, Field: "status.credentials",
			Problem:  fmt.Sprintf("the Connection's %s %s and is not renewed by the konnector: then the provider refuses it and nothing syncs", credentialName(creds.Kind), expiryString(creds.ExpiresAt, now)),
			Evidence: credentialEvidence(*creds, now),
			Fix:      renewFix(c, renew, cmd),
			Doc:      docCredentials,
		}
		if expiringTrue {
			f.Evidence += "; " + conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionCredentialsExpiring)
		}
		if expired {
			f.Severity = SeverityError
			f.Problem = fmt.Sprintf("the Connection's %s %s: the provider refuses it and nothing syncs", credentialName(creds.Kind), expiryString(creds.ExpiresAt, now))
		}
		out = append(out, f)
	}
	if cond := meta(c.Status.Conditions, kbindv1alpha1.ConditionCredentialsRenewed); cond != nil && cond.Status == metav1.ConditionFalse {
		sa, consumer := "<service account>", "<consumer>"
		if m := grantedSA.FindStringSubmatch(creds.Subject); m != nil {
			sa, consumer = "-n "+m[1]+" serviceaccounts/"+access.Name(m[2]), m[2]
		}
		fix := fmt.Sprintf("# on the provider: may the ServiceAccount create a token for itself, and does the token admission policy admit it?\n"+
			"%s auth can-i create %s --subresource=token --as=%s\n"+
			"%s get validatingadmissionpolicies,validatingadmissionpolicybindings -l %s=%s",
			cmd.Provider, sa, orPlaceholder(creds.Subject, "<identity>"), cmd.Provider, access.ConsumerLabel, consumer)
		if renew != "" {
			fix += "\n# granting again installs both (and prints a new bundle to apply):\n" + renew + " > bundle.yaml\n" + cmd.Consumer + " apply -f bundle.yaml"
		}
		out = append(out, Finding{Check: "connection.credentialRenewal", Severity: SeverityWarning, Object: obj, Field: "status.conditions[CredentialsRenewed]",
			Problem:  fmt.Sprintf("the konnector cannot renew the Connection's %s; the one in use %s", credentialName(creds.Kind), expiryString(creds.ExpiresAt, now)),
			Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionCredentialsRenewed) + "; status.credentials: " + credentialEvidence(*creds, now),
			Fix:      fix,
			Doc:      docCredentials,
		})
	}
	return out
}

// renewFix is how a credential is replaced: a new grant bundle for a
// token grant made, else a new credential of its kind in the Connection's
// kubeconfig Secret.
func renewFix(c kbindv1alpha1.Connection, renew string, cmd Commands) string {
	creds := c.Status.Credentials
	ref := c.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = kbindv1alpha1.DefaultKubeconfigKey
	}
	update := fmt.Sprintf("%s -n %s create secret generic %s --from-file=%s=<new kubeconfig> --dry-run=client -o yaml | %s apply -f -",
		cmd.Consumer, ref.Namespace, ref.Name, key, cmd.Consumer)
	subject := orPlaceholder(creds.Subject, "the Connection's identity")
	switch {
	case renew != "" && (creds.Kind == kbindv1alpha1.CredentialServiceAccountToken || creds.Kind == kbindv1alpha1.CredentialToken):
		return "# on the provider, grant again (a new token), then apply the bundle on the consumer:\n" + renew + " > bundle.yaml\n" + cmd.Consumer + " apply -f bundle.yaml"
	case creds.Kind == kbindv1alpha1.CredentialClientCertificate:
		return fmt.Sprintf("# issue a new client certificate for %s (signed by a CA the provider trusts), put it in a kubeconfig and update Secret %s/%s key %s:\n%s",
			subject, ref.Namespace, ref.Name, key, update)
	}
	return fmt.Sprintf("# issue a new credential for %s on the provider, put it in a kubeconfig and update Secret %s/%s key %s:\n%s",
		subject, ref.Namespace, ref.Name, key, update)
}

func credentialName(kind kbindv1alpha1.CredentialKind) string {
	switch kind {
	case kbindv1alpha1.CredentialServiceAccountToken:
		return "ServiceAccount token"
	case kbindv1alpha1.CredentialToken:
		return "bearer token"
	case kbindv1alpha1.CredentialClientCertificate:
		return "client certificate"
	}
	return "credential"
}

func expiryString(at *metav1.Time, now time.Time) string {
	switch {
	case at == nil:
		return "has no known expiry"
	case !at.After(now):
		return fmt.Sprintf("expired at %s (%s ago)", at.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(at.Time)))
	}
	return fmt.Sprintf("expires at %s (in %s)", at.UTC().Format(time.RFC3339), duration.HumanDuration(at.Sub(now)))
}

// credentialEvidence is kind, subject and expiry — never the credential.
func credentialEvidence(c kbindv1alpha1.ConnectionCredentials, now time.Time) string {
	s := fmt.Sprintf("kind %s, subject %s, %s", c.Kind, orPlaceholder(c.Subject, "unknown"), expiryString(c.ExpiresAt, now))
	if c.Renews {
		s += ", renews"
	}
	return s
}

// SkewVerdict is whether two kbind versions are within the supported skew
// (docs/versioning.md).
type SkewVerdict string

// The verdicts.
const (
	SkewSupported   SkewVerdict = "supported"
	SkewUnsupported SkewVerdict = "outside the supported skew"
	// SkewUnknown: a version is a development build ("dev"), empty, or
	// not a release version.
	SkewUnknown SkewVerdict = "skew unknown"
)

// Skew decides the supported skew of two kbind components (the konnector
// and kubectl-kbind, or the konnector and the backend): the same major
// version and minor versions at most one apart.
func Skew(a, b string) SkewVerdict {
	amaj, amin, aok := parseVersion(a)
	bmaj, bmin, bok := parseVersion(b)
	switch {
	case !aok || !bok:
		return SkewUnknown
	case amaj != bmaj || amin-bmin > 1 || bmin-amin > 1:
		return SkewUnsupported
	}
	return SkewSupported
}

// parseVersion reads MAJOR.MINOR of a release version ("v" prefix,
// patch, pre-release and build metadata allowed).
func parseVersion(v string) (major, minor int, ok bool) {
	parsed, err := version.ParseGeneric(v)
	if err != nil || len(parsed.Components()) > 3 || !strings.Contains(strings.TrimPrefix(v, "v"), ".") {
		return 0, 0, false
	}
	return int(parsed.Major()), int(parsed.Minor()), true
}

// checkVersions compares the konnector serving a Connection
// (status.konnectorVersion) with this kubectl-kbind, and the core.kbind.io
// API version the konnector serves (its Lease's annotation, "" unknown)
// with those the cluster's kbind CRDs serve (nil unknown). checked says
// what was compared, for the report.
func checkVersions(c kbindv1alpha1.Connection, cliVersion, apiVersion string, served []string, cmd Commands) ([]Finding, string) {
	konnector := orPlaceholder(c.Status.KonnectorVersion, "unknown")
	cli := orPlaceholder(cliVersion, "unknown")
	verdict := Skew(konnector, cli)
	checked := fmt.Sprintf("versions of Connection %s: konnector %s, kubectl-kbind %s (%s)", c.Name, konnector, cli, verdict)
	var out []Finding
	if verdict == SkewUnsupported {
		out = append(out, Finding{Check: "connection.versionSkew", Severity: SeverityWarning, Object: connectionObject(c), Field: "status.konnectorVersion",
			Problem: fmt.Sprintf("Connection %s is served by konnector %s, and this is kubectl-kbind %s: kbind supports the two within one minor version of each other, of the same major version; doctor's advice and grant's bundles may not fit this konnector",
				c.Name, konnector, cli),
			Evidence: fmt.Sprintf("%s; kubectl-kbind --version: %s", konnector, cli),
			Fix: fmt.Sprintf("# upgrade the older of the two to the other's release; the konnector (with the chart of its release):\n%s\n"+
				"# or kubectl-kbind: install the kubectl-kbind of release %s\n%s get deployment -A -l app.kubernetes.io/name=konnector -o jsonpath='{..image}'   # the konnector's release", cmd.helmUpgrade(), konnector, cmd.Consumer),
			Doc: docVersions,
		})
	}
	if apiVersion != "" && len(served) > 0 && !slices.Contains(served, apiVersion) {
		out = append(out, Finding{Check: "connection.apiVersion", Severity: SeverityError, Object: connectionObject(c),
			Problem:  fmt.Sprintf("the konnector serving Connection %s (%s) serves %s, which this cluster's kbind CRDs do not serve: the CRDs and the konnector come from different releases", c.Name, konnector, apiVersion),
			Evidence: fmt.Sprintf("the heartbeat Lease's %s is %s; the CRDs serve %s", kbindv1alpha1.APIVersionAnnotation, apiVersion, strings.Join(served, ", ")),
			Fix: cmd.helmUpgrade() + "   # the chart installs the CRDs of its release (installCRDs)\n" +
				"# with the CRDs installed otherwise: apply api/crds of the konnector's release",
			Doc: docVersions,
		})
	}
	return out, checked
}
