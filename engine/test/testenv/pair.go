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

package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Context names of the pair kubeconfig; they match the troubleshooting
// guide's `--context=consumer` and `--context=provider`.
const (
	ConsumerContext = "consumer"
	ProviderContext = "provider"
)

// PairOptions configure a consumer/provider pair.
type PairOptions struct {
	// Dir receives kubeconfigs and logs; a temporary directory when empty.
	Dir string
	// ConsumerCRDs are installed on the consumer; the core.kbind.io CRDs
	// always are.
	ConsumerCRDs []*apiextensionsv1.CustomResourceDefinition
	// KbindCRDs, when set, are the core.kbind.io CRDs the consumer gets
	// instead of this tree's (an upgrade test starts from an earlier
	// release's).
	KbindCRDs []*apiextensionsv1.CustomResourceDefinition
	// ProviderCRDs are installed on the provider.
	ProviderCRDs []*apiextensionsv1.CustomResourceDefinition
	// ConsumerAPIServerArgs and ProviderAPIServerArgs are extra
	// kube-apiserver flags.
	ConsumerAPIServerArgs, ProviderAPIServerArgs map[string][]string
	// EtcdArgs are extra etcd flags for both clusters.
	EtcdArgs map[string][]string
}

// Pair is a running consumer and provider.
type Pair struct {
	Consumer, Provider *Cluster
	// KubeconfigPath holds both clusters as contexts "consumer" and
	// "provider", current context consumer.
	KubeconfigPath string
	// Dir holds everything the pair wrote.
	Dir string
}

// StartPair starts a consumer (with the core.kbind.io CRDs installed) and a
// provider side by side. Stop them with Stop.
func StartPair(opts PairOptions) (*Pair, error) {
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "kbind-pair-")
		if err != nil {
			return nil, fmt.Errorf("creating pair directory: %w", err)
		}
		opts.Dir = dir
	}
	type result struct {
		cluster *Cluster
		err     error
	}
	providerDone := make(chan result, 1)
	go func() {
		c, err := StartCluster(ProviderContext, ClusterOptions{
			Dir: opts.Dir, CRDs: opts.ProviderCRDs, APIServerArgs: opts.ProviderAPIServerArgs, EtcdArgs: opts.EtcdArgs,
		})
		providerDone <- result{c, err}
	}()
	consumer, consumerErr := StartCluster(ConsumerContext, ClusterOptions{
		Dir: opts.Dir, CRDs: append(append([]*apiextensionsv1.CustomResourceDefinition(nil), opts.ConsumerCRDs...), opts.KbindCRDs...),
		InstallKbindCRDs: opts.KbindCRDs == nil, APIServerArgs: opts.ConsumerAPIServerArgs, EtcdArgs: opts.EtcdArgs,
	})
	provider := <-providerDone
	if err := errors.Join(consumerErr, provider.err); err != nil {
		for _, c := range []*Cluster{consumer, provider.cluster} {
			if c != nil {
				_ = c.Stop()
			}
		}
		return nil, err
	}

	p := &Pair{Consumer: consumer, Provider: provider.cluster, Dir: opts.Dir}
	p.KubeconfigPath = filepath.Join(opts.Dir, "kubeconfig")
	kc := kubeconfigAPI(map[string]*rest.Config{
		ConsumerContext: consumer.Config,
		ProviderContext: provider.cluster.Config,
	}, ConsumerContext)
	if err := clientcmd.WriteToFile(*kc, p.KubeconfigPath); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("writing pair kubeconfig: %w", err)
	}
	return p, nil
}

// Stop stops both clusters.
func (p *Pair) Stop() error {
	return errors.Join(p.Consumer.Stop(), p.Provider.Stop())
}

// StartPairT starts a pair for a test (or TestMain-less benchmark) in the
// test's temporary directory and stops it when the test ends. On failure the
// API server logs' tails are printed, so that a broken control plane is
// visible in the test output.
func StartPairT(tb testing.TB, opts PairOptions) *Pair {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	p, err := StartPair(opts)
	if err != nil {
		tb.Fatalf("starting consumer/provider pair: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, c := range []*Cluster{p.Consumer, p.Provider} {
				tb.Logf("%s kube-apiserver log tail:\n%s", c.Name, tail(filepath.Join(c.Dir, "kube-apiserver.log"), 40))
			}
		}
		if err := p.Stop(); err != nil {
			tb.Errorf("stopping pair: %v", err)
		}
	})
	return p
}

// StartClusterT is StartCluster for a test, stopped when the test ends.
func StartClusterT(tb testing.TB, name string, opts ClusterOptions) *Cluster {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	c, err := StartCluster(name, opts)
	if err != nil {
		tb.Fatalf("starting cluster %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("%s kube-apiserver log tail:\n%s", c.Name, tail(filepath.Join(c.Dir, "kube-apiserver.log"), 40))
		}
		if err := c.Stop(); err != nil {
			tb.Errorf("stopping cluster %s: %v", name, err)
		}
	})
	return c
}

// tail returns the last n lines of a file, or a note why it cannot.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
