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

package binding_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// Objects deleted the moment they are created (the fault suite's load
// does that): the API server may remove such an object with the finalizer
// kbind just added on it, when its DELETE raced that write
// (kubernetes/kubernetes#77988), and kbind's apply right after left a
// provider copy nothing owned — about one in fifteen here before kbind
// looked for it. No copy is left.
func TestObjectsDeletedAsTheyAreCreatedLeaveNoCopy(t *testing.T) {
	setup(t)
	s := newScenario()
	api := s.api("relabels")
	p := startProvider(t, "vanish", s, nil, sized(s.group, "relabels", "Relabel", "integer", ""))
	ns := s.ns("vanish")
	makeNamespace(t, ns, map[string]string{"rl": "vanish"})
	cb := relabelBinding(t, api, s.ns("relabels-vanish"), p.conn.Name, "vanish")
	defer deleteBindings(t, cb)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	ctx := context.Background()
	const objects = 150
	for i := range objects {
		obj := namespacedObject(s.version(), "Relabel", ns, fmt.Sprintf("v-%d", i))
		if err := env.Consumer.Create(ctx, obj.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if err := client.IgnoreNotFound(env.Consumer.Delete(ctx, obj.DeepCopy())); err != nil {
			t.Fatal(err)
		}
	}
	// A sentinel created after them is synced after them (its namespace's
	// queue is first in, first out): once its copy is there, every copy
	// the objects above left has been applied.
	start := time.Now()
	sentinel := namespacedObject(s.version(), "Relabel", ns, "sentinel")
	create(t, sentinel)
	enginetest.Eventually(t, "the sentinel's copy", func() error {
		if !slices.Contains(p.copies(t, "Relabel"), ns+"/sentinel") {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
	p.waitCopies(t, "Relabel", ns+"/sentinel")
	t.Logf("%d objects created and deleted at once: no copy of theirs left %s after the last delete", objects, time.Since(start).Round(100*time.Millisecond))
	if err := env.Consumer.Delete(ctx, sentinel); err != nil {
		t.Fatal(err)
	}
	p.waitCopies(t, "Relabel")
}
