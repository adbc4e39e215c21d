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

package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kbind/kbind/engine/test/testenv"
)

// cluster is the API server the chart tests that only apply objects
// share (TestAccessOnARealAPIServer, TestImportedObjectsPolicyOnARealAPIServer,
// TestEveryVariantAcceptedByTheAPIServer), started by the first of them:
// each applies objects of names no other test uses (the access chart's
// consumers a, b and c; the imported-objects policy and the widgets CRD;
// server dry runs only), so they run in parallel. The pure tests never
// wait for it. A test that runs a binary against its cluster (the
// konnector, the backend's reaper: actors on everything they may read)
// starts one of its own.
var cluster = testenv.SharedCluster("chart", testenv.ClusterOptions{})

func TestMain(m *testing.M) { testenv.Main(m, cluster) }

// ensureNamespace creates ns on the cluster of kubeconfig unless a test
// sharing it did already.
func ensureNamespace(t *testing.T, kubeconfig, ns string) {
	t.Helper()
	out, err := testenv.Kubectl(context.Background(), kubeconfig, "create", "namespace", ns)
	if err != nil && !strings.Contains(out+err.Error(), "AlreadyExists") && !strings.Contains(out+err.Error(), "already exists") {
		t.Fatalf("creating namespace %s: %v\n%s", ns, err, out)
	}
}

// namespaces numbers the namespaces uniqueNamespace creates.
var namespaces atomic.Int64

// uniqueNamespace creates a namespace no other test (or run of this one,
// under -count) uses on the shared cluster, named after prefix.
func uniqueNamespace(t *testing.T, kubeconfig, prefix string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, namespaces.Add(1))
	if out, err := testenv.Kubectl(context.Background(), kubeconfig, "create", "namespace", ns); err != nil {
		t.Fatalf("creating namespace %s: %v\n%s", ns, err, out)
	}
	return ns
}

// kubectlAt runs kubectl against one test's API server: run returns the
// output and error, must fails the test on an error, apply applies a
// manifest.
type kubectlAt struct {
	t          *testing.T
	kubeconfig string
}

func (k kubectlAt) run(args ...string) (string, error) {
	return testenv.Kubectl(context.Background(), k.kubeconfig, args...)
}

func (k kubectlAt) must(args ...string) string {
	k.t.Helper()
	out, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (k kubectlAt) apply(manifest string) {
	k.t.Helper()
	file := filepath.Join(k.t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		k.t.Fatal(err)
	}
	k.must("apply", "-f", file)
}
