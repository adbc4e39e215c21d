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
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// A provider API server answers writes 403 "not yet ready to handle
// request" while its admission loads its policies and webhooks (right
// after it starts; grant makes one ValidatingAdmissionPolicy per consumer).
// That is no permission refusal: the write is retried, and neither the
// object (a ProviderRejected Event) nor the binding (PermissionDenied, a
// refused verb) says it was refused. Seen by the thousand-consumer restart
// herd (docs/bench.md).
func TestAdmissionWarmingUpIsNoRefusal(t *testing.T) {
	parallelEnv(t)
	ns := unique("warming-a")
	ctx := context.Background()
	warmingGVK, warmings := namespacedAPI(t, "Warming", "warming.example.org")
	connection := unique("warming")
	var warming atomic.Bool
	var answered atomic.Int32
	warming.Store(true)
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if !warming.Load() || r.Method != http.MethodPatch || !strings.Contains(r.URL.Path, "/apis/"+warmingGVK.Group+"/") {
			return enginetest.Fault{}
		}
		answered.Add(1)
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		return enginetest.Fault{Reply: &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: fmt.Sprintf("%s %q is forbidden: not yet ready to handle request", warmings, name),
			Details: &metav1.StatusDetails{Name: name, Group: warmingGVK.Group, Kind: "warmings"}}}
	})
	connectAs(t, connection, proxy.Kubeconfig(t))
	cb := bindCluster(t, warmings, connection, warmings)

	w := create(t, env.Consumer, object(warmingGVK, ns, "w1", map[string]any{"size": int64(1)}))
	enginetest.Eventually(t, "three applies answered 403 not yet ready", func() error {
		if n := answered.Load(); n < 3 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	noRefusal := func() {
		t.Helper()
		for _, e := range consumerEvents(t, w) {
			if e.Reason == "ProviderRejected" {
				t.Errorf("a warming-up API server reported as a refusal: Event %s %q", e.Reason, e.Message)
			}
		}
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionPermissionDenied)); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("a warming-up API server reported as a refusal: PermissionDenied %q", c.Message)
		}
	}
	noRefusal()
	warming.Store(false)
	waitCopy(t, warmingGVK, ns, "w1", nil)
	noRefusal()
}
