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
	"runtime"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/engine/test/testenv"
)

// Release is the Helm release of the konnector chart, in Namespace: the
// names the troubleshooting guide's commands use.
const (
	Release   = "konnector"
	Namespace = "kbind"
)

// BoundGroups are the API groups the suite binds, the chart's required
// rbac.boundResourceGroups: a rule the konnector needs but the chart lacks
// fails a feature.
var BoundGroups = []any{"example.org", "openapi.example.org", "b.example.org"}

// KonnectorArgs are the konnector flags the suite adds: shorter loops than
// the defaults so features do not wait 30 s for discovery or a heartbeat.
var KonnectorArgs = []string{"--discovery-interval=2s", "--binding-resync=5s", "--heartbeat-interval=2s"}

// Suite is one provider, one consumer and a second provider (provider-b,
// for identity changes and the Auto → OpenAPI fall-through) with the
// konnector chart installed on the consumer and the konnector running.
type Suite struct {
	Mode Mode
	// Dir holds kubeconfigs, process logs and exported cluster logs.
	Dir string
	// Kubeconfig has the contexts provider, consumer and provider-b.
	Kubeconfig string
	Konnector  Konnector
	Env        env.Environment

	root                string
	providerKubeconfigs map[string][]byte
	keepDir             bool
}

// New prepares (but does not start) the suite's environment. The
// directory is KBIND_E2E_DIR when set (kept afterwards), else a temporary
// one removed after a passing run.
func New() (*Suite, error) {
	mode, err := SelectMode(os.LookupEnv, Probe)
	if err != nil {
		return nil, err
	}
	s := &Suite{Mode: mode, providerKubeconfigs: map[string][]byte{}}
	if s.root, err = repoRoot(); err != nil {
		return nil, err
	}
	if d := os.Getenv("KBIND_E2E_DIR"); d != "" {
		s.Dir, s.keepDir = d, true
		err = os.MkdirAll(d, 0o755)
	} else {
		s.Dir, err = os.MkdirTemp("", "kbind-e2e-")
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "e2e: %s clusters, logs and kubeconfig in %s\n", s.Mode, s.Dir)

	s.Env = env.NewWithConfig(envconf.New())
	s.Env.Setup(
		s.createCluster(ProviderContext),
		s.createCluster(ConsumerContext),
		s.createCluster(ProviderBContext),
		s.mergeKubeconfigs,
		s.prepareKonnector,
		s.installChart,
		s.startKonnector,
	)
	s.Env.BeforeEachFeature(func(ctx context.Context, _ *envconf.Config, _ *testing.T, f features.Feature) (context.Context, error) {
		if s.Konnector != nil {
			s.Konnector.Mark("=== feature: " + f.Name())
		}
		return ctx, nil
	})
	s.Env.AfterEachFeature(func(ctx context.Context, _ *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
		if t.Failed() {
			s.dumpLogs(ctx, t, f.Name())
		}
		return ctx, nil
	})
	s.Env.Finish(
		s.stopKonnector,
		s.destroyCluster(ProviderBContext),
		s.destroyCluster(ConsumerContext),
		s.destroyCluster(ProviderContext),
	)
	return s, nil
}

// RunTests runs the suite's tests and cleans up; the exit code for os.Exit.
func (s *Suite) RunTests(m *testing.M) int {
	code := s.Env.Run(m)
	if code == 0 && !s.keepDir {
		_ = os.RemoveAll(s.Dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", s.Dir)
	}
	return code
}

// ProviderKubeconfig is the kubeconfig a Connection Secret carries for
// the provider-side context (ProviderContext or ProviderBContext).
func (s *Suite) ProviderKubeconfig(ctxName string) []byte { return s.providerKubeconfigs[ctxName] }

// Root is the repository root.
func (s *Suite) Root() string { return s.root }

// Kubectl runs the project's kubectl with the suite kubeconfig.
func (s *Suite) Kubectl(ctx context.Context, args ...string) (string, error) {
	return testenv.Kubectl(ctx, s.Kubeconfig, args...)
}

// helmConfig is a Helm SDK configuration against the consumer.
func (s *Suite) helmConfig() (*action.Configuration, error) {
	return HelmConfig(s.Kubeconfig, ConsumerContext, Namespace)
}

// installChart is `helm install konnector charts/konnector -n kbind
// --create-namespace` with the suite's values, through the Helm SDK.
func (s *Suite) installChart(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	cfg, err := s.helmConfig()
	if err != nil {
		return ctx, err
	}
	chrt, err := loader.Load(filepath.Join(s.root, "charts", "konnector"))
	if err != nil {
		return ctx, fmt.Errorf("loading the chart: %w", err)
	}
	values := map[string]any{
		"installCRDs": true,
		// The suite's bindings copy related Secrets and ConfigMaps.
		"rbac": map[string]any{"boundResourceGroups": BoundGroups, "relatedResources": true},
	}
	if s.Mode == Kind {
		values["image"] = map[string]any{"repository": KindImageRepository, "tag": KindImageTag, "pullPolicy": "Never"}
		args := make([]any, 0, len(KonnectorArgs))
		for _, a := range KonnectorArgs {
			args = append(args, a)
		}
		values["extraArgs"] = args
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = Release, Namespace, true
	install.Timeout = 2 * time.Minute
	if _, err := install.RunWithContext(ctx, chrt, values); err != nil {
		return ctx, fmt.Errorf("helm install: %w", err)
	}
	// The konnector needs its own CRDs established before it starts.
	if out, err := s.Kubectl(ctx, "--context=consumer", "wait", "--for=condition=Established", "--timeout=60s",
		"crd/connections.core.kbind.io", "crd/clusterbindings.core.kbind.io", "crd/bindings.core.kbind.io"); err != nil {
		return ctx, fmt.Errorf("kbind CRDs not established: %v: %s", err, out)
	}
	return ctx, nil
}

// Uninstall is `helm uninstall konnector -n kbind`.
func (s *Suite) Uninstall() error {
	cfg, err := s.helmConfig()
	if err != nil {
		return err
	}
	if _, err := action.NewUninstall(cfg).Run(Release); err != nil {
		return fmt.Errorf("helm uninstall: %w", err)
	}
	return nil
}

// prepareKonnector builds what the konnector runs from: the binary (local)
// or the image, loaded into the consumer (kind).
func (s *Suite) prepareKonnector(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	var err error
	if s.Mode == Kind {
		s.Konnector, err = newDeploymentKonnector(ctx, s)
	} else {
		s.Konnector, err = newProcessKonnector(ctx, s)
	}
	return ctx, err
}

func (s *Suite) startKonnector(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	return ctx, s.Konnector.Start(ctx)
}

func (s *Suite) stopKonnector(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if s.Konnector != nil {
		s.Konnector.Stop(ctx)
	}
	return ctx, nil
}

// dumpLogs prints the konnector's log since the feature started and the
// tail of each API server's log.
func (s *Suite) dumpLogs(ctx context.Context, t *testing.T, feature string) {
	if s.Konnector != nil {
		t.Logf("konnector log of feature %q:\n%s", feature, s.Konnector.LogsSinceMark(ctx))
	}
	if s.Mode != Local {
		return
	}
	for _, name := range []string{ProviderContext, ConsumerContext, ProviderBContext} {
		t.Logf("%s kube-apiserver log (tail):\n%s", name, tailFile(filepath.Join(s.Dir, name, "kube-apiserver.log"), 30))
	}
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// repoRoot is the directory holding go.work, found from this source file.
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above %s", file)
		}
		dir = parent
	}
}
