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

package isolationtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// env is the provider and consumer A (with its engine), which every test
// shares: set by shared's start, read by a test once it has called start
// (tenants and consumerA do). The tests run one after another: each
// connects consumer A to the provider as Connection "provider" and tears
// it down at its end (teardown).
var env *enginetest.Env

var shared = testenv.NewShared("provider and consumer A with its engine", func() (*enginetest.Env, func() error, error) {
	e, stop, err := enginetest.Start(enginetest.Options{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clustergadgets", "clustergadget", "ClusterGadget", "example.org", apiextensionsv1.ClusterScoped, true),
	}})
	if err != nil {
		return nil, nil, err
	}
	env = e
	return e, func() error { stop(); return nil }, nil
})

// consumers are the consumer clusters of the tests that need one besides
// consumer A (consumer B of two tenants) or instead of it (an engine with
// options of its own): a fresh one per test (its own identity), the next
// one started while a test runs.
var consumers = testenv.ClusterPool("consumer", testenv.ClusterOptions{InstallKbindCRDs: true})

func TestMain(m *testing.M) { testenv.Main(m, shared, consumers) }

// start starts the shared provider and consumer A if no test has yet.
func start(t *testing.T) {
	t.Helper()
	shared.Get(t)
}

// startConsumer takes a fresh consumer cluster (with the core.kbind.io
// CRDs) from the pool and starts an engine on it with consumer A's
// options changed by mutate (nil: unchanged), as enginetest's
// StartConsumer does; both stop when the test ends.
func startConsumer(t *testing.T, mutate func(*engine.Options)) client.Client {
	t.Helper()
	start(t)
	cluster := consumers.Take(t)
	c, err := client.New(cluster.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enginetest.SecretNamespace}}); err != nil {
		t.Fatal(err)
	}
	env.StartEngineOn(t, cluster.Config, mutate)
	return c
}
