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

import "time"

// Clone detection (HB-2, docs/troubleshooting.md#duplicate-consumer). A consumer
// cluster restored from an etcd snapshot of another (a disaster-recovery
// drill, a staging clone) keeps its identity (CONN-3), its object UIDs and
// its kubeconfig Secret: its konnector renews the same Lease and takes the
// provider copies for its own. Each konnector process writes its nonce on
// the Lease (Lease.Nonce); a renewal that finds another nonce there, after
// its own write, is a sighting (Renewer.Foreign). A restart, a leader
// failover or an upgrade gives at most one sighting (the predecessor's
// last renewal, landing late); two live konnectors give one at nearly
// every renewal, on both sides.

// Verdict is what the sightings of other konnectors' renewals on one
// Lease say about the consumers renewing it.
type Verdict int

const (
	// Alone is no sighting within the window; deletion goes on.
	Alone Verdict = iota
	// Suspect is one sighting within the window — a predecessor's last
	// renewal (a failover, an upgrade) or the start of a duplicate. Not
	// reported as a condition; provider deletes wait until the window has
	// passed without another.
	Suspect
	// Duplicate is two sightings within a window of each other, the later
	// within the window of now: two live konnectors with one consumer
	// identity. Both report DuplicateConsumer, sync pauses and no provider
	// copy is deleted, until the window passes without a sighting.
	Duplicate
)

func (v Verdict) String() string {
	switch v {
	case Alone:
		return "Alone"
	case Suspect:
		return "Suspect"
	default:
		return "Duplicate"
	}
}

// DuplicatePeriods is the window, in heartbeat intervals, within which two
// sightings mean a duplicate, and that must pass without one before it
// clears.
const DuplicatePeriods = 4

// DuplicateWindow is DuplicatePeriods heartbeat intervals (2 minutes at
// the default 30 s).
func DuplicateWindow(interval time.Duration) time.Duration { return DuplicatePeriods * interval }

// Judge decides, from the times of the sightings on one Lease (ascending;
// the last two decide) and the heartbeat interval, what they say at now: Duplicate when two
// sightings lie within DuplicateWindow of each other and the later one
// within DuplicateWindow of now; Suspect when a single one lies within
// DuplicateWindow of now; Alone otherwise.
func Judge(sightings []time.Time, now time.Time, interval time.Duration) Verdict {
	w := DuplicateWindow(interval)
	v := Alone
	for i, s := range sightings {
		if now.Sub(s) >= w {
			continue
		}
		if i > 0 && s.Sub(sightings[i-1]) <= w {
			return Duplicate
		}
		v = Suspect
	}
	return v
}
