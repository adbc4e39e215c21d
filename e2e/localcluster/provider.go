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

// Package localcluster is an e2e-framework cluster provider backed by the
// local control planes kbind builds from source (etcd + kube-apiserver, see
// engine/testenv): the e2e suites' stand-in for kind on machines without
// Docker. A cluster here has no nodes, so image loading is a no-op and
// workloads never run; the konnector under test runs as a host process.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/support"

	"github.com/kbind/kbind/engine/test/testenv"
)

// Provider implements support.E2EClusterProvider on testenv clusters.
type Provider struct {
	name    string
	dir     string
	version string
	cluster *testenv.Cluster
	kbind   bool
}

var _ support.E2EClusterProviderWithImageLoader = &Provider{}

// NewProvider returns a Provider; configure it with the With* methods.
func NewProvider() support.E2EClusterProvider {
	return &Provider{}
}

// WithKbindCRDs is a ClusterOpts that installs the core.kbind.io CRDs when
// the cluster starts (the consumer side).
func WithKbindCRDs() support.ClusterOpts {
	return func(p support.E2EClusterProvider) {
		if lp, ok := p.(*Provider); ok {
			lp.kbind = true
		}
	}
}

// WithDir is a ClusterOpts that places the cluster's kubeconfig and logs in
// dir (default: a temporary directory).
func WithDir(dir string) support.ClusterOpts {
	return func(p support.E2EClusterProvider) {
		if lp, ok := p.(*Provider); ok {
			lp.dir = dir
		}
	}
}

// SetDefaults sets the Kubernetes version to the one kbind builds.
func (p *Provider) SetDefaults() support.E2EClusterProvider {
	if p.version == "" {
		p.version = testenv.KubernetesVersion
	}
	return p
}

// WithName names the cluster (and its kubeconfig context).
func (p *Provider) WithName(name string) support.E2EClusterProvider { p.name = name; return p }

// WithVersion accepts only the version kbind builds; anything else fails
// at Create with a message, not silently.
func (p *Provider) WithVersion(version string) support.E2EClusterProvider {
	p.version = version
	return p
}

// WithPath is ignored: binaries come from testenv.AssetsDir
// (KUBEBUILDER_ASSETS or the kbind control plane cache).
func (p *Provider) WithPath(string) support.E2EClusterProvider { return p }

// WithOpts applies e2e-framework cluster options.
func (p *Provider) WithOpts(opts ...support.ClusterOpts) support.E2EClusterProvider {
	for _, o := range opts {
		o(p)
	}
	return p
}

// Create starts the control plane and returns the admin kubeconfig path.
func (p *Provider) Create(_ context.Context, _ ...string) (string, error) {
	if p.cluster != nil {
		return p.cluster.KubeconfigPath, nil
	}
	if p.name == "" {
		return "", errors.New("localcluster: a cluster name is required")
	}
	if p.version != testenv.KubernetesVersion {
		return "", fmt.Errorf("localcluster: only %s is built locally, not %s", testenv.KubernetesVersion, p.version)
	}
	if p.dir == "" {
		dir, err := os.MkdirTemp("", "kbind-e2e-")
		if err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		p.dir = dir
	}
	c, err := testenv.StartCluster(p.name, testenv.ClusterOptions{Dir: p.dir, InstallKbindCRDs: p.kbind})
	if err != nil {
		return "", err
	}
	p.cluster = c
	return c.KubeconfigPath, nil
}

// CreateWithConfig is not supported: local clusters have no config file.
func (p *Provider) CreateWithConfig(context.Context, string) (string, error) {
	return "", errors.New("localcluster: config files are not supported; use WithOpts")
}

// GetKubeconfig is the admin kubeconfig path of the running cluster.
func (p *Provider) GetKubeconfig() string {
	if p.cluster == nil {
		return ""
	}
	return p.cluster.KubeconfigPath
}

// GenerateKubeconfig returns the admin kubeconfig path (it is written at Create).
func (p *Provider) GenerateKubeconfig(...string) (string, error) {
	if p.cluster == nil {
		return "", errors.New("localcluster: cluster not created")
	}
	return p.cluster.KubeconfigPath, nil
}

// GetKubectlContext is the cluster name: testenv names the context so.
func (p *Provider) GetKubectlContext() string { return p.name }

// ExportLogs copies the API server and etcd logs into dest.
func (p *Provider) ExportLogs(_ context.Context, dest string) error {
	if p.cluster == nil {
		return errors.New("localcluster: cluster not created")
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"kube-apiserver.log", "etcd.log"} {
		if err := copyFile(filepath.Join(p.cluster.Dir, name), filepath.Join(dest, p.name+"-"+name)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// Destroy stops the control plane.
func (p *Provider) Destroy(context.Context) error {
	if p.cluster == nil {
		return nil
	}
	err := p.cluster.Stop()
	p.cluster = nil
	return err
}

// WaitForControlPlane returns at once: testenv.StartCluster only returns
// once the API server serves and the default namespace exists.
func (p *Provider) WaitForControlPlane(context.Context, klient.Client) error { return nil }

// KubernetesRestConfig is the admin rest config of the running cluster.
func (p *Provider) KubernetesRestConfig() *rest.Config {
	if p.cluster == nil {
		return nil
	}
	return rest.CopyConfig(p.cluster.Config)
}

// LoadImage is a no-op: local clusters run no workloads.
func (p *Provider) LoadImage(context.Context, string, ...string) error { return nil }

// LoadImageArchive is a no-op: local clusters run no workloads.
func (p *Provider) LoadImageArchive(context.Context, string, ...string) error { return nil }
