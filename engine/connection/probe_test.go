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

package connection

import (
	"errors"
	"testing"
	"time"

	"github.com/kbind/kbind/engine/session"
)

func TestIdentityDue(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	recheck := 10 * time.Minute
	read := session.Probe{Hash: "h", At: t0}
	for _, tc := range []struct {
		name      string
		p         session.Probe
		hash      string
		recheckAt time.Time
		now       time.Time
		want      bool
	}{
		{"never read", session.Probe{}, "h", time.Time{}, t0, true},
		{"read with this kubeconfig, recently", read, "h", time.Time{}, t0.Add(time.Minute), false},
		{"read with another kubeconfig", read, "h2", time.Time{}, t0.Add(time.Minute), true},
		{"the last read failed", session.Probe{Hash: "h", At: t0, IdentityErr: errors.New("refused")}, "h", time.Time{}, t0.Add(time.Second), true},
		{"the recheck interval passed", read, "h", time.Time{}, t0.Add(recheck), true},
		{"the heartbeat asked since", read, "h", t0.Add(time.Second), t0.Add(time.Minute), true},
		{"the heartbeat asked before the read", read, "h", t0.Add(-time.Second), t0.Add(time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := identityDue(tc.p, tc.hash, tc.recheckAt, tc.now, recheck); got != tc.want {
				t.Errorf("identityDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDiscoveryDue(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	interval := 5 * time.Minute
	discovered := session.Probe{DiscoveredAt: t0}
	for _, tc := range []struct {
		name      string
		p         session.Probe
		changedAt time.Time
		now       time.Time
		want      bool
	}{
		{"never discovered", session.Probe{}, time.Time{}, t0, true},
		{"discovered recently", discovered, time.Time{}, t0.Add(time.Minute), false},
		{"the interval passed", discovered, time.Time{}, t0.Add(interval), true},
		{"the last pass failed", session.Probe{DiscoveredAt: t0, DiscoveryErr: errors.New("x")}, time.Time{}, t0.Add(time.Second), true},
		{"an export changed since", discovered, t0.Add(time.Second), t0.Add(time.Minute), true},
		{"an export changed before the pass", discovered, t0.Add(-time.Second), t0.Add(time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := discoveryDue(tc.p, tc.changedAt, tc.now, interval); got != tc.want {
				t.Errorf("discoveryDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		f    [2]float64
		r    float64
		want time.Duration
	}{
		{"retry, earliest", 8 * time.Second, retrySpread, 0, 6 * time.Second},
		{"retry, latest is never past the cap", MaxProbeBackoff, retrySpread, 0.9999999, MaxProbeBackoff},
		{"discovery, earliest is never early", 5 * time.Minute, discoverySpread, 0, 5 * time.Minute},
		{"discovery, latest", 5 * time.Minute, discoverySpread, 0.9999999, 6 * time.Minute},
		{"zero stays zero", 0, retrySpread, 0.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := spread(tc.d, tc.f, tc.r)
			if diff := got - tc.want; diff < -time.Millisecond || diff > time.Millisecond {
				t.Errorf("spread(%v, %v, %v) = %v, want %v", tc.d, tc.f, tc.r, got, tc.want)
			}
		})
	}
}
