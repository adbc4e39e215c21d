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

package suite

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kbind/kbind/e2e/harness"
)

const (
	consumer  = "--context=" + harness.ConsumerContext
	provider  = "--context=" + harness.ProviderContext
	providerB = "--context=" + harness.ProviderBContext
)

// clusterBinding is a ClusterBinding of apis through conn; extra is YAML
// appended under spec (indented two spaces), may be empty.
func clusterBinding(name, conn, extra string, apis ...string) string {
	return bindingYAML("ClusterBinding", name, "", conn, extra, apis)
}

// binding is a namespaced Binding.
func binding(ns, name, conn, extra string, apis ...string) string {
	return bindingYAML("Binding", name, ns, conn, extra, apis)
}

func bindingYAML(kind, name, ns, conn, extra string, apis []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: core.kbind.io/v1alpha1\nkind: %s\nmetadata: {name: %s", kind, name)
	if ns != "" {
		fmt.Fprintf(&b, ", namespace: %s", ns)
	}
	fmt.Fprintf(&b, "}\nspec:\n  connectionRef: {name: %s}\n  apis:\n", conn)
	for _, a := range apis {
		fmt.Fprintf(&b, "  - name: %s\n", a)
	}
	b.WriteString(extra)
	return b.String()
}

// object is a namespaced custom object of group example.org-style APIs
// (version v1alpha1) with the given spec (a YAML flow mapping).
func object(group, kind, ns, name, spec string) string {
	return fmt.Sprintf("apiVersion: %s/v1alpha1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", group, kind, name, ns, spec)
}

func namespaces(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\n", n)
	}
	return b.String()
}

// waitReady waits for condition Ready on the consumer: args are what
// follows `kubectl wait`, e.g. "-n", "team-a", "binding.core.kbind.io/widgets".
func waitReady(ctx context.Context, t *testing.T, args ...string) {
	t.Helper()
	s.Run(ctx, t, append([]string{consumer, "wait", "--for=condition=Ready", "--timeout=90s"}, args...)...)
}

// jsonpath returns `kubectl get ... -o jsonpath=path` now.
func jsonpath(ctx context.Context, t *testing.T, path string, args ...string) string {
	t.Helper()
	return s.Run(ctx, t, append(append([]string{}, args...), "-o", "jsonpath="+path)...)
}

// eventuallyJSONPath waits until the jsonpath output equals want.
func eventuallyJSONPath(ctx context.Context, t *testing.T, want, path string, args ...string) {
	t.Helper()
	s.EventuallyOutput(ctx, t, harness.Equals(want), append(append([]string{}, args...), "-o", "jsonpath="+path)...)
}

// eventuallyCondition waits until the condition typ of the object reads
// status/reason with every fragment in its message.
func eventuallyCondition(ctx context.Context, t *testing.T, typ, status, reason string, fragments []string, args ...string) {
	t.Helper()
	s.EventuallyOutput(ctx, t, harness.Condition(status, reason, fragments...), append(append([]string{}, args...), "-o", harness.ConditionPath(typ))...)
}
