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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// pluginIn runs kubectl-kbind with input on its stdin: a pipe, or with
// tty a terminal (a pseudo-terminal) the input is typed on.
func pluginIn(t *testing.T, input string, tty bool, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(pluginBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Stdin = strings.NewReader(input)
	if tty {
		master, slave := openPTY(t)
		if _, err := master.WriteString(input); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, master) }() // the echo
		cmd.Stdin = slave
	}
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	t.Logf("$ kubectl kbind %s   (stdin %q, terminal %v): exit %d\n%s%s", strings.Join(args, " "), input, tty, code, out.String(), errOut.String())
	return out.String(), errOut.String(), code
}

// openPTY opens a pseudo-terminal pair, closed when the test ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slave.Close() })
	return master, slave
}

// TestUsageErrors: each kind of mistake in the command line exits 2, as
// docs/cli.md says, before any cluster is contacted.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"grant", "team-a", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"grant", "team-a"}, `required flag(s) "apis" not set`},
		{[]string{"grant", "team-a", "--apis", "widgets.example.org", "--duration", "soon"}, `invalid argument "soon" for "--duration" flag`},
		{[]string{"grant", "team-a", "--apis", "widgets.example.org", "--isolation", "tenant"}, "want Namespace, Prefixed or None"},
		{[]string{"export", "--list", "-o", "wide"}, "want yaml or json"},
		{[]string{"revoke"}, "takes 1 argument(s), got 0"},
		{[]string{"unbind", "a", "b"}, "takes 1 argument(s), got 2"},
		{[]string{"consumers", "-o"}, "flag needs an argument"},
	} {
		_, errOut, code := plugin(t, append([]string{"--kubeconfig", "/nonexistent"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("kubectl kbind %s: exit %d, %q; want 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

func jsonpath(t *testing.T, kubeconfig, path string, args ...string) string {
	t.Helper()
	return kubectl(t, kubeconfig, append([]string{"get"}, append(args, "-o", "jsonpath="+path)...)...)
}

// TestProtectAndUnbind: the bundle grant prints is protected once applied
// (Connection, ClusterBinding, the Secret's label), grant warns of its
// loopback address and takes --isolation in any case; consumers lists the
// live consumer, and a consumer cluster connected without a grant, and
// on the consumer cluster says it is one; unbind deletes an unprotected
// Binding with --yes, and a protected ClusterBinding only when asked on a
// terminal and answered y — refusing on a pipe without --yes, changing
// nothing on n — printing the counts of what then goes.
func TestProtectAndUnbind(t *testing.T) {
	t.Parallel() // its own pair and konnector
	pair := testenv.StartPairT(t, testenv.PairOptions{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, false),
	}})
	provider, consumer := pair.Provider.KubeconfigPath, pair.Consumer.KubeconfigPath
	kubectl(t, consumer, "create", "namespace", "kbind")
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org", "gadgets.example.org")

	// grant: the enum in any case, the warning for the loopback address
	// (the local API servers listen on 127.0.0.1), a protected bundle.
	out, errOut, code := plugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org", "--isolation", "namespace")
	if code != 0 || !strings.Contains(errOut, "warning: the provider address in the bundle, https://127.0.0.1:") || !strings.Contains(errOut, "is a loopback address") {
		t.Fatalf("grant team-a: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "mode: Namespace") {
		t.Errorf("the bundle's isolation is not spelled Namespace:\n%s", firstLines(out, 40))
	}
	kubectl(t, consumer, "apply", "-f", writeFile(t, "team-a.yaml", out))
	for what, got := range map[string]string{
		"Connection provider":        jsonpath(t, consumer, "{.spec.deletionProtection}", "connection", "provider"),
		"ClusterBinding provider":    jsonpath(t, consumer, "{.spec.deletionProtection}", "clusterbinding", "provider"),
		"Secret provider-kubeconfig": jsonpath(t, consumer, `{.metadata.labels.core\.kbind\.io/deletion-protection}`, "secret", "-n", "kbind", "provider-kubeconfig"),
	} {
		if got != "true" {
			t.Errorf("%s as applied from the bundle: protection %q, want true", what, got)
		}
	}
	// Prefixed in lower case, printed Prefixed; an address that is not a
	// loopback one gets no warning.
	out, errOut, code = plugin(t, "--kubeconfig", provider, "grant", "team-p", "--apis", "widgets.example.org", "--isolation", "prefixed", "--prefix", "tp",
		"--server", "https://kbind-provider.example.org:6443")
	if code != 0 || !strings.Contains(out, "mode: Prefixed") || !strings.Contains(errOut, "granted team-p (Prefixed isolation") || strings.Contains(errOut, "loopback") {
		t.Errorf("grant --isolation prefixed: exit %d\n%s\n%s", code, firstLines(out, 40), errOut)
	}

	startKonnector(t, consumer, "--binding-resync", "2s")
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/provider", "clusterbinding/provider", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "widgets.yaml", widget("default", "w1")+"---\n"+widget("default", "w2")))
	eventuallyGet(t, provider, "default/w1 on the provider", "widget", "-n", "kbind-team-a", "default.w1")
	eventuallyGet(t, provider, "default/w2 on the provider", "widget", "-n", "kbind-team-a", "default.w2")

	// A Connection made with the provider's admin kubeconfig, as the
	// quickstart does: a consumer cluster connected without a grant.
	kubectl(t, consumer, "create", "namespace", "team-x")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "admin.yaml", enginetest.ConnectionManifestWith("admin", "admin-kubeconfig", pair.Provider.Kubeconfig,
		"  namespacedBindings: {from: All}\n")+`---
apiVersion: core.kbind.io/v1alpha1
kind: Binding
metadata: {name: gadgets, namespace: team-x}
spec:
  connectionRef: {name: admin}
  apis: [{name: gadgets.example.org}]
`))
	kubectl(t, consumer, "wait", "--for=condition=Ready", "connection/admin", "--timeout=60s")
	kubectl(t, consumer, "wait", "--for=condition=Ready", "bindings.core.kbind.io/gadgets", "-n", "team-x", "--timeout=60s")
	kubectl(t, consumer, "apply", "-f", writeFile(t, "g1.yaml", strings.ReplaceAll(widget("team-x", "g1"), "Widget", "Gadget")))
	eventuallyGet(t, provider, "team-x/g1 on the provider", "gadget", "-n", "team-x", "g1")

	// consumers: team-a by its live Lease, the admin's Connection as a
	// consumer never granted (named by the consumer cluster's UID).
	uid := jsonpath(t, consumer, "{.metadata.uid}", "namespace", "kube-system")
	enginetest.EventuallyWithin(t, 30*time.Second, "consumers lists team-a connected and the never-granted consumer", func() error {
		out, errOut, code := plugin(t, "--kubeconfig", provider, "consumers")
		rows := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				rows[f[0]] = line
			}
		}
		if code != 0 || !strings.HasSuffix(rows["team-a"], " connected") || !strings.HasSuffix(rows[uid], " connected (never granted)") || !strings.HasSuffix(rows["team-p"], " granted") {
			return fmt.Errorf("exit %d\n%s%s", code, out, errOut)
		}
		return nil
	})
	if _, errOut, code := plugin(t, "--kubeconfig", consumer, "consumers"); code != 1 || !strings.Contains(errOut, "this looks like a consumer cluster, not a provider: it holds 2 kbind Connection(s)") ||
		!strings.Contains(errOut, "point it at the provider's kubeconfig") {
		t.Errorf("consumers on the consumer cluster: exit %d, %q", code, errOut)
	}

	// The counts unbind prints are the binding's status: wait until it
	// reports every object synced (refreshed every --binding-resync).
	waitSynced := func(want string, args ...string) {
		t.Helper()
		enginetest.EventuallyWithin(t, 30*time.Second, strings.Join(args, " ")+" reports "+want+" synced", func() error {
			if got := jsonpath(t, consumer, "{.status.boundAPIs[0].instances.synced}", args...); got != want {
				return fmt.Errorf("synced %q", got)
			}
			return nil
		})
	}
	waitSynced("1", "bindings.core.kbind.io", "gadgets", "-n", "team-x")
	waitSynced("2", "clusterbinding", "provider")

	// An unprotected Binding, in a script: no question, nothing to turn
	// off; its copy goes (Delete), the consumer object stays.
	out = mustPlugin(t, "--kubeconfig", consumer, "unbind", "gadgets", "-n", "team-x", "--yes", "--wait", "--timeout", "60s")
	for _, want := range []string{"Binding team-x/gadgets (Connection admin) is not protected from deletion: unbind deletes it.",
		"consumer objects: 1 object it covers: they stay on this cluster, no longer synced",
		"provider copies: 1 copy, deletionPolicy Delete: deleted before the binding goes", "Binding team-x/gadgets is gone"} {
		if !strings.Contains(out, want) {
			t.Errorf("unbind -n team-x gadgets lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[y/N]") || strings.Contains(out, "protection turned off") {
		t.Errorf("unbind --yes of an unprotected Binding asked, or turned protection off:\n%s", out)
	}
	if got := kubectl(t, provider, "get", "gadgets", "-n", "team-x", "-o", "name"); got != "" {
		t.Errorf("the provider copy is left after unbind: %q", got)
	}
	kubectl(t, consumer, "get", "gadget", "-n", "team-x", "g1")

	// The protected ClusterBinding: refused on a pipe without --yes, kept
	// on n, unbound on y.
	args := []string{"--kubeconfig", consumer, "unbind", "provider", "--wait", "--timeout", "90s"}
	out, errOut, code = pluginIn(t, "y\n", false, args...)
	if code != 2 || !strings.Contains(errOut, "pass --yes") || !strings.Contains(out, "ClusterBinding provider (Connection provider) is protected from deletion") {
		t.Errorf("unbind on a pipe without --yes: exit %d", code)
	}
	_, errOut, code = pluginIn(t, "n\n", true, args...)
	if code != 1 || !strings.Contains(errOut, "not confirmed: nothing was changed") {
		t.Errorf("unbind answered n: exit %d", code)
	}
	if got := jsonpath(t, consumer, "{.spec.deletionProtection} {.metadata.deletionTimestamp}", "clusterbinding", "provider"); got != "true " {
		t.Errorf("after n the ClusterBinding is not as it was: %q", got)
	}
	out, _, code = pluginIn(t, "y\n", true, args...)
	for _, want := range []string{"Unbind ClusterBinding provider? [y/N]", "consumer objects: 2 objects it covers: released, then deleted with the consumer CRD",
		"provider copies: 2 copies, deletionPolicy Delete",
		"the consumer CRD widgets.example.org is deleted (the last ClusterBinding of the API), and with it every object of it on this cluster: 2 objects",
		"ClusterBinding provider: deletion protection turned off", "ClusterBinding provider deleted", "ClusterBinding provider is gone"} {
		if !strings.Contains(out, want) {
			t.Errorf("unbind answered y lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("unbind answered y: exit %d", code)
	}
	if _, err := testenv.Kubectl(context.Background(), consumer, "get", "clusterbinding", "provider"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("the ClusterBinding is still there after unbind: %v", err)
	}
	// What it said goes is gone: the 2 copies, the consumer CRD (the
	// konnector deletes it as the ClusterBinding goes); it deleted
	// nothing else itself: the Connection stays, protected.
	if got := kubectl(t, provider, "get", "widgets", "-n", "kbind-team-a", "-o", "name"); got != "" {
		t.Errorf("provider copies left after unbind: %q", got)
	}
	enginetest.EventuallyWithin(t, 30*time.Second, "the consumer CRD widgets.example.org gone", func() error {
		if _, err := testenv.Kubectl(context.Background(), consumer, "get", "crd", "widgets.example.org"); err == nil || !strings.Contains(err.Error(), "NotFound") {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if got := jsonpath(t, consumer, "{.spec.deletionProtection}", "connection", "provider"); got != "true" {
		t.Errorf("the Connection after unbind: protection %q", got)
	}
}
