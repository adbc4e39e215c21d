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

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// providers is --providers: with 2 the bench APIs are served by a second
// provider too, and two ClusterBindings route alternate namespaces of each
// run — half the objects — one to each provider through its own
// Connection (docs/bindings.md#one-api-several-providers).
var providers = 1

// routeLabel labels each consumer namespace of a run with the provider
// (0 or 1) the ClusterBindings' namespaceSelectors route it to.
const routeLabel = "bench.kbind.io/provider"

// second is the second provider of --providers 2.
type second struct {
	cluster         *testenv.Cluster
	client, limited dynamic.Interface
}

// startSecond starts the second provider with the bench APIs, and its
// clients: one fast, one limited to the konnector's provider QPS.
func startSecond(dir string, crds []*apiextensionsv1.CustomResourceDefinition, etcdArgs map[string][]string, qps float32, burst int) (*second, error) {
	c, err := testenv.StartCluster("provider2", testenv.ClusterOptions{Dir: filepath.Join(dir, "provider2"), CRDs: crds, EtcdArgs: etcdArgs})
	if err != nil {
		return nil, err
	}
	s := &second{cluster: c}
	fast := rest.CopyConfig(c.Config)
	fast.QPS, fast.Burst = 2000, 4000
	limited := rest.CopyConfig(c.Config)
	limited.QPS, limited.Burst = qps, burst
	if s.client, err = dynamic.NewForConfig(fast); err == nil {
		s.limited, err = dynamic.NewForConfig(limited)
	}
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return s, nil
}

// providerIndex is the provider the objects of the run namespace ns
// (<prefix>-<i>) go to: i modulo --providers.
func providerIndex(ns string) int {
	i, _ := strconv.Atoi(ns[strings.LastIndex(ns, "-")+1:])
	return i % providers
}

// providerFor is the fast client of the provider the objects of the
// consumer namespace ns go to.
func (b *bench) providerFor(ns string) dynamic.Interface {
	if b.second != nil && providerIndex(ns) == 1 {
		return b.second.client
	}
	return b.provider
}

// providerClients are the fast clients of every provider.
func (b *bench) providerClients() []dynamic.Interface {
	if b.second == nil {
		return []dynamic.Interface{b.provider}
	}
	return []dynamic.Interface{b.provider, b.second.client}
}

// providerHosts are the API server addresses of every provider.
func (b *bench) providerHosts() []string {
	if b.second == nil {
		return []string{b.pair.Provider.Config.Host}
	}
	return []string{b.pair.Provider.Config.Host, b.second.cluster.Config.Host}
}

// secondManifest is, for --providers 2, the second provider's Connection
// (isolation as the first's) and its ClusterBinding of the bench APIs for
// the namespaces labelled for provider 1; and the namespaceSelector line
// of the first ClusterBinding. Both empty for one provider.
func (b *bench) secondManifest(isoYAML, apis string) (selector, manifest string) {
	if b.second == nil {
		return "", ""
	}
	selector = "  namespaceSelector: {matchLabels: {" + routeLabel + ": \"0\"}}\n"
	manifest = "---\n" + enginetest.ConnectionManifestWith("provider2", "provider2", b.second.cluster.Kubeconfig, "  isolation: "+isoYAML+"\n") + `---
apiVersion: core.kbind.io/v1alpha1
kind: ClusterBinding
metadata: {name: bench-2}
spec:
  connectionRef: {name: provider2}
  namespaceSelector: {matchLabels: {` + routeLabel + `: "1"}}
  apis:
` + apis
	return selector, manifest
}

// limitCreate creates the objects of keys straight on their providers,
// each provider's share through its own client limited to the konnector's
// provider QPS (as each Connection is), all at once; it returns how long
// that took.
func (b *bench) limitCreate(ctx context.Context, keys []key) (time.Duration, error) {
	limited := []dynamic.Interface{b.providerLimited}
	if b.second != nil {
		limited = append(limited, b.second.limited)
	}
	shares := make([][]key, len(limited))
	for _, k := range keys {
		shares[providerIndex(k.ns)] = append(shares[providerIndex(k.ns)], k)
	}
	start := time.Now()
	errs := make([]error, len(limited))
	var wg sync.WaitGroup
	for i, c := range limited {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = createAll(ctx, c, func(g schema.GroupVersionResource) schema.GroupVersionResource { return g }, shares[i], 0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("provider %d: %w", i, err)
		}
	}
	return time.Since(start), nil
}

// deleteLimitObjects deletes the objects limitCreate made for the run.
func (b *bench) deleteLimitObjects(ctx context.Context, prefix string) {
	for _, g := range gvrs {
		for i := 0; i < namespaces; i++ {
			ns := fmt.Sprintf("limit-%s-%d", prefix, i)
			_ = b.providerFor(ns).Resource(g).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	}
}
