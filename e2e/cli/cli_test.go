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
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var pluginBin, konnectorBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{
		&pluginBin:    "github.com/kbind/kbind/cli/cmd/kubectl-kbind",
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
	})
}

// plugin runs kubectl-kbind with args and returns its stdout, stderr and
// exit code.
func plugin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(pluginBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// mustPlugin runs kubectl-kbind and fails the test unless it succeeds.
func mustPlugin(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := plugin(t, args...)
	if code != 0 {
		t.Fatalf("kubectl kbind %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	t.Logf("$ kubectl kbind %s\n%s%s", strings.Join(args, " "), firstLines(out, 12), errOut)
	return out
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		return strings.Join(lines[:n], "") + "...\n"
	}
	return s
}

func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := testenv.Kubectl(context.Background(), kubeconfig, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startKonnector runs the konnector binary against the consumer until the
// test ends, with extra flags, and returns its process.
func startKonnector(t *testing.T, kubeconfig string, extra ...string) *exec.Cmd {
	t.Helper()
	log := &enginetest.SyncBuffer{}
	cmd := exec.Command(konnectorBin, append([]string{"--kubeconfig", kubeconfig, "--health-probe-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "0", "--discovery-interval", "2s", "--heartbeat-interval", "2s"}, extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("konnector log:\n%s", log.String())
		}
	})
	return cmd
}

func widget(ns, name string) string {
	return fmt.Sprintf("apiVersion: example.org/v1alpha1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: {size: 1}\n", name, ns)
}

// TestOnboarding: export, grant, apply the bundle on the consumer, sync as
// the granted ServiceAccount only; grant again renews the token without a
// konnector restart; revoke makes the Connection report the refusal.
func TestOnboarding(t *testing.T) {
	t.Parallel() // its own pair (and konnector): a consumer identity of its own
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")

	// Nothing is exported yet: grant refuses, and says how to fix it.
	_, errOut, code := plugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org")
	if code != 1 || !strings.Contains(errOut, "widgets.example.org: it is not exported; export it first with: kubectl kbind export widgets.example.org") {
		t.Errorf("grant of an unexported API: exit %d, %q", code, errOut)
	}
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org", "clusterwidgets.example.org")
	if out := mustPlugin(t, "--kubeconfig", provider, "export", "--list"); !strings.Contains(out, "widgets.example.org") || !strings.Contains(out, "NAME") {
		t.Errorf("export --list:\n%s", out)
	}
	if out := mustPlugin(t, "--kubeconfig", provider, "export", "--list", "-o", "json"); !strings.Contains(out, `"name": "clusterwidgets.example.org"`) || !strings.Contains(out, `"scope": "Cluster"`) {
		t.Errorf("export --list -o json:\n%s", out)
	}

	// The refusals name why.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grant", "team-a", "--apis", "clusterwidgets.example.org"}, "clusterwidgets.example.org is cluster-scoped: Namespace isolation cannot confine it"},
		{[]string{"grant", "team-a", "--apis", "widgets.example.org", "--isolation", "Prefixed", "--related", "secrets"}, "--related needs --isolation Namespace"},
		{[]string{"grant", "team-a", "--apis", "Widget"}, "there is no such CRD on this cluster"},
	} {
		_, errOut, code := plugin(t, append([]string{"--kubeconfig", provider}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("kubectl kbind %s: exit %d, %q; want a refusal naming %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	if _, _, code := plugin(t, "grant"); code != 2 {
		t.Errorf("grant without NAME: exit %d, want 2", code)
	}

	// The two commands.
	bundle := writeFile(t, "team-a.yaml", mustPlugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org", "--related", "secrets", "--duration", "1h"))
	kubectl(t, consumer, "apply", "-f", bundle)
	konnector := startKonnector(t, consumer)
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "clusterbinding/provider", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "w1.yaml", widget("default", "w1")))
	eventuallyGet(t, provider, "default/w1 on the provider in kbind-team-a", "widget", "-n", "kbind-team-a", "default.w1")

	// The konnector holds only the granted identity.
	kc := kubectl(t, consumer, "get", "secret", "-n", "kbind", "provider-kubeconfig", "-o", `jsonpath={.data.kubeconfig}`)
	granted := writeFile(t, "granted.kubeconfig", decode(t, kc))
	if who := kubectl(t, granted, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); who != "system:serviceaccount:kbind:kbind-consumer-team-a" {
		t.Errorf("the bundle authenticates as %q", who)
	}
	if _, err := testenv.Kubectl(context.Background(), granted, "get", "widgets", "-n", "default"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("the granted identity reads widgets outside its namespace: %v", err)
	}

	// Grant again: a new token, applied without restarting the konnector.
	again := mustPlugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org", "--related", "secrets", "--duration", "2h")
	if again == readFile(t, bundle) {
		t.Error("granting again printed the same bundle: the token was not renewed")
	}
	kubectl(t, consumer, "apply", "-f", writeFile(t, "team-a-renewed.yaml", again))
	kubectl(t, consumer, "apply", "-f", writeFile(t, "w2.yaml", widget("default", "w2")))
	eventuallyGet(t, provider, "default/w2 synced with the renewed token", "widget", "-n", "kbind-team-a", "default.w2")
	if konnector.ProcessState != nil {
		t.Fatal("the konnector exited")
	}

	// A provider-made object imported, adopted and released with the
	// plugin (docs/import.md#hand-over).
	kubectl(t, provider, "apply", "-f", writeFile(t, "catalog.yaml", widget("kbind-team-a", "default.catalog")))
	kubectl(t, consumer, "patch", "clusterbinding", "provider", "--type=json", "-p", `[{"op":"add","path":"/spec/apis/0/providerObjects","value":"Import"}]`)
	eventuallyGet(t, consumer, "default/catalog imported", "widget", "-n", "default", "catalog")
	if out := mustPlugin(t, "--kubeconfig", consumer, "adopt", "widgets.example.org/catalog", "-n", "default"); !strings.Contains(out, "is the consumer's now") {
		t.Errorf("adopt: %q", out)
	}
	if uid := kubectl(t, provider, "get", "widget", "-n", "kbind-team-a", "default.catalog", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/consumer-object-uid}`); uid == "" {
		t.Error("adopted: the provider object carries no markers")
	}
	if out := mustPlugin(t, "--kubeconfig", consumer, "release", "widgets.example.org/catalog", "-n", "default"); !strings.Contains(out, "is the provider's now") {
		t.Errorf("release: %q", out)
	}
	if owner := kubectl(t, consumer, "get", "widget", "-n", "default", "catalog", "-o", `jsonpath={.metadata.annotations.core\.kbind\.io/owner}`); owner != "provider" {
		t.Errorf("released: owner %q", owner)
	}
	if _, errOut, code := plugin(t, "--kubeconfig", consumer, "adopt", "widgets.example.org/w1", "-n", "default"); code != 1 || !strings.Contains(errOut, "it is the consumer's already") {
		t.Errorf("adopting a consumer object: exit %d, %q", code, errOut)
	}

	// Revoke: the Connection reports the refusal, not success.
	out := mustPlugin(t, "--kubeconfig", provider, "revoke", "team-a")
	for _, want := range []string{"ServiceAccount kbind/kbind-consumer-team-a deleted", "Role kbind-team-a/kbind-consumer-team-a deleted", "ClusterRole /kbind-consumer-team-a deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("revoke output lacks %q:\n%s", want, out)
		}
	}
	enginetest.EventuallyWithin(t, 60*time.Second, "the Connection reports the revoked credentials", func() error {
		status := kubectl(t, consumer, "get", "connection", "provider", "-o", `jsonpath={.status.conditions[?(@.type=="Connected")].status} {.status.conditions[?(@.type=="Connected")].message}`)
		if !strings.HasPrefix(status, "False") || !strings.Contains(status, "Unauthorized") {
			return fmt.Errorf("Connected: %s", status)
		}
		return nil
	})
	if _, errOut, code := plugin(t, "--kubeconfig", provider, "revoke", "team-a"); code != 1 || !strings.Contains(errOut, "nothing is granted to consumer") {
		t.Errorf("revoking twice: exit %d, %q", code, errOut)
	}
}

// eventuallyGet waits up to 30 s until kubectl get args succeeds on the
// cluster of kubeconfig.
func eventuallyGet(t *testing.T, kubeconfig, what string, args ...string) {
	t.Helper()
	enginetest.EventuallyWithin(t, 30*time.Second, what, func() error {
		_, err := testenv.Kubectl(context.Background(), kubeconfig, append([]string{"get"}, args...)...)
		return err
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func decode(t *testing.T, b64 string) string {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
