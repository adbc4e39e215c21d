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

package memlimit

import "testing"

func TestFromCgroup(t *testing.T) {
	for content, want := range map[string]int64{
		"536870912\n":           536870912, // v2 or v1: 512Mi
		"max\n":                 0,         // v2: none
		"9223372036854771712\n": 0,         // v1: none
		"":                      0,
		"garbage":               0,
		"-1":                    0,
	} {
		if got := FromCgroup(content); got != want {
			t.Errorf("FromCgroup(%q) = %d, want %d", content, got, want)
		}
	}
}
