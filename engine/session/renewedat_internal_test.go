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
	"errors"
	"testing"
	"time"
)

func TestRenewedAt(t *testing.T) {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	renewed := start.Add(time.Minute)
	refused := errors.New(`leases.coordination.k8s.io "x" is forbidden`)
	for _, tc := range []struct {
		name   string
		h      Heartbeat
		want   time.Time
		wantOK bool
	}{
		{"not running", Heartbeat{LastRenewal: renewed}, time.Time{}, false},
		{"no result yet", Heartbeat{Running: true, Started: start}, time.Time{}, false},
		{"renewed", Heartbeat{Running: true, Started: start, Known: true, LastRenewal: renewed}, renewed, true},
		{"renewed, then refused: the last renewal", Heartbeat{Running: true, Started: start, Known: true, Err: refused, LastRenewal: renewed}, renewed, true},
		{"refused from the start: its start, so the alert fires", Heartbeat{Running: true, Started: start, Known: true, Err: refused}, start, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.h.renewedAt()
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("renewedAt = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
