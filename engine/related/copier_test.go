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

package related

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// testCopier is a Copier whose consumer pool reads a fake clientset: the
// bookkeeping (sharing, reference counts, reported problems) is under
// test here, not the API server.
func testCopier(t *testing.T) (*Copier, *events.FakeRecorder, chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	recorder := events.NewFakeRecorder(16)
	triggered := make(chan string, 64)
	c := newCopier(ctx, Options{Events: recorder, SecretNamespaces: []string{"kbind"}, WatchesPerNamespace: 3, Trigger: func(conn string) { triggered <- conn }},
		fake.NewClientset())
	return c, recorder, triggered
}

func TestInformersAreSharedAndStopped(t *testing.T) {
	c, _, triggered := testCopier(t)
	secrets := key{resource: kbindv1alpha1.RelatedResourceSecrets, namespace: "team-a", labels: "app=db"}
	configmaps := key{resource: kbindv1alpha1.RelatedResourceConfigMaps, namespace: "team-a", labels: "app=db"}
	b1, b2 := Binding{UID: "b1", Connection: "one"}, Binding{UID: "b2", Connection: "two"}

	first, _ := c.use(b1, []ref{{c.consumer, secrets}, {c.consumer, configmaps}}, nil)
	second, _ := c.use(b2, []ref{{c.consumer, secrets}}, nil)
	shared := first[ref{c.consumer, secrets}]
	if second[ref{c.consumer, secrets}] != shared || len(c.consumer.informers) != 2 || len(shared.users) != 2 {
		t.Fatalf("one informer per key, shared: %d informers, %d users", len(c.consumer.informers), len(shared.users))
	}
	// Its first sync re-queues the bindings of both Connections.
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !seen["one"] || !seen["two"] {
		select {
		case conn := <-triggered:
			seen[conn] = true
		case <-deadline:
			t.Fatalf("triggers %v", seen)
		}
	}

	// b1 stops needing configmaps: that informer stops; secrets stays.
	unused := first[ref{c.consumer, configmaps}]
	c.use(b1, []ref{{c.consumer, secrets}}, nil)
	if _, ok := c.consumer.informers[configmaps]; ok || unused.ctx.Err() == nil {
		t.Error("an informer nobody uses still runs")
	}
	c.Forget(b1.UID)
	if shared.ctx.Err() != nil || len(shared.users) != 1 {
		t.Error("an informer another binding uses was stopped")
	}
	c.Forget(b2.UID)
	if shared.ctx.Err() == nil || len(c.consumer.informers) != 0 || len(c.held) != 0 {
		t.Errorf("state left after every binding was forgotten: %d informers, %d bindings held", len(c.consumer.informers), len(c.held))
	}
}

func TestProblemsAreReportedOnceAndForgotten(t *testing.T) {
	c, recorder, _ := testCopier(t)
	b := Binding{UID: "b", Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}}
	// Problems of entry e1; unread says e1's sources could not be read.
	run := func(unread bool, problems ...string) int {
		ps := &pass{b: b, problems: map[string]bool{}, unread: map[string]bool{"e1": unread}}
		for _, p := range problems {
			c.report(ps, "e1", p, nil, "RelatedConflict", "%s", p)
		}
		c.settle(ps)
		n := len(recorder.Events)
		for len(recorder.Events) > 0 {
			<-recorder.Events
		}
		return n
	}
	if n := run(false, "conflict/a"); n != 1 {
		t.Errorf("a new problem: %d Events", n)
	}
	if n := run(false, "conflict/a"); n != 0 {
		t.Errorf("a lasting problem: %d Events", n)
	}
	if n := run(true); n != 0 || !c.reported["b"]["e1/conflict/a"] {
		t.Error("a pass that could not read the entry forgot its problem")
	}
	if run(false); len(c.reported["b"]) != 0 {
		t.Errorf("a resolved problem is still remembered: %v", c.reported["b"])
	}
	if n := run(false, "conflict/a"); n != 1 {
		t.Errorf("a problem that came back: %d Events", n)
	}
	c.provided["b"] = providedCopies{names: []string{"secrets ns/a"}}
	c.Forget("b")
	if _, ok := c.reported["b"]; ok || len(c.provided) != 0 {
		t.Error("Forget left state behind")
	}
}

// The watch budget counts, per consumer namespace, the distinct source
// informers its bindings hold (the ClusterBindings are one namespace of
// their own); a binding over it holds nothing more, and is re-queued once
// its namespace frees watches.
func TestWatchBudgetPerNamespace(t *testing.T) {
	c, _, _ := testCopier(t) // budget 3
	src := func(ns, name string) ref {
		return ref{c.consumer, key{resource: kbindv1alpha1.RelatedResourceConfigMaps, namespace: ns, fields: "metadata.name=" + name}}
	}
	copies := []ref{{c.consumer, copiesKey(consumerSide, kbindv1alpha1.RelatedResourceConfigMaps, "team-a", "")}}
	a1 := Binding{UID: "a1", Namespace: "team-a", Connection: "one"}
	a2 := Binding{UID: "a2", Namespace: "team-a", Connection: "two"}
	b1 := Binding{UID: "b1", Namespace: "team-b", Connection: "one"}
	cb := Binding{UID: "cb", Connection: "one"}

	// a1 takes 2 of team-a's 3 watches; its copies' informer is not counted.
	if _, adm := c.use(a1, copies, [][]ref{{src("team-a", "x"), src("team-a", "y")}}); len(adm.over) != 0 || adm.used != 2 {
		t.Fatalf("a1: %+v", adm)
	}
	// a2 shares y (counted once), wants z (fits) and then two more (over).
	infs, adm := c.use(a2, nil, [][]ref{{src("team-a", "y"), src("team-a", "z")}, {src("team-a", "u"), src("team-a", "v")}})
	if !reflect.DeepEqual(adm.over, map[int]int{1: 2}) || adm.used != 3 {
		t.Fatalf("a2: %+v", adm)
	}
	if _, held := infs[src("team-a", "u")]; held || c.consumer.informers[src("team-a", "u").key] != nil {
		t.Error("an entry over the budget started an informer")
	}
	// Other namespaces, and the ClusterBindings, have budgets of their own.
	for _, b := range []Binding{b1, cb} {
		if _, adm := c.use(b, nil, [][]ref{{src(b.Namespace, "p"), src(b.Namespace, "q"), src(b.Namespace, "r")}}); len(adm.over) != 0 {
			t.Errorf("%s: %+v", b.UID, adm)
		}
	}
	// a binding's own watches are its own on the next pass: a1 keeps them.
	if _, adm := c.use(a1, copies, [][]ref{{src("team-a", "x"), src("team-a", "y")}}); len(adm.over) != 0 || adm.used != 3 {
		t.Fatalf("a1 again: %+v", adm)
	}
	// a1 goes: x is freed (y is a2's too), and the waiting a2 is re-queued.
	c.mu.Lock()
	wake := c.forgetLocked(a1.UID)
	c.mu.Unlock()
	if !reflect.DeepEqual(wake, []string{"two"}) {
		t.Errorf("re-queued %q, want a2's Connection", wake)
	}
	if _, adm := c.use(a2, nil, [][]ref{{src("team-a", "y"), src("team-a", "z")}, {src("team-a", "u")}}); len(adm.over) != 0 || adm.used != 3 {
		t.Errorf("a2 after a1 went: %+v", adm)
	}
	for _, b := range []Binding{a2, b1, cb} {
		c.Forget(b.UID)
	}
	if len(c.namespaces) != 0 || len(c.sources) != 0 || len(c.namespaceOf) != 0 || len(c.consumer.informers) != 0 {
		t.Errorf("state left: %v %v %v %d informers", c.namespaces, c.sources, c.namespaceOf, len(c.consumer.informers))
	}
}

// TestStartStopsInformers: when the manager stops the Copier (Start's
// context ends), Start returns only after its informers' goroutines have,
// and a pass racing the shutdown starts none: its informers read as
// stopped, never as listed.
func TestStartStopsInformers(t *testing.T) {
	c, _, _ := testCopier(t)
	secrets := key{resource: kbindv1alpha1.RelatedResourceSecrets, namespace: "team-a", labels: "app=db"}
	running, _ := c.use(Binding{UID: "b1", Connection: "one"}, []ref{{c.consumer, secrets}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if _, err := running[ref{c.consumer, secrets}].state(); !errors.Is(err, errStopped) {
		t.Errorf("a running informer after the stop: state %v, want errStopped", err)
	}
	configmaps := key{resource: kbindv1alpha1.RelatedResourceConfigMaps, namespace: "team-a", labels: "app=db"}
	late, _ := c.use(Binding{UID: "b2", Connection: "two"}, []ref{{c.consumer, configmaps}}, nil)
	if _, err := late[ref{c.consumer, configmaps}].state(); !errors.Is(err, errStopped) {
		t.Errorf("an informer started after the stop: state %v, want errStopped", err)
	}
	if c.goroutines.Go(func() {}) {
		t.Error("the stopped Copier still starts goroutines")
	}
}
