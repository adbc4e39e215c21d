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

package syncer_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// shared is the package's one engine — a consumer/provider pair, the
// engine running on the consumer, the Connection "provider" and the
// bindings of setup — started by the first test that asks for it (useEnv),
// so that the decision-table tests never wait for it. It sets env.
//
// A consumer's identity is its cluster's kube-system UID and the engine
// reconciles every Connection of its cluster, so the package shares one
// engine; each test isolates itself with names of its own (unique): its
// namespaces, its Connections and bindings, and — where it binds an API of
// its own — a provider CRD of a group of its own (providerAPI). A test
// that owns everything it touches calls parallelEnv; one that restarts the
// engine, watches everything (TestIdleWritesNothing) or binds an API other
// tests bind too calls useEnv and runs alone (Go runs every sequential
// test before the parallel ones).
var shared = testenv.NewShared("engine on a consumer/provider pair", func() (*enginetest.Env, func() error, error) {
	e, stop, err := enginetest.Start(enginetest.Options{ProviderCRDs: providerCRDs()})
	if err != nil {
		return nil, nil, err
	}
	env = e
	if err := setup(); err != nil {
		if os.Getenv("KBIND_DEBUG_LOGS") != "" {
			fmt.Fprintln(os.Stderr, env.Logs.String())
		}
		stop()
		return nil, nil, err
	}
	return e, func() error { stop(); return nil }, nil
})

func TestMain(m *testing.M) { testenv.Main(m, shared) }

// useEnv starts the package's engine if no test has yet; env is set once
// it returns.
func useEnv(t *testing.T) {
	t.Helper()
	shared.Get(t)
}

// parallelEnv is useEnv for a test that owns everything it touches: it
// runs in parallel with the others that do.
func parallelEnv(t *testing.T) {
	t.Helper()
	t.Parallel()
	useEnv(t)
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// unique is base with a suffix no other name of this process has: a
// namespace, Connection, binding, user or API group of one test (and of
// one run of it, under -count).
func unique(base string) string {
	return testenv.UniqueName(strings.Trim(notDNS.ReplaceAllString(strings.ToLower(base), "-"), "-"))
}

// providerAPI creates crd on the provider in a group of its own (its
// group's first label made unique) and waits until the API server serves
// it: the API is the test's alone, bound by no other test and by no
// earlier run. It returns the API's GVK and name (plural.group).
func providerAPI(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) (schema.GroupVersionKind, string) {
	t.Helper()
	ctx := context.Background()
	first, rest, _ := strings.Cut(crd.Spec.Group, ".")
	crd.Spec.Group = unique(first) + "." + rest
	crd.Name = crd.Spec.Names.Plural + "." + crd.Spec.Group
	if err := env.Provider.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the provider CRD "+crd.Name+" established", func() error {
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", crd.Status.Conditions)
	})
	return schema.GroupVersionKind{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.Kind}, crd.Name
}

// namespacedAPI is providerAPI of a namespaced, exported CRD of kind in
// group (made unique).
func namespacedAPI(t *testing.T, kind, group string) (schema.GroupVersionKind, string) {
	t.Helper()
	lower := strings.ToLower(kind)
	return providerAPI(t, enginetest.CRD(lower+"s", lower, kind, group, apiextensionsv1.NamespaceScoped, true))
}

// addUser provisions a provider user named after base (made unique).
// envtest's certificate authority counts its serial numbers without a
// lock, so parallel tests provision their users one at a time.
func addUser(t *testing.T, base string, groups ...string) *testenv.User {
	t.Helper()
	usersMu.Lock()
	defer usersMu.Unlock()
	user, err := env.Pair.Provider.AddUser(unique(base), groups...)
	if err != nil {
		t.Fatal(err)
	}
	return user
}

var usersMu sync.Mutex
