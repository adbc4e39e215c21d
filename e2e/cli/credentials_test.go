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

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// buildPlugin builds kubectl-kbind stamped with version, as make build
// stamps it (LDFLAGS).
func buildPlugin(t *testing.T, version string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-kbind")
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/kbind/kbind/flagconfig/buildinfo.version="+version, "-o", bin, "github.com/kbind/kbind/cli/cmd/kubectl-kbind")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-kbind %s: %v\n%s", version, err, out)
	}
	return bin
}

// run runs bin with args and returns stdout, stderr and the exit code.
func run(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestDoctorCredentialsAndVersions: doctor reads what the konnector
// reports of a Connection's credential and version (written here by hand,
// as a konnector would) — a granted token that expires in 3 days without
// renewal, a renewal the provider refuses, a konnector far from this
// kubectl-kbind's version, a konnector serving an API version the CRDs do
// not — and reports each with its date and fix; no byte of the token
// appears in anything doctor or consumers prints.
func TestDoctorCredentialsAndVersions(t *testing.T) {
	t.Parallel() // its own pair: the Connection "provider" its status is written on, team-a on the provider
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org")
	bundle := mustPlugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "team-a.yaml", bundle))
	token := decode(t, kubectl(t, consumer, "get", "secret", "-n", "kbind", "provider-kubeconfig", "-o", `jsonpath={.data.kubeconfig}`))
	token = token[strings.Index(token, "token: ")+len("token: "):]
	token = strings.Trim(strings.SplitN(token, "\n", 2)[0], `"' `)
	if len(token) < 100 {
		t.Fatalf("no token found in the bundle's kubeconfig (%d characters)", len(token))
	}
	versioned := buildPlugin(t, "0.9.0")
	if out, _, code := run(t, versioned, "--version"); code != 0 || !strings.HasPrefix(out, "kubectl-kbind 0.9.0 (revision ") {
		t.Errorf("--version of a stamped build: exit %d, %q", code, out)
	}

	// No konnector runs: the status is what one would have written.
	const localUID = "eeeeeeee-5555-4000-8000-000000000005"
	expiry := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	ts := time.Now().UTC().Format(time.RFC3339)
	kubectl(t, consumer, "patch", "connection", "provider", "--subresource=status", "--type=merge", "-p", fmt.Sprintf(`{"status":{
  "localClusterUID": %q,
  "konnectorVersion": "0.1.0",
  "exportedAPIs": [{"name": "widgets.example.org", "group": "example.org", "resource": "widgets", "scope": "Namespaced"}],
  "credentials": {"kind": "ServiceAccountToken", "subject": "system:serviceaccount:kbind:kbind-consumer-team-a", "expiresAt": %q, "renews": false, "source": "Kubeconfig"},
  "conditions": [{"type": "CredentialsRenewed", "status": "False", "reason": "RenewalFailed", "lastTransitionTime": %q,
    "message": "serviceaccounts \"kbind-consumer-team-a\" is forbidden: User \"system:serviceaccount:kbind:kbind-consumer-team-a\" cannot create resource \"serviceaccounts/token\""}]}}`,
		localUID, expiry.Format(time.RFC3339), ts))
	kubectl(t, provider, "apply", "-f", writeFile(t, "lease.yaml", strings.Replace(heartbeatLease("kbind-team-a", "provider", localUID, time.Now(), map[string]string{
		"core.kbind.io/konnector-version": "0.1.0", "core.kbind.io/api-version": "core.kbind.io/v1beta9",
		"core.kbind.io/provider-user":   "system:serviceaccount:kbind:kbind-consumer-team-a",
		"core.kbind.io/credential-kind": "ServiceAccountToken", "core.kbind.io/credential-expiry": expiry.Format(time.RFC3339)}), "leaseDurationSeconds: 60", "leaseDurationSeconds: 3600", 1)))

	jsonOut, errOut, code := run(t, versioned, "--kubeconfig", consumer, "doctor", "provider", "-o", "json")
	var r report
	if err := json.Unmarshal([]byte(jsonOut), &r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s%s", err, jsonOut, errOut)
	}
	want := "[connection.apiVersion connection.credentialExpiry connection.credentialRenewal connection.versionSkew]"
	if got := fmt.Sprint(r.problems()); got != want || code != 1 {
		t.Errorf("doctor: exit %d, findings %s, want %s\n%s", code, got, want, jsonOut)
	}
	for check, subs := range map[string][]string{
		"connection.credentialExpiry":  {"Warning", "expires at " + expiry.Format(time.RFC3339), "ServiceAccountToken", "system:serviceaccount:kbind:kbind-consumer-team-a", "kubectl kbind grant team-a --apis widgets.example.org --isolation Namespace", "apply -f bundle.yaml"},
		"connection.credentialRenewal": {"Warning", "CredentialsRenewed=False reason RenewalFailed", "serviceaccounts/token", "auth can-i create -n kbind serviceaccounts/kbind-consumer-team-a --subresource=token", "validatingadmissionpolicies"},
		"connection.versionSkew":       {"Warning", "konnector 0.1.0", "kubectl-kbind 0.9.0", "docs/versioning.md"},
		"connection.apiVersion":        {"Error", "core.kbind.io/v1beta9", "core.kbind.io/v1alpha1"},
	} {
		f := r.finding(check)
		for _, s := range subs {
			if !strings.Contains(f, s) {
				t.Errorf("finding %s lacks %q: %s", check, s, f)
			}
		}
	}
	text, _, _ := run(t, versioned, "--kubeconfig", consumer, "doctor", "provider")
	t.Logf("$ kubectl kbind doctor provider   # kubectl-kbind 0.9.0\n%s", text)

	// A development build cannot tell the skew: no warning, "unknown". (The
	// package's plugin may be make build's, stamped with the release: this
	// one is built unstamped.)
	dev := buildPlugin(t, "")
	devOut, devErr, _ := run(t, dev, "--kubeconfig", consumer, "doctor", "-o", "json", "provider")
	r = report{}
	if err := json.Unmarshal([]byte(devOut), &r); err != nil {
		t.Fatalf("doctor -o json (dev build): %v\n%s%s", err, devOut, devErr)
	}
	if f := r.finding("connection.versionSkew"); f != "" {
		t.Errorf("a dev build warns of skew: %s", f)
	}
	if got := strings.Join(r.Checked, ", "); !strings.Contains(got, "versions of Connection provider: konnector 0.1.0, kubectl-kbind dev (skew unknown)") {
		t.Errorf("checked: %s", got)
	}

	// Never a byte of the token, in anything doctor or consumers prints.
	consumersOut, _, _ := run(t, versioned, "--kubeconfig", provider, "consumers", "team-a")
	consumersJSON, _, _ := run(t, versioned, "--kubeconfig", provider, "consumers", "-o", "json")
	for where, out := range map[string]string{"doctor -o json": jsonOut, "doctor": text, "consumers team-a": consumersOut, "consumers -o json": consumersJSON} {
		for i := 0; i+16 <= len(token); i += 8 {
			if frag := token[i : i+16]; strings.Contains(out, frag) {
				t.Errorf("%s prints part of the token (%q)", where, frag)
				break
			}
		}
	}
	if !strings.Contains(consumersOut, expiry.Format("2006-01-02T15:04Z")) || !strings.Contains(consumersOut, "core.kbind.io/v1beta9") {
		t.Errorf("consumers team-a:\n%s", consumersOut)
	}
}
