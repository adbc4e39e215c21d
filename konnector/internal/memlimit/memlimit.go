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

// Package memlimit gives the Go runtime a soft memory limit below the
// container's: with a limit the garbage collector works harder as the heap
// nears it instead of letting it grow to twice the live size, so a
// konnector whose synced objects fit in its memory limit is not killed for
// garbage it had not collected yet (docs/bench.md#memory).
package memlimit

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Fraction of the container's memory limit given to the Go runtime; the
// rest is for what the runtime does not count (stacks of cgo, the binary,
// page cache charged to the container).
const Fraction = 0.9

// cgroup files holding the container's memory limit: v2, then v1.
var files = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// noLimit: cgroup v1 reports "no limit" as a huge number (a page-aligned
// maximum int64); anything above this is treated as none.
const noLimit = 1 << 60

// FromCgroup parses a cgroup memory limit file's content: the limit in
// bytes, 0 when there is none ("max", empty, unparsable, or v1's huge
// value).
func FromCgroup(content string) int64 {
	v := strings.TrimSpace(content)
	if v == "" || v == "max" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n >= noLimit {
		return 0
	}
	return n
}

// Apply sets the runtime's soft memory limit to Fraction of the
// container's memory limit, unless GOMEMLIMIT is set (the operator's
// choice wins) or there is no limit. It returns the limit set, 0 when it
// set none.
func Apply() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if limit := FromCgroup(string(data)); limit > 0 {
			soft := int64(float64(limit) * Fraction)
			debug.SetMemoryLimit(soft)
			return soft
		}
		return 0
	}
	return 0
}
