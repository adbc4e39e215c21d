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

package clonetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// production is the provider and the consumer cluster with its engine,
// its Connection "provider" and the ClusterBinding "widgets", started by
// the first test that asks. Its tests run one after another: each restarts
// production's engine or runs a second one with production's identity.
var production = testenv.NewShared("production (a pair, its engine, connected)", startProduction)

// interval is the heartbeat interval of every engine here.
const interval = time.Second

func TestMain(m *testing.M) { testenv.Main(m, production) }

func startProduction() (*enginetest.Env, func() error, error) {
	env, stop, err := enginetest.Start(enginetest.Options{
		ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
			enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		},
		Engine: engine.Options{HeartbeatInterval: interval},
	})
	if err != nil {
		return nil, nil, err
	}
	if err := setup(env); err != nil {
		stop()
		return nil, nil, err
	}
	return env, func() error { stop(); return nil }, nil
}

// productionFor returns production for t; with KBIND_DEBUG_LOGS set, a
// failed test prints the engine's log.
func productionFor(t *testing.T) *enginetest.Env {
	t.Helper()
	env := production.Get(t)
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("KBIND_DEBUG_LOGS") != "" {
			t.Log(env.Logs.String())
		}
	})
	return env
}

// setup connects production to the provider and binds widgets
// cluster-wide.
func setup(env *enginetest.Env) error {
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
				NamespacedBindings: enginetest.AdmitAllNamespaces()}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
			APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}}},
	}
	for _, o := range objs {
		if err := env.Consumer.Create(ctx, o); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(enginetest.PollTimeout)
	for {
		cb := &kbindv1alpha1.ClusterBinding{}
		err := env.Consumer.Get(ctx, client.ObjectKey{Name: "widgets"}, cb)
		if err == nil && metaTrue(cb.Status.Conditions, kbindv1alpha1.ConditionSynced) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clusterbinding widgets not Synced: %v %+v", err, cb.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func metaTrue(conds []metav1.Condition, t kbindv1alpha1.ConditionType) bool {
	for _, c := range conds {
		if c.Type == string(t) {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
