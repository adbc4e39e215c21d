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
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// heldApplies makes the proxy reset every apply of the named Doubted
// objects while they are held, keeping the first body of each: for the
// konnector a write in doubt, which the test lands on the provider later,
// as a server that committed it after the connection went would.
type heldApplies struct {
	group  string // the Doubted API's
	mu     sync.Mutex
	held   map[string]bool
	bodies map[string][]byte
}

func (h *heldApplies) fault(r *http.Request) enginetest.Fault {
	if r.Method != http.MethodPatch || !strings.Contains(r.URL.Path, "/apis/"+h.group+"/") {
		return enginetest.Fault{}
	}
	name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held[name] {
		return enginetest.Fault{}
	}
	if _, ok := h.bodies[name]; !ok {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			h.bodies[name] = body
		}
	}
	return enginetest.Fault{Abort: true}
}

func (h *heldApplies) hold(name string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[name] = on
}

// waitHeld waits until the proxy has reset an apply of name.
func (h *heldApplies) waitHeld(t *testing.T, name string) []byte {
	t.Helper()
	var body []byte
	enginetest.Eventually(t, "an apply of "+name+" reset by the proxy", func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if body = h.bodies[name]; body == nil {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	return body
}

// land applies the first held body of name on the provider, as kbind's
// field manager: the write in doubt committed late.
func (h *heldApplies) land(t *testing.T, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(h.waitHeld(t, name), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Provider.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(kbindv1alpha1.FieldManager)); err != nil {
		t.Fatal(err)
	}
}

// SYNC-D, writes in doubt (docs/sync.md#writes-in-doubt): an apply whose
// connection was reset may still be committed by the provider after the
// konnector read the copy as absent and released the consumer object. The
// copy it creates has no owner left; the konnector deletes it, and an
// object created again under the same name syncs instead of reporting
// OwnedByAnother. Found by the fault suite's connections-reset scenario,
// which left such an orphan.
func TestLateWriteInDoubt(t *testing.T) {
	parallelEnv(t)
	ns := unique("doubted-a")
	ctx := context.Background()
	// The Doubted API's applies are held by the proxy.
	doubtedGVK, doubteds := namespacedAPI(t, "Doubted", "doubted.example.org")
	connection := unique("doubted")
	h := &heldApplies{group: doubtedGVK.Group, held: map[string]bool{}, bodies: map[string][]byte{}}
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	proxy.SetFault(h.fault)
	connectAs(t, connection, proxy.Kubeconfig(t))
	bindCluster(t, doubteds, connection, doubteds)

	t.Run("its object is gone", func(t *testing.T) {
		h.hold("d1", true)
		w := create(t, env.Consumer, object(doubtedGVK, ns, "d1", map[string]any{"size": int64(1)}))
		h.waitHeld(t, "d1")
		if err := env.Consumer.Delete(ctx, w); err != nil {
			t.Fatal(err)
		}
		// The provider has no copy: the finalizer goes, the object too.
		waitGone(t, env.Consumer, doubtedGVK, ns, "d1")
		h.land(t, "d1")
		waitGone(t, env.Provider, doubtedGVK, ns, "d1")
	})

	t.Run("its object is created again", func(t *testing.T) {
		h.hold("d2", true)
		w := create(t, env.Consumer, object(doubtedGVK, ns, "d2", map[string]any{"size": int64(1)}))
		old := w.GetUID()
		h.waitHeld(t, "d2")
		if err := env.Consumer.Delete(ctx, w); err != nil {
			t.Fatal(err)
		}
		waitGone(t, env.Consumer, doubtedGVK, ns, "d2")
		again := create(t, env.Consumer, object(doubtedGVK, ns, "d2", map[string]any{"size": int64(2)}))
		h.land(t, "d2")
		h.hold("d2", false)
		waitCopy(t, doubtedGVK, ns, "d2", func(u *unstructured.Unstructured) error {
			if got := u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation]; got != string(again.GetUID()) {
				return fmt.Errorf("the copy of object %s (the first was %s, the second is %s)", got, old, again.GetUID())
			}
			return nil
		})
	})
}
