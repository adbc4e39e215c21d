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

package heartbeat

import (
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	const interval = 30 * time.Second
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ago := func(d ...time.Duration) []time.Time {
		var out []time.Time
		for _, x := range d {
			out = append(out, now.Add(-x))
		}
		return out
	}
	w := DuplicateWindow(interval)
	for _, tc := range []struct {
		name      string
		sightings []time.Time
		want      Verdict
	}{
		{"none: one konnector", nil, Alone},
		{"one sighting just now: a failover's or an upgrade's last renewal", ago(time.Second), Suspect},
		{"one sighting a window ago is forgotten", ago(w), Alone},
		{"two live konnectors: a sighting at each renewal", ago(2*interval, interval), Duplicate},
		{"two sightings a window apart, the later just now", ago(w+time.Second, time.Second), Duplicate},
		{"two sightings more than a window apart: two failovers", ago(w+2*time.Second, time.Second), Suspect},
		{"a duplicate that stopped a window ago has cleared", ago(w+interval, w), Alone},
		{"a duplicate that stopped just under a window ago still holds", ago(w, w-time.Second), Duplicate},
		{"an old pair and a fresh single sighting", ago(3*w, 3*w-interval, time.Second), Suspect},
		{"an old single sighting and a fresh pair", ago(3*w, 2*interval, interval), Duplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(tc.sightings, now, interval); got != tc.want {
				t.Errorf("Judge(%v) = %s, want %s", tc.sightings, got, tc.want)
			}
		})
	}
}
