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

package apitest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/testenv"
)

// One API server serves every test in this package, started by the first
// test that asks: they only create uniquely named objects (uniqueName, a
// namespace of their own), so they cannot disturb each other and run in
// parallel.
var shared = testenv.NewShared("consumer cluster with the kbind API", startCluster)

func TestMain(m *testing.M) { testenv.Main(m, shared) }

// apiEnv is the shared cluster and an admin client of it.
type apiEnv struct {
	cluster *testenv.Cluster
	c       client.Client
}

func startCluster() (apiEnv, func() error, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return apiEnv{}, nil, err
	}
	if err := kbindv1alpha1.AddToScheme(scheme); err != nil {
		return apiEnv{}, nil, err
	}
	dir, err := os.MkdirTemp("", "kbind-apitest-")
	if err != nil {
		return apiEnv{}, nil, err
	}
	cluster, err := testenv.StartCluster("consumer", testenv.ClusterOptions{Dir: dir, InstallKbindCRDs: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return apiEnv{}, nil, err
	}
	stop := func() error { return errors.Join(cluster.Stop(), os.RemoveAll(dir)) }
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		return apiEnv{}, nil, errors.Join(fmt.Errorf("a client of the cluster: %w", err), stop())
	}
	return apiEnv{cluster: cluster, c: c}, stop, nil
}

// kube marks t parallel and returns the shared cluster's client.
func kube(t *testing.T) client.Client {
	t.Helper()
	t.Parallel()
	return shared.Get(t).c
}
