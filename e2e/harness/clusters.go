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

// Package harness is what kbind's e2e-framework suites share: the switch
// between local control planes and kind, one kubeconfig with the contexts
// `provider`, `consumer` and `provider-b` (the names the troubleshooting
// guide uses), the konnector under test (a process with the chart's
// ServiceAccount on local clusters, the chart's Deployment on kind), kubectl
// as an operator runs it, and logs kept per feature and printed on failure.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/support/kind"

	"github.com/kbind/kbind/e2e/localcluster"
)

// ClustersEnv selects the cluster provider: "local" (the control planes
// kbind builds from source), "kind", or "auto" (the default: kind when
// `docker info` and `kind version` both work, else local).
const ClustersEnv = "KBIND_E2E_CLUSTERS"

// Context names in the suite's kubeconfig.
const (
	ProviderContext  = "provider"
	ConsumerContext  = "consumer"
	ProviderBContext = "provider-b"
)

// Mode is the cluster provider in use.
type Mode string

// The modes: local control planes (etcd and kube-apiserver processes), or
// kind clusters.
const (
	Local Mode = "local"
	Kind  Mode = "kind"
)

// SelectMode reads ClustersEnv; "auto" (or unset) probes Docker and kind.
func SelectMode(lookupEnv func(string) (string, bool), probe func(name string, args ...string) error) (Mode, error) {
	v, _ := lookupEnv(ClustersEnv)
	switch v {
	case "local":
		return Local, nil
	case "kind":
		return Kind, nil
	case "", "auto":
		if probe("docker", "info") == nil && probe("kind", "version") == nil {
			return Kind, nil
		}
		return Local, nil
	default:
		return "", fmt.Errorf("%s=%q: want local, kind or auto", ClustersEnv, v)
	}
}

// Probe runs a command quietly with a timeout; nil when it succeeded.
func Probe(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).Run()
}

// clusterName is the provider-level cluster name of a context: kind
// clusters are global on the Docker host, so they get a kbind prefix.
func clusterName(mode Mode, ctxName string) string {
	if mode == Kind {
		return "kbind-e2e-" + ctxName
	}
	return ctxName
}

func newProvider(mode Mode) support.E2EClusterProvider {
	if mode == Kind {
		return kind.NewProvider()
	}
	return localcluster.NewProvider()
}

// createCluster is an env.Func creating one cluster of the suite.
func (s *Suite) createCluster(ctxName string) func(context.Context, *envconf.Config) (context.Context, error) {
	var opts []support.ClusterOpts
	if s.Mode == Local {
		opts = append(opts, localcluster.WithDir(s.Dir)) // the cluster's files go to Dir/<name>
	}
	return envfuncs.CreateClusterWithOpts(newProvider(s.Mode), clusterName(s.Mode, ctxName), opts...)
}

// mergeKubeconfigs writes one kubeconfig holding every suite cluster under
// its context name, current context consumer, and remembers for each
// provider-side cluster the kubeconfig a Connection Secret should carry
// (for kind: the address reachable from inside the Docker network).
func (s *Suite) mergeKubeconfigs(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	merged := clientcmdapi.NewConfig()
	for _, name := range []string{ProviderContext, ConsumerContext, ProviderBContext} {
		p, ok := envfuncs.GetClusterFromContext(ctx, clusterName(s.Mode, name))
		if !ok {
			return ctx, fmt.Errorf("cluster %s was not created", name)
		}
		admin, err := clientcmd.LoadFromFile(p.GetKubeconfig())
		if err != nil {
			return ctx, fmt.Errorf("kubeconfig of %s: %w", name, err)
		}
		if err := addAs(merged, admin, name); err != nil {
			return ctx, err
		}
		if name == ConsumerContext {
			continue
		}
		// What a Connection Secret holds: for local clusters the admin
		// kubeconfig itself (credentials inline); for kind the internal
		// address the consumer's Pods can reach.
		secretKC := admin
		if s.Mode == Kind {
			path, err := p.GenerateKubeconfig("--internal")
			if err != nil {
				return ctx, fmt.Errorf("internal kubeconfig of %s: %w", name, err)
			}
			if secretKC, err = clientcmd.LoadFromFile(path); err != nil {
				return ctx, err
			}
		}
		one := clientcmdapi.NewConfig()
		if err := addAs(one, secretKC, name); err != nil {
			return ctx, err
		}
		one.CurrentContext = name
		data, err := clientcmd.Write(*one)
		if err != nil {
			return ctx, err
		}
		s.providerKubeconfigs[name] = data
	}
	merged.CurrentContext = ConsumerContext
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, s.Kubeconfig); err != nil {
		return ctx, err
	}
	cfg.WithKubeconfigFile(s.Kubeconfig)
	return ctx, nil
}

// addAs copies the current context of src into dst as context, cluster
// and user all named name.
func addAs(dst, src *clientcmdapi.Config, name string) error {
	c, ok := src.Contexts[src.CurrentContext]
	if !ok {
		return fmt.Errorf("kubeconfig for %s has no current context", name)
	}
	cluster, user := src.Clusters[c.Cluster], src.AuthInfos[c.AuthInfo]
	if cluster == nil || user == nil {
		return errors.New("kubeconfig for " + name + " lacks its cluster or user")
	}
	dst.Clusters[name] = cluster.DeepCopy()
	dst.AuthInfos[name] = user.DeepCopy()
	dst.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	return nil
}

// destroyCluster exports the cluster's logs into the suite directory and
// deletes it.
func (s *Suite) destroyCluster(ctxName string) func(context.Context, *envconf.Config) (context.Context, error) {
	name := clusterName(s.Mode, ctxName)
	export := envfuncs.ExportClusterLogs(name, filepath.Join(s.Dir, "logs"))
	destroy := envfuncs.DestroyCluster(name)
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		if _, ok := envfuncs.GetClusterFromContext(ctx, name); !ok {
			return ctx, nil
		}
		if ctx2, err := export(ctx, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: exporting logs of %s: %v\n", ctxName, err)
		} else {
			ctx = ctx2
		}
		return destroy(ctx, cfg)
	}
}
