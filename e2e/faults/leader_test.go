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

package faults

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
)

// leaseDuration and retryPeriod are controller-runtime's leader election
// defaults, which the konnector keeps. A standby counts the Lease duration
// from when it saw the leader's last renewal, and it looks every retry
// period stretched by a jitter of up to leaderelection.JitterFactor (1.2,
// i.e. up to 120 %: a look comes 2 to 4.4 s after the previous one). The
// standby sees the last renewal at most one look after the kill, and sees
// the Lease expired at most one look after it expired: takeoverBound after
// the kill, plus the acquiring write and the standby's own scheduling,
// which a busy machine delays: 5 s of slack (it was 1 s: 24.8 s, now
// 28.8 s; measured 14.7–18.7 s over five runs).
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	longestLook   = retryPeriod + time.Duration(leaderelection.JitterFactor*float64(retryPeriod))
	takeoverSlack = 5 * time.Second
	takeoverBound = leaseDuration + 2*longestLook + takeoverSlack
)

// leaderFailover runs two konnectors with leader election (the chart's HA
// setup) instead of the suite's one, kills the leader under load, and
// holds the standby to taking over within the Lease duration (and two
// looks, see takeoverBound); before
// that, the standby must not have sent a single request to the provider
// (no conflicting writes: it starts syncing only once it leads).
func leaderFailover() scenario {
	var a, b, original, standby *konnector
	return scenario{
		name: "leader-failover", objects: 200, ready: readyBound, converge: convergeBound,
		setup: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			original = e.konnector
			original.Stop(ctx)
			a = newKonnector(t, "konnector-a", e.pair.Consumer.KubeconfigPath, "--leader-elect")
			b = newKonnector(t, "konnector-b", e.pair.Consumer.KubeconfigPath, "--leader-elect")
			must(t, a.Start(ctx))
			must(t, b.Start(ctx))
			// The suite's konnector released the Lease when it stopped
			// (it ran without leader election: there was none), so one
			// of the two leads at once.
			e.konnector, standby = leaderOf(t, a, b, time.Minute)
			return func() {
				a.Stop(ctx)
				b.Stop(ctx)
				e.konnector = original
				must(t, original.Start(ctx))
			}
		},
		inject: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			sent, err := standby.metric("rest_client_requests_total", map[string]string{"host": e.proxy.Addr()})
			must(t, err)
			if sent != 0 {
				t.Errorf("the standby sent %v requests to the provider before it led; want none", sent)
			}
			killed := e.konnector
			must(t, killed.Kill(ctx))
			at := time.Now()
			return func() {
				// Polled past the bound (twice it), so that a late
				// takeover is measured before it is failed.
				err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*takeoverBound, true, func(context.Context) (bool, error) {
					return standby.leads(), nil
				})
				took := time.Since(at)
				if err != nil {
					t.Fatalf("the standby did not take over within %s", 2*takeoverBound)
				}
				t.Logf("the standby leads %s after the leader was killed", took.Round(100*time.Millisecond))
				if took > takeoverBound {
					t.Errorf("the standby took over %s after the kill, want within %s (the Lease duration %s, two looks of up to %s and %s of slack)", took, takeoverBound, leaseDuration, longestLook, takeoverSlack)
				}
				e.konnector, standby = standby, killed
				must(t, killed.Start(ctx)) // the new standby
			}
		},
	}
}

// leaderOf waits until exactly one of two konnectors leads and returns it
// first.
func leaderOf(t *testing.T, a, b *konnector, timeout time.Duration) (leader, standby *konnector) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		switch la, lb := a.leads(), b.leads(); {
		case la && lb:
			t.Fatalf("both konnectors lead")
		case la:
			leader, standby = a, b
		case lb:
			leader, standby = b, a
		}
		return leader != nil, nil
	})
	if err != nil {
		t.Fatalf("no konnector leads: %v", err)
	}
	return leader, standby
}
