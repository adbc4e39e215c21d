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

package localcluster_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/e2e/localcluster"
	"github.com/kbind/kbind/engine/test/testenv"
)

var testEnv env.Environment

func TestMain(m *testing.M) {
	testEnv = env.New()
	dir, err := os.MkdirTemp("", "kbind-localcluster-")
	if err != nil {
		panic(err)
	}
	testEnv.Setup(envfuncs.CreateClusterWithOpts(localcluster.NewProvider(), "consumer",
		localcluster.WithDir(dir), localcluster.WithKbindCRDs()))
	testEnv.Finish(envfuncs.ExportClusterLogs("consumer", dir+"/logs"), envfuncs.DestroyCluster("consumer"))
	code := testEnv.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func TestLocalClusterServesKbindAPI(t *testing.T) {
	f := features.New("local cluster").
		Assess("the API server lists namespaces", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			var ns corev1.NamespaceList
			if err := cfg.Client().Resources().List(ctx, &ns); err != nil {
				t.Fatal(err)
			}
			if len(ns.Items) == 0 {
				t.Error("no namespaces")
			}
			return ctx
		}).
		Assess("kubectl sees the kbind API at the built version", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			out, err := testenv.Kubectl(ctx, cfg.KubeconfigFile(), "api-resources", "--api-group=core.kbind.io", "-o", "name")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"connections.core.kbind.io", "clusterbindings.core.kbind.io", "bindings.core.kbind.io"} {
				if !strings.Contains(out, want) {
					t.Errorf("api-resources lacks %s:\n%s", want, out)
				}
			}
			out, err = testenv.Kubectl(ctx, cfg.KubeconfigFile(), "version", "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(out, `"gitVersion": "`+testenv.KubernetesVersion+`"`) != 2 {
				t.Errorf("client and server should both be %s:\n%s", testenv.KubernetesVersion, out)
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
