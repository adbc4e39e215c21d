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

package connection_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// The package's tests share one consumer/provider pair and one running
// engine, started by the first test that needs them (useShared): the pure
// tests never wait for it. Each test uses Connection and Secret names of
// its own (unique), so most run in parallel. A test that needs a consumer
// identity or an engine of its own (other options, restarts) takes a
// cluster from consumers and runs an engine on it (ownConsumer); one that
// needs a provider of its own (exports of its own) takes one from clusters
// (ownProvider). A test that restarts the shared engine, or asserts on
// something every engine of the process shares, does not run in parallel.
var (
	env      *enginetest.Env
	pair     *testenv.Pair
	consumer client.Client
	provider client.Client
	scheme   *runtime.Scheme
	logs     *enginetest.SyncBuffer
)

const (
	secretNS = enginetest.SecretNamespace
	otherNS  = "elsewhere" // not an allowed Secret namespace
)

// shared sets the package variables above once it has started (under its
// lock: a test reads them after useShared returned).
var shared = testenv.NewShared("consumer/provider pair and engine", func() (*enginetest.Env, func() error, error) {
	e, stop, err := enginetest.Start(enginetest.Options{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		widgetCRD("widgets", "example.org", true), widgetCRD("gadgets", "example.org", false),
	}})
	if err != nil {
		return nil, nil, err
	}
	if err := e.Consumer.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}); err != nil {
		stop()
		return nil, nil, err
	}
	env, pair, consumer, provider, scheme, logs = e, e.Pair, e.Consumer, e.Provider, e.Scheme, e.Logs
	return e, func() error { stop(); return nil }, nil
})

// consumers hands out consumer clusters (core.kbind.io CRDs installed) to
// tests that need their own identity or an engine of their own; clusters
// hands out bare ones: a provider of a test's own.
var (
	consumers = testenv.NewPool("cluster own-consumer", startCluster("own-consumer", testenv.ClusterOptions{InstallKbindCRDs: true}))
	clusters  = testenv.NewPool("cluster own-provider", startCluster("own-provider", testenv.ClusterOptions{}))
)

// startCluster starts a cluster named name in a directory of its own,
// one at a time: the pools start theirs in the background while tests
// run, and control planes started side by side on a busy machine overran
// envtest's start timeout (the shared pair's two are started together,
// before any other).
func startCluster(name string, opts testenv.ClusterOptions) func() (*testenv.Cluster, func() error, error) {
	return func() (*testenv.Cluster, func() error, error) {
		dir, err := os.MkdirTemp("", "kbind-cluster-")
		if err != nil {
			return nil, nil, err
		}
		o := opts // each start its own copy: pools start them concurrently
		o.Dir = dir
		clusterStarts.Lock()
		c, err := testenv.StartCluster(name, o)
		clusterStarts.Unlock()
		if err != nil {
			return nil, nil, err
		}
		return c, func() error {
			if err := c.Stop(); err != nil {
				return err // the logs stay for the reader
			}
			return os.RemoveAll(dir)
		}, nil
	}
}

var clusterStarts sync.Mutex

// bystander is the cluster tests move a Connection's kubeconfig to, to
// check that kbind writes nothing to a cluster whose identity differs from
// the one the Connection is pinned to: no test may ever find anything of
// kbind's on it.
var bystander = testenv.NewShared("cluster bystander", startCluster("bystander", testenv.ClusterOptions{}))

func TestMain(m *testing.M) { testenv.Main(m, shared, consumers, clusters, bystander) }

// useShared starts the package's pair and engine if no test has yet, and
// sets env, pair, consumer, provider, scheme and logs.
func useShared(t *testing.T) {
	t.Helper()
	shared.Get(t)
}

// ownConsumer is a consumer cluster of the test's own with the kubeconfig
// Secret namespace, and a client of it; run an engine on it with
// env.StartEngineOn or env.RunEngineOn.
func ownConsumer(t *testing.T) (*testenv.Cluster, client.Client) {
	t.Helper()
	useShared(t)
	c := consumers.Take(t)
	cc, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNS}}); err != nil {
		t.Fatal(err)
	}
	return c, cc
}

// ownProvider is a cluster of the test's own with crds installed (and
// served), and a client of it.
func ownProvider(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) (*testenv.Cluster, client.Client) {
	t.Helper()
	useShared(t)
	return withCRDs(t, clusters.Take(t), crds...)
}

// withCRDs installs crds on c (and waits until they are served), and
// returns c and a client of it.
func withCRDs(t *testing.T, c *testenv.Cluster, crds ...*apiextensionsv1.CustomResourceDefinition) (*testenv.Cluster, client.Client) {
	t.Helper()
	if len(crds) > 0 {
		var install []*apiextensionsv1.CustomResourceDefinition
		for _, crd := range crds {
			install = append(install, crd.DeepCopy())
		}
		if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: install, MaxTime: enginetest.PollTimeout}); err != nil {
			t.Fatalf("installing CRDs on %s: %v", c.Name, err)
		}
	}
	cc, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cc
}

// useBystander is the package's bystander cluster with crds installed,
// and a client of it.
func useBystander(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) (*testenv.Cluster, client.Client) {
	t.Helper()
	useShared(t)
	return withCRDs(t, bystander.Get(t), crds...)
}

// unique returns base the first time this process asks for it and
// base-2, base-3, … after: a test run again (-count) gets Connections,
// Secrets, CRD groups, Events, log lines and metric series of its own,
// and a name two tests chose by chance does not collide.
func unique(base string) string {
	uniqueNames.Lock()
	defer uniqueNames.Unlock()
	uniqueNames.used[base]++
	if n := uniqueNames.used[base]; n > 1 {
		return fmt.Sprintf("%s-%d", base, n)
	}
	return base
}

var uniqueNames = struct {
	sync.Mutex
	used map[string]int
}{used: map[string]int{}}

func widgetCRD(plural, group string, exported bool) *apiextensionsv1.CustomResourceDefinition {
	kind := map[string]string{"widgets": "Widget", "gadgets": "Gadget", "logicalclusters": "LogicalCluster"}[plural]
	scope := apiextensionsv1.NamespaceScoped
	if plural == "logicalclusters" {
		scope = apiextensionsv1.ClusterScoped
	}
	return enginetest.CRD(plural, strings.ToLower(kind), kind, group, scope, exported)
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	enginetest.Eventually(t, what, check)
}

// getConnection reads a Connection from the consumer.
func getConnection(t *testing.T, name string) *kbindv1alpha1.Connection {
	t.Helper()
	return getConnectionOn(t, consumer, name)
}

// getConnectionOn reads a Connection from the consumer c.
func getConnectionOn(t *testing.T, c client.Client, name string) *kbindv1alpha1.Connection {
	t.Helper()
	conn := &kbindv1alpha1.Connection{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
		t.Fatalf("getting connection %s: %v", name, err)
	}
	return conn
}

// waitCondition waits until the Connection's condition has the status and
// reason, and its message contains every fragment.
func waitCondition(t *testing.T, name string, typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus, reason kbindv1alpha1.Reason, fragments ...string) *kbindv1alpha1.Connection {
	t.Helper()
	return waitConditionOn(t, consumer, name, typ, status, reason, fragments...)
}

// waitConditionOn is waitCondition on the consumer c.
func waitConditionOn(t *testing.T, c client.Client, name string, typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus, reason kbindv1alpha1.Reason, fragments ...string) *kbindv1alpha1.Connection {
	t.Helper()
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	enginetest.WaitCondition(t, c, conn, typ, status, reason, fragments...)
	return conn
}

// addProviderUser provisions a user on the shared provider. One at a time:
// envtest's certificate authority counts its serial numbers without a
// lock, and parallel tests add users.
func addProviderUser(name string, groups ...string) (*testenv.User, error) {
	addUser.Lock()
	defer addUser.Unlock()
	return pair.Provider.AddUser(name, groups...)
}

var addUser sync.Mutex

// grantProvider grants rules on the provider to user.
func grantProvider(t *testing.T, name, user string, rules ...rbacv1.PolicyRule) (revoke func()) {
	t.Helper()
	return enginetest.Grant(t, provider, name, user, rules...)
}
