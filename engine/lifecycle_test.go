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

package engine_test

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// kbindCode marks a stack frame (or a goroutine's creator) in kbind's own
// code; testCode is the test harness's, which outlives the engine on
// purpose (the clusters keep running until the test ends).
const (
	kbindCode = "github.com/kbind/kbind/"
	testCode  = "github.com/kbind/kbind/engine/test/"
)

// TestShutdownLeavesNoGoroutine runs the engine with a Connection and a
// ClusterBinding that syncs an object and copies a related ConfigMap —
// syncers, their informers and Event forwarders, related informers,
// heartbeats, sessions and wake-ups all running — then stops its manager
// the way SIGTERM does in the konnector (ctrl.SetupSignalHandler cancels
// the context mgr.Start runs with), and waits until no goroutine runs
// kbind code any more: every long-running part ends with the manager.
func TestShutdownLeavesNoGoroutine(t *testing.T) {
	// envtest's default start timeout (20 s) is overrun on a loaded
	// machine: three minutes, unless the caller chose.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		t.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "3m")
	}
	env, stop, err := enginetest.Start(enginetest.Options{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx := context.Background()
	create := func(c client.Client, obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	create(env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
		Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}})
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
		Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"}}}
	create(env.Consumer, conn)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	create(env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"k": "v"}})
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}},
		RelatedResources: []kbindv1alpha1.RelatedResource{{Resource: kbindv1alpha1.RelatedResourceConfigMaps, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"settings"}}}},
	}}
	create(env.Consumer, cb)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("example.org/v1alpha1")
	widget.SetKind("Widget")
	widget.SetNamespace("default")
	widget.SetName("w1")
	widget.Object["spec"] = map[string]any{"color": "blue"}
	create(env.Consumer, widget)
	enginetest.Eventually(t, "the widget and the related ConfigMap on the provider", func() error {
		copied := &unstructured.Unstructured{}
		copied.SetGroupVersionKind(widget.GroupVersionKind())
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(widget), copied); err != nil {
			return err
		}
		return env.Provider.Get(ctx, client.ObjectKey{Namespace: "default", Name: "settings"}, &corev1.ConfigMap{})
	})

	// The check sees what runs: the syncer's workers and the related
	// informers are kbind goroutines now.
	running := strings.Join(kbindGoroutines(), "\n")
	for _, part := range []string{kbindCode + "engine/syncer.", kbindCode + "engine/related."} {
		if !strings.Contains(running, part) {
			t.Fatalf("no goroutine runs %s code while the engine syncs: the check would see nothing", part)
		}
	}

	// What SIGTERM does: cancel the manager's context, and wait for
	// mgr.Start to return.
	env.StopEngine()

	deadline := time.Now().Add(enginetest.PollTimeout)
	for {
		left := kbindGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutine(s) still run kbind code %s after the manager stopped:\n\n%s",
				len(left), enginetest.PollTimeout, strings.Join(left, "\n\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kbindGoroutines returns the stacks of the goroutines, other than the
// caller's, that run kbind code or were started by it, leaving out the
// test harness's own (engine/test/...).
func kbindGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// The caller's goroutine comes first.
	stacks := bytes.Split(buf, []byte("\n\n"))[1:]
	var out []string
	for _, stack := range stacks {
		if runsKbindCode(string(stack)) {
			out = append(out, string(stack))
		}
	}
	return out
}

// runsKbindCode reports whether a goroutine's stack has a frame, or a
// creator, in kbind's code outside the test harness.
func runsKbindCode(stack string) bool {
	for _, line := range strings.Split(stack, "\n") {
		if strings.Contains(line, kbindCode) && !strings.Contains(line, testCode) {
			return true
		}
	}
	return false
}
