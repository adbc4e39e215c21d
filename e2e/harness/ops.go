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

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kbind/kbind/engine/test/enginetest"
)

// Timeout is how long a feature waits for the konnector to converge.
const Timeout = 90 * time.Second

// Run runs kubectl and fails the test on error; it returns the output.
func (s *Suite) Run(ctx context.Context, t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Apply writes manifest to a file and runs `kubectl --context=ctxName apply -f`.
func (s *Suite) Apply(ctx context.Context, t testing.TB, ctxName, manifest string) {
	t.Helper()
	s.Run(ctx, t, "--context="+ctxName, "apply", "-f", s.WriteFile(t, manifest))
}

// WriteFile writes content to a new file under the suite directory.
func (s *Suite) WriteFile(t testing.TB, content string) string {
	t.Helper()
	f, err := os.CreateTemp(filepath.Join(s.Dir), "manifest-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// Eventually polls check until it returns nil, failing after Timeout.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	enginetest.EventuallyWithin(t, Timeout, what, check)
}

// EventuallyOutput waits until kubectl args succeeds with output that
// satisfies want, and returns that output.
func (s *Suite) EventuallyOutput(ctx context.Context, t testing.TB, want func(string) error, args ...string) string {
	t.Helper()
	var out string
	Eventually(t, "kubectl "+strings.Join(args, " "), func() error {
		var err error
		if out, err = s.Kubectl(ctx, args...); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return want(out)
	})
	return out
}

// Equals is a want for EventuallyOutput: the trimmed output is exactly v.
func Equals(v string) func(string) error {
	return func(out string) error {
		if strings.TrimSpace(out) != v {
			return fmt.Errorf("got %q, want %q", strings.TrimSpace(out), v)
		}
		return nil
	}
}

// Contains is a want for EventuallyOutput: the output holds every fragment.
func Contains(fragments ...string) func(string) error {
	return func(out string) error {
		for _, f := range fragments {
			if !strings.Contains(out, f) {
				return fmt.Errorf("output lacks %q:\n%s", f, out)
			}
		}
		return nil
	}
}

// Gone waits until `kubectl get args` reports NotFound.
func (s *Suite) Gone(ctx context.Context, t testing.TB, args ...string) {
	t.Helper()
	Eventually(t, "gone: "+strings.Join(args, " "), func() error {
		out, err := s.Kubectl(ctx, append([]string{"get"}, args...)...)
		if err == nil {
			return fmt.Errorf("still there: %s", out)
		}
		if !strings.Contains(out, "NotFound") && !strings.Contains(out, "not found") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// Condition is a want for a `-o jsonpath` of one condition printed as
// "{.status}/{.reason}: {.message}"; it matches status/reason (any reason
// when reason is empty) and every message fragment.
func Condition(status, reason string, fragments ...string) func(string) error {
	return func(out string) error {
		out = strings.TrimSpace(out)
		prefix := status + "/" + reason + ":"
		if reason == "" {
			prefix = status + "/"
		}
		if !strings.HasPrefix(out, prefix) {
			return fmt.Errorf("condition is %q, want %s/%s", out, status, reason)
		}
		return Contains(fragments...)(out)
	}
}

// ConditionPath is the jsonpath printing condition typ for Condition.
func ConditionPath(typ string) string {
	return fmt.Sprintf(`jsonpath={range .status.conditions[?(@.type=="%s")]}{.status}/{.reason}: {.message}{end}`, typ)
}

// ConnectionManifest is a kubeconfig Secret in kbind and a Connection
// using it; spec is extra YAML under the Connection's spec (indented two
// spaces), may be empty.
func ConnectionManifest(name, secret string, kubeconfig []byte, spec string) string {
	return enginetest.ConnectionManifestWith(name, secret, kubeconfig, spec)
}

// CRDManifest is a CRD named plural.group (v1alpha1, spec and status
// keeping unknown fields, status subresource), exported when asked.
func CRDManifest(plural, kind, group, scope string, exported bool) string {
	labels := "{}"
	if exported {
		labels = `{core.kbind.io/exported: "true"}`
	}
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[3]s
  labels: %[5]s
spec:
  group: %[3]s
  scope: %[4]s
  names: {plural: %[1]s, singular: %[6]s, kind: %[2]s, listKind: %[2]sList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, kind, group, scope, labels, strings.ToLower(kind))
}

// KubeconfigVariant returns the Connection kubeconfig of a provider-side
// context with its user replaced by a bearer token (when token is set)
// and its server replaced (when server is set).
func (s *Suite) KubeconfigVariant(ctxName, token, server string) ([]byte, error) {
	kc, err := clientcmd.Load(s.providerKubeconfigs[ctxName])
	if err != nil {
		return nil, err
	}
	if token != "" {
		kc.AuthInfos[ctxName] = &clientcmdapi.AuthInfo{Token: token}
	}
	if server != "" {
		kc.Clusters[ctxName].Server = server
	}
	return clientcmd.Write(*kc)
}

// ServiceAccountToken creates (if needed) the ServiceAccount ns/name on
// the cluster of ctxName and returns a one-hour token for it.
func (s *Suite) ServiceAccountToken(ctx context.Context, t testing.TB, ctxName, ns, name string) string {
	t.Helper()
	s.Apply(ctx, t, ctxName, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: %s, namespace: %s}\n", ns, name, ns))
	return strings.TrimSpace(s.Run(ctx, t, "--context="+ctxName, "-n", ns, "create", "token", name, "--duration=1h"))
}

// GrepLines returns the lines of s that contain word, for failure messages
// quoting a log.
func GrepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
