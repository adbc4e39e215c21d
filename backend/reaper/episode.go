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

package reaper

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Seen is what a pass left of one copy (or related copy): whether it
// carried a mark once the pass had marked, and whether it was being
// deleted.
type Seen struct {
	Key         string
	Marked      bool
	Terminating bool
}

// Episode is what the passes of one stale episode of a consumer saw of its
// copies (issue #52). A live konnector shows itself through its copies in
// more ways than a mark cleared within one pass: between two passes it
// clears marks, deletes marked copies (their consumer objects were
// deleted) and creates new ones. Once a pass saw any of that, nothing of
// the consumer is deleted — no copy, namespace nor Lease — until a whole
// grace period passes without another sign. It only ever delays: a
// restarted backend, or the first pass of an episode, has seen nothing
// and decides from the cluster alone, as before.
type Episode struct {
	// Copies is what the last pass left, by UID; nil before the first.
	Copies map[types.UID]Seen
	// Deleted are the copies this episode's passes deleted themselves.
	Deleted map[types.UID]bool
	// LastSign is when a pass last saw a sign of a live konnector (zero:
	// never), and Sign what it was.
	LastSign time.Time
	Sign     string
}

// Signs compares the copies a pass listed, as listed (before it marks),
// with what the previous pass left (prev; nil: none, so no sign) and says
// what shows a live konnector: a mark cleared, a copy gone or being
// deleted by someone else (not in deleted), a new copy. It returns the
// first sign found, "" for none.
func Signs(prev map[types.UID]Seen, listed []Object, deleted map[types.UID]bool) string {
	if prev == nil {
		return ""
	}
	now := map[types.UID]bool{}
	for _, o := range listed {
		now[o.UID] = true
		p, ok := prev[o.UID]
		switch {
		case !ok && !o.Terminating:
			return "a new copy " + o.String()
		case !ok:
			continue
		case p.Marked && !p.Terminating && !o.Terminating && o.MarkedAt == "":
			return "the mark of " + o.String() + " cleared"
		case !p.Terminating && o.Terminating && !deleted[o.UID]:
			return o.String() + " deleted by someone else"
		}
	}
	for uid, p := range prev {
		if !now[uid] && !p.Terminating && !deleted[uid] {
			return p.Key + " deleted by someone else"
		}
	}
	return ""
}

// Quiet reports whether a whole grace period passed since the last sign
// of a live konnector (none: quiet).
func Quiet(lastSign, now time.Time, grace time.Duration) bool {
	return lastSign.IsZero() || now.Sub(lastSign) >= grace
}
