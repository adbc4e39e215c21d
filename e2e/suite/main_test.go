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
	"os"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/kbind/kbind/e2e/harness"
)

// s is the running suite: clusters, kubeconfig, konnector.
var s *harness.Suite

func TestMain(m *testing.M) {
	var err error
	if s, err = harness.New(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	s.Env.Setup(sharedConnection)
	os.Exit(s.RunTests(m))
}

// The guide's names: Connection "provider" with the Secret
// kbind/provider-kubeconfig, the API widgets.example.org. Most features
// bind their own APIs through this Connection, as one consumer would; it
// admits the Bindings of the namespaces the features use (team-a, the
// guide's, and scope-a), by name.
const (
	connection = "provider"
	secretName = "provider-kubeconfig"
	// admitted is the shared Connection's spec.namespacedBindings.
	admitted = "  namespacedBindings:\n    from: Selector\n    selector:\n      matchExpressions:\n" +
		"      - {key: kubernetes.io/metadata.name, operator: In, values: [team-a, scope-a]}\n"
)

// sharedConnection exports widgets.example.org on the provider and
// connects the consumer to it.
func sharedConnection(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	for _, m := range []struct{ ctx, manifest string }{
		{harness.ProviderContext, harness.CRDManifest("widgets", "Widget", "example.org", "Namespaced", true)},
		{harness.ConsumerContext, harness.ConnectionManifest(connection, secretName, s.ProviderKubeconfig(harness.ProviderContext), admitted)},
	} {
		file, err := writeTemp(m.manifest)
		if err != nil {
			return ctx, err
		}
		if out, err := s.Kubectl(ctx, "--context="+m.ctx, "apply", "-f", file); err != nil {
			return ctx, fmt.Errorf("%v: %s", err, out)
		}
	}
	if out, err := s.Kubectl(ctx, "--context=consumer", "wait", "--for=condition=Ready", "connection/"+connection, "--timeout=90s"); err != nil {
		return ctx, fmt.Errorf("the shared Connection did not become Ready: %v: %s", err, out)
	}
	return ctx, nil
}

func writeTemp(content string) (string, error) {
	f, err := os.CreateTemp(s.Dir, "setup-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.WriteString(content)
	return f.Name(), err
}

// One Test per feature, in the order they must run (Go runs the tests of
// a file in source order): the features share the clusters and the
// konnector, and teardown comes last.
func TestTroubleshootingGuide(t *testing.T) { s.Env.Test(t, guideFeature()) }
func TestApplyOrder(t *testing.T)           { s.Env.Test(t, applyOrderFeature()) }
func TestSync(t *testing.T)                 { s.Env.Test(t, syncFeature()) }
func TestConflicts(t *testing.T)            { s.Env.Test(t, conflictsFeature()) }
func TestOrphan(t *testing.T)               { s.Env.Test(t, orphanFeature()) }
func TestScope(t *testing.T)                { s.Env.Test(t, scopeFeature()) }
func TestRelated(t *testing.T)              { s.Env.Test(t, relatedFeature()) }
func TestFidelity(t *testing.T)             { s.Env.Test(t, fidelityFeature()) }
func TestSchemaSource(t *testing.T)         { s.Env.Test(t, schemaSourceFeature()) }
func TestPolicies(t *testing.T)             { s.Env.Test(t, policiesFeature()) }
func TestAutoBind(t *testing.T)             { s.Env.Test(t, autoBindFeature()) }
func TestRotation(t *testing.T)             { s.Env.Test(t, rotationFeature()) }
func TestIdentity(t *testing.T)             { s.Env.Test(t, identityFeature()) }
func TestRestart(t *testing.T)              { s.Env.Test(t, restartFeature()) }
func TestKillDuringDeletion(t *testing.T)   { s.Env.Test(t, killDuringDeletionFeature()) }
func TestTeardown(t *testing.T)             { s.Env.Test(t, teardownFeature()) }
