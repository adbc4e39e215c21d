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

package session

import (
	"context"
	"testing"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/isolation"
)

// Start, once its context ends, stops everything the Manager runs for a
// live Connection — its session's cache, the exported-CRD watch, the
// heartbeat — and returns only after their goroutines have exited;
// nothing starts after it.
func TestStartStopsEverythingAndWaits(t *testing.T) {
	t.Parallel()
	cluster := SharedProvider.Get(t)
	m := NewManager(context.Background(), Options{Scheme: clientgoscheme.Scheme, QPS: 50, Burst: 100, Timeout: 10 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()

	s := RunningSession(ctx, t, m, cluster.Config)
	m.WatchExports(s, time.Minute)
	m.RunHeartbeat(s, heartbeat.For("p", "consumer-uid", "default"), time.Hour)
	select {
	case <-m.HealthChanges():
	case <-time.After(30 * time.Second):
		t.Fatal("the heartbeat did not report")
	}
	if h, _ := m.Health("p"); h.Heartbeat.Err != nil {
		t.Fatalf("heartbeat: %v", h.Heartbeat.Err)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	select {
	case <-s.stopped:
	default:
		t.Error("Start returned while the session's cache runs")
	}
	if !s.Stopped() {
		t.Error("the session was not stopped")
	}
	if m.goroutines.Go(func() {}) {
		t.Error("a goroutine started after Start returned")
	}
	// A session prepared after the Manager stopped is stopped from birth.
	late, _, err := m.Prepare("q", "hash", "", "", isolation.Mapping{}, cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !late.Stopped() {
		t.Error("a session prepared after Start returned is running")
	}
}
