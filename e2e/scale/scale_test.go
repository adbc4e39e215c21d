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

package scale

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kbind/kbind/e2e/harness"
)

var konnectorBin, pluginBin string

func TestMain(m *testing.M) {
	harness.RunWithTaggedBinaries(m, map[*string]harness.Binary{
		&konnectorBin: {Pkg: "github.com/kbind/kbind/konnector/cmd/konnector", Tags: "kbindbench"},
		&pluginBin:    {Pkg: "github.com/kbind/kbind/cli/cmd/kubectl-kbind"},
	})
}

// TestCostPerConsumerDoesNotDependOnN: what one consumer costs the
// provider — its open watches, and the watch events one change to its
// object sends — is the same with 2 consumers as with 4, two of which
// (consumer 0 and 2, on two consumer clusters) bind the same API. A
// consumer that watched its API cluster-wide (kube-bind's informerScope:
// Cluster) would receive consumer 0's change too: 2 events instead of 1,
// and an O(N²) provider.
func TestCostPerConsumerDoesNotDependOnN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := Start(Options{Dir: t.TempDir(), PerCluster: 2, Objects: 1, Konnector: konnectorBin, Plugin: pluginBin, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	base, err := env.Base(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	type cost struct {
		watches float64
		events  float64
	}
	measure := func(n int, round string) cost {
		t.Helper()
		if err := env.Grow(ctx, n); err != nil {
			t.Fatal(err)
		}
		var c cost
		// Watches settle once every informer has synced: poll until
		// two samples a second apart agree.
		last := -1.0
		if err := poll(ctx, time.Minute, func() (bool, error) {
			s, err := env.Sample(ctx)
			if err != nil {
				return false, err
			}
			c.watches = (s.Watches - base.Watches) / float64(n)
			same := s.Watches == last
			last = s.Watches
			return same, nil
		}); err != nil {
			t.Fatalf("N=%d: open watches did not settle: %v", n, err)
		}
		c.events = eventsOfOneChange(ctx, t, env, round)
		t.Logf("N=%d: %.2f open watches per consumer, %.0f watch events for one change of consumer 0's object", n, c.watches, c.events)
		return c
	}
	two := measure(2, "2")
	four := measure(4, "4")
	if two.watches != four.watches || two.watches <= 0 {
		t.Errorf("open watches per consumer: %.2f with 2 consumers, %.2f with 4: they must be the same, and more than 0", two.watches, four.watches)
	}
	if two.events != four.events || two.events < 1 {
		t.Errorf("watch events for one change of consumer 0's object: %.0f with 2 consumers, %.0f with 4: they must be the same (another consumer of the same API must not see it)", two.events, four.events)
	}
}

// eventsOfOneChange writes the status of consumer 0's provider object,
// as the provider's controller would, waits until the status is down on
// the consumer, and returns how many watch events of that API the
// provider API server sent meanwhile.
func eventsOfOneChange(ctx context.Context, t *testing.T, env *Env, round string) float64 {
	t.Helper()
	api := API(0)
	before, err := env.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, err := env.provider.dyn.Resource(api).Namespace("kbind-"+Consumer(0)).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("consumer 0's provider objects: %v (%d)", err, len(list.Items))
	}
	obj := list.Items[0]
	name := obj.GetName()
	_ = unstructured.SetNestedField(obj.Object, round, "status", "round")
	if _, err := env.provider.dyn.Resource(api).Namespace(obj.GetNamespace()).UpdateStatus(ctx, &obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	consumer := env.clusters[0].clients.dyn.Resource(api).Namespace(WorkNamespace)
	if err := poll(ctx, time.Minute, func() (bool, error) {
		u, err := consumer.Get(ctx, "obj-0", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // poll again
		}
		got, _, _ := unstructured.NestedString(u.Object, "status", "round")
		return got == round, nil
	}); err != nil {
		t.Fatalf("the status of provider object %s did not come down to work/obj-0: %v", name, err)
	}
	after, err := env.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return after.APIEvents[api.Resource] - before.APIEvents[api.Resource]
}
