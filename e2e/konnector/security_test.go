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

package konnector

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// tokenKubeconfig is a kubeconfig for server with a bearer token, plus a
// decoy user (another credential the Secret holds but the context does
// not use).
func tokenKubeconfig(cfg *rest.Config, token, decoyToken string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: %q, certificate-authority-data: %s}}]
users:
- {name: u, user: {token: %q}}
- {name: decoy, user: {token: %q}}
contexts: [{name: p, context: {cluster: p, user: u}}]
current-context: p
`, cfg.Host, base64.StdEncoding.EncodeToString(cfg.CAData), token, decoyToken)
}

// serviceAccountToken creates (once) a ServiceAccount on the cluster bound
// to cluster-admin and returns a fresh token of it.
func serviceAccountToken(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "consumer-a", Namespace: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err == nil {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "consumer-a"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "consumer-a", Namespace: "default"}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "consumer-a",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// secretManifest is a Secret with the given data keys (string values).
func secretManifest(namespace, name string, data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\nstringData:\n", name, namespace)
	for _, k := range keys {
		out += fmt.Sprintf("  %s: |\n    %s\n", k, strings.ReplaceAll(strings.TrimSpace(data[k]), "\n", "\n    "))
	}
	return out + "---\n"
}

func connectionManifest(name, namespace, secret string) string {
	return fmt.Sprintf("apiVersion: core.kbind.io/v1alpha1\nkind: Connection\nmetadata: {name: %s}\nspec:\n  kubeconfigSecretRef: {namespace: %s, name: %s}\n---\n", name, namespace, secret)
}

// secretsIn returns credential fragments to look for: each secret itself,
// and for long ones (keys, certificates, tokens) every 24-byte window, so
// a partial copy is found too.
func fragments(secrets map[string]string) map[string]string {
	out := map[string]string{}
	for name, s := range secrets {
		out[s] = name
		const window = 24
		for i := 0; i+window <= len(s) && len(s) > 64; i += window / 2 {
			out[s[i:i+window]] = name
		}
	}
	return out
}

// TestNoCredentialLeaks plants markers in every credential the konnector
// handles — the kubeconfig a Connection uses, a decoy user and an extra key
// in its Secret, a rotated token, kubeconfigs it must refuse (garbage, a
// wrong token, an exec plugin) and a Secret in a namespace it may not read
// — and then scans everything an operator can see: the konnector's log,
// Events on both clusters, the status of every Connection and binding, its
// metrics and the provider's Leases. Not one byte of a credential may
// appear. The consumer's audit log proves Secrets outside the allowed
// namespace were never read.
func TestNoCredentialLeaks(t *testing.T) {
	t.Parallel() // its own pair and konnector
	ctx := context.Background()
	opts, audit, err := enginetest.AuditPair(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts.ProviderCRDs = append(opts.ProviderCRDs, widgets())
	pair := testenv.StartPairT(t, opts)
	kc := pair.KubeconfigPath
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := testenv.Kubectl(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	apply := func(manifest string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "objects.yaml")
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		kubectl("--context=consumer", "apply", "-f", file)
	}
	for _, ns := range []string{"kbind", "other"} {
		kubectl("--context=consumer", "create", "namespace", ns)
	}

	marker := func(n int) string { return fmt.Sprintf("kbind-leak-marker-%d-%d", n, time.Now().UnixNano()) }
	token := serviceAccountToken(t, pair.Provider.Config)
	secrets := map[string]string{
		"the provider token":            token,
		"the decoy user's token":        marker(1),
		"an extra key of the Secret":    marker(2),
		"a garbage kubeconfig":          marker(3),
		"a wrong token":                 marker(4),
		"an exec plugin's argument":     marker(5),
		"a Secret in another namespace": marker(6),
		"the consumer's client key":     base64.StdEncoding.EncodeToString(pair.Consumer.Config.KeyData),
		"the consumer's client key PEM": strings.Join(strings.Split(string(pair.Consumer.Config.KeyData), "\n")[1:3], ""),
	}
	execKubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: %q}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/get-token, args: [%q]}}}]
contexts: [{name: p, context: {cluster: p, user: u}}]
current-context: p
`, pair.Provider.Config.Host, secrets["an exec plugin's argument"])
	apply(secretManifest("kbind", "provider", map[string]string{
		"kubeconfig": tokenKubeconfig(pair.Provider.Config, token, secrets["the decoy user's token"]),
		"note":       secrets["an extra key of the Secret"],
	}) + connectionManifest("provider", "kbind", "provider") +
		secretManifest("kbind", "garbage", map[string]string{"kubeconfig": "{{{ " + secrets["a garbage kubeconfig"] + " ]]"}) + connectionManifest("garbage", "kbind", "garbage") +
		secretManifest("kbind", "wrong-token", map[string]string{"kubeconfig": tokenKubeconfig(pair.Provider.Config, secrets["a wrong token"], "x")}) + connectionManifest("wrong-token", "kbind", "wrong-token") +
		secretManifest("kbind", "exec", map[string]string{"kubeconfig": execKubeconfig}) + connectionManifest("exec", "kbind", "exec") +
		secretManifest("other", "elsewhere", map[string]string{"kubeconfig": tokenKubeconfig(pair.Provider.Config, secrets["a Secret in another namespace"], "x")}) + connectionManifest("elsewhere", "other", "elsewhere") +
		"apiVersion: core.kbind.io/v1alpha1\nkind: ClusterBinding\nmetadata: {name: widgets}\nspec:\n  connectionRef: {name: provider}\n  apis: [{name: widgets.example.org}]\n")

	_, metricsAddr, log := startKonnector(t, pair.Consumer.KubeconfigPath)
	kubectl("--context=consumer", "wait", "--for=condition=Ready", "connection/provider", "--timeout=60s")
	kubectl("--context=consumer", "wait", "--for=condition=Established", "crd/widgets.example.org", "--timeout=60s")
	apply("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}\n")
	eventually(t, 30*time.Second, "w1 on the provider", func() error {
		_, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "get", "widget", "w1")
		return err
	})

	// Every refused Connection says why, without the credential.
	for _, name := range []string{"garbage", "wrong-token", "exec", "elsewhere"} {
		eventually(t, 60*time.Second, "connection/"+name+" reports its problem", func() error {
			out, err := testenv.Kubectl(ctx, kc, "--context=consumer", "get", "connection", name,
				"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(out, "False ") || len(out) < 12 {
				return fmt.Errorf("Ready: %q", out)
			}
			t.Logf("connection/%s: Ready=%s", name, out)
			return nil
		})
	}

	// Rotate the provider credential: a new token, a new marker.
	rotated := serviceAccountToken(t, pair.Provider.Config)
	secrets["the rotated token"] = rotated
	secrets["the rotated extra key"] = marker(7)
	apply(secretManifest("kbind", "provider", map[string]string{
		"kubeconfig": tokenKubeconfig(pair.Provider.Config, rotated, secrets["the decoy user's token"]),
		"note":       secrets["the rotated extra key"],
	}))
	apply("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: w2, namespace: default}\nspec: {size: 2}\n")
	eventually(t, 30*time.Second, "w2 on the provider after the rotation", func() error {
		_, err := testenv.Kubectl(ctx, kc, "--context=provider", "-n", "default", "get", "widget", "w2")
		return err
	})

	// A Secret in a namespace the konnector may not read is reported on its
	// Connection (above) and otherwise left alone: no controller retries
	// reading it from a cache that does not hold that namespace.
	if strings.Contains(log.String(), "unknown namespace for the cache") {
		t.Errorf("a controller keeps failing on the Secret outside the allowed namespaces:\n%s", harness.GrepLines(log.String(), "unknown namespace"))
	}

	// Everything an operator sees.
	seen := map[string]string{"the konnector's log": log.String()}
	for _, what := range [][]string{
		{"--context=consumer", "get", "events", "-A", "-o", "yaml"},
		{"--context=provider", "get", "events", "-A", "-o", "yaml"},
		{"--context=consumer", "get", "connections.core.kbind.io,clusterbindings.core.kbind.io,bindings.core.kbind.io", "-A", "-o", "yaml"},
		{"--context=consumer", "describe", "connections"},
		{"--context=provider", "get", "leases", "-A", "-o", "yaml"},
	} {
		seen["kubectl "+strings.Join(what, " ")] = kubectl(what...)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	seen["/metrics"] = string(body)

	frags := fragments(secrets)
	for where, text := range seen {
		for frag, name := range frags {
			if strings.Contains(text, frag) {
				t.Errorf("%s shows %s", where, name)
				break
			}
		}
	}

	// The consumer's audit log: the konnector read Secrets only in kbind,
	// its allowed namespace, and never cluster-wide.
	events, err := enginetest.ReadAudit(audit.ConsumerLog)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, e := range events {
		if !strings.HasPrefix(e.UserAgent, "kbind-konnector") || e.Resource() != "secrets" {
			continue
		}
		reads++
		if e.Namespace() != "kbind" {
			t.Errorf("the konnector read Secrets outside its allowed namespace: %s", e)
		}
	}
	if reads == 0 {
		t.Error("no Secret read of the konnector in the audit log: the check proves nothing")
	}
}
