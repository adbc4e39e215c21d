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

// Package testenv starts real local control planes (etcd + kube-apiserver
// built by tools/controlplane) for kbind's integration and e2e tests: a
// single named cluster, or the consumer/provider pair every kbind test
// needs. It hands back admin rest configs and kubeconfig files, provisions
// restricted users for RBAC tests, and runs the kubectl the project built.
//
// It lives in the engine module so that engine tests and the e2e module can
// both import it; it imports nothing else from kbind but the API's CRDs.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kbind/kbind/api/crds"
)

// ClusterOptions configure one local control plane.
type ClusterOptions struct {
	// Dir receives the cluster's kubeconfig and process logs. Required.
	Dir string
	// CRDs are installed (and waited for) before Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// InstallKbindCRDs installs the core.kbind.io CRDs.
	InstallKbindCRDs bool
	// APIServerArgs are extra kube-apiserver flags, name to values.
	APIServerArgs map[string][]string
	// EtcdArgs are extra etcd flags, name to values (the bench turns
	// fsync off with them, to measure kbind rather than the disk).
	EtcdArgs map[string][]string

	// etcdDataDir, when set, is the etcd data the cluster starts on
	// (Clone: a restored snapshot); it is not removed when it stops.
	etcdDataDir string
}

// Cluster is a running local control plane.
type Cluster struct {
	// Name is the cluster's name; it is also the context name in its
	// kubeconfig.
	Name string
	// Config is an admin (system:masters) rest config.
	Config *rest.Config
	// Kubeconfig is the admin kubeconfig, credentials inline.
	Kubeconfig []byte
	// KubeconfigPath is the file holding Kubeconfig.
	KubeconfigPath string
	// Dir holds the kubeconfig and the process logs.
	Dir string

	env  *envtest.Environment
	logs []*os.File
	// stopped and restarted are the components a fault test stopped or
	// started again (restart.go); not safe for concurrent use.
	stopped   map[Component][]string
	restarted map[Component]restarted
	stopOnce  sync.Once
	stopErr   error
	usersMu   sync.Mutex
}

// StartCluster starts a control plane named name. Stop it with Stop.
//
// envtest gives a new API server 5 s to show its default namespace, a
// bound it does not let callers change; on a machine busy with other
// suites that is sometimes too short, though the control plane comes up
// fine. Such a start is tried once more (it was stopped and its data
// removed) before it fails.
func StartCluster(name string, opts ClusterOptions) (*Cluster, error) {
	c, err := startCluster(name, opts)
	if err != nil && strings.Contains(err.Error(), "default namespace didn't register within deadline") {
		c, err = startCluster(name, opts)
	}
	return c, err
}

func startCluster(name string, opts ClusterOptions) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("testenv: ClusterOptions.Dir is required")
	}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	c := &Cluster{Name: name, Dir: dir, stopped: map[Component][]string{}, restarted: map[Component]restarted{}}

	installCRDs := append([]*apiextensionsv1.CustomResourceDefinition(nil), opts.CRDs...)
	if opts.InstallKbindCRDs {
		kbindCRDs, err := crds.CRDs()
		if err != nil {
			return nil, err
		}
		installCRDs = append(installCRDs, kbindCRDs...)
	}

	wait := startTimeout()
	plane := envtest.ControlPlane{
		APIServer: &envtest.APIServer{StartTimeout: wait, StopTimeout: stopTimeout},
		Etcd:      &envtest.Etcd{DataDir: opts.etcdDataDir, StartTimeout: wait, StopTimeout: stopTimeout},
	}
	apiLog, err := c.openLog("kube-apiserver.log")
	if err != nil {
		return nil, err
	}
	etcdLog, err := c.openLog("etcd.log")
	if err != nil {
		c.closeLogs()
		return nil, err
	}
	plane.APIServer.Out, plane.APIServer.Err = apiLog, apiLog
	plane.Etcd.Out, plane.Etcd.Err = etcdLog, etcdLog
	args := plane.APIServer.Configure()
	for flag, values := range opts.APIServerArgs {
		args.Set(flag, values...)
	}
	etcdArgs := plane.Etcd.Configure()
	for flag, values := range opts.EtcdArgs {
		etcdArgs.Set(flag, values...)
	}

	c.env = &envtest.Environment{
		ControlPlane:          plane,
		BinaryAssetsDirectory: assets,
		CRDs:                  installCRDs,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: wait},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := c.env.Start()
	if err != nil {
		_ = c.env.Stop()
		c.closeLogs()
		return nil, fmt.Errorf("starting control plane %q (logs in %s): %w", name, dir, err)
	}
	c.Config = rest.CopyConfig(cfg)
	c.Config.QPS, c.Config.Burst = 200, 400

	if c.Kubeconfig, err = KubeconfigFor(name, cfg); err != nil {
		_ = c.Stop()
		return nil, err
	}
	c.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, c.Kubeconfig, 0o600); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	return c, nil
}

// StartTimeoutEnv overrides how long a test control plane's etcd and
// kube-apiserver may take to serve, and its CRDs to be established.
const StartTimeoutEnv = "KBIND_TEST_START_TIMEOUT"

// defaultStartTimeout replaces envtest's 20 s (10 s for CRDs): an API
// server comes up in 3–6 s on an idle 2-core machine, but several starting
// at once next to running suites (make test runs two packages at a time,
// each with parallel tests) took over 20 s and failed the test for the
// machine's load. A start that truly hangs still fails, after this long.
const defaultStartTimeout = 3 * time.Minute

// stopTimeout replaces envtest's 20 s: a kube-apiserver with clients still
// attached (a konnector draining through it) took about 30 s to shut
// down, and the test failed on its cleanup.
const stopTimeout = 90 * time.Second

func startTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(StartTimeoutEnv)); err == nil && d > 0 {
		return d
	}
	return defaultStartTimeout
}

func (c *Cluster) openLog(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(c.Dir, name))
	if err != nil {
		return nil, fmt.Errorf("creating log file: %w", err)
	}
	c.logs = append(c.logs, f)
	return f, nil
}

func (c *Cluster) closeLogs() {
	for _, f := range c.logs {
		_ = f.Close()
	}
	c.logs = nil
}

// Stop stops the control plane and removes its data. It is safe to call
// more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = errors.Join(c.stopRestarted(), c.env.Stop())
		c.closeLogs()
	})
	return c.stopErr
}

// User is a provisioned, authenticated identity on a cluster. It carries no
// permissions beyond what its groups give; bind RBAC to Name.
type User struct {
	Name   string
	Groups []string
	// Config authenticates as the user with a client certificate.
	Config *rest.Config
	// Kubeconfig holds the same credentials inline.
	Kubeconfig []byte
}

// AddUser provisions a user authenticated by a client certificate.
func (c *Cluster) AddUser(name string, groups ...string) (*User, error) {
	// envtest's certificate authority counts serial numbers without a
	// lock: parallel tests add users one at a time.
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 200, Burst: 400})
	if err != nil {
		return nil, fmt.Errorf("provisioning user %q on %s: %w", name, c.Name, err)
	}
	cfg := u.Config()
	kubeconfig, err := KubeconfigFor(c.Name, cfg)
	if err != nil {
		return nil, err
	}
	return &User{Name: name, Groups: groups, Config: rest.CopyConfig(cfg), Kubeconfig: kubeconfig}, nil
}

// KubeconfigFor renders a rest config with inline credentials as a
// kubeconfig whose cluster, user and context are all called name.
func KubeconfigFor(name string, cfg *rest.Config) ([]byte, error) {
	out, err := clientcmd.Write(*kubeconfigAPI(map[string]*rest.Config{name: cfg}, name))
	if err != nil {
		return nil, fmt.Errorf("rendering kubeconfig for %s: %w", name, err)
	}
	return out, nil
}

// kubeconfigAPI builds one kubeconfig with a context per named rest config.
// Only inline credentials are carried: kbind refuses file references.
func kubeconfigAPI(configs map[string]*rest.Config, current string) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	for name, cfg := range configs {
		kc.Clusters[name] = &clientcmdapi.Cluster{
			Server:                   strings.TrimSuffix(cfg.Host, "/"),
			CertificateAuthorityData: cfg.CAData,
		}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
			ClientCertificateData: cfg.CertData,
			ClientKeyData:         cfg.KeyData,
			Token:                 cfg.BearerToken,
		}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = current
	return kc
}

// Kubectl runs the project's kubectl against this cluster as admin and
// returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return Kubectl(ctx, c.KubeconfigPath, args...)
}

// Kubectl runs the project's kubectl with the given kubeconfig file and
// returns its combined output; a non-zero exit is an error that carries it.
func Kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	bin, err := KubectlPath()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
