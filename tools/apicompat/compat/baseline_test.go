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

package compat

import "testing"

func TestPreviousRelease(t *testing.T) {
	const head = "cccc"
	cases := []struct {
		name string
		tags []Tag
		want string // "" for none
	}{
		{name: "no tags: the baseline file decides"},
		{name: "tags that are not releases are ignored", tags: []Tag{{"latest", "aaaa"}, {"v1.2", "aaaa"}, {"release-1.0.0", "aaaa"}, {"v1.0.0.1", "aaaa"}}},
		{name: "the one release", tags: []Tag{{"v0.1.0", "aaaa"}}, want: "v0.1.0"},
		{name: "HEAD's own tag is not its baseline", tags: []Tag{{"v0.1.0", "aaaa"}, {"v0.2.0", head}}, want: "v0.1.0"},
		{name: "only HEAD is tagged", tags: []Tag{{"v0.1.0", head}}},
		{name: "the highest version, not the first listed", tags: []Tag{{"v0.10.0", "bbbb"}, {"v0.9.0", "aaaa"}, {"v0.2.1", "aaaa"}}, want: "v0.10.0"},
		{name: "a release outranks its pre-release", tags: []Tag{{"v0.3.0", "bbbb"}, {"v0.3.0-rc.1", "aaaa"}}, want: "v0.3.0"},
		{name: "a pre-release is a release", tags: []Tag{{"v0.2.0", "aaaa"}, {"v0.3.0-rc.1", "bbbb"}}, want: "v0.3.0-rc.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PreviousRelease(tc.tags, head)
			if (tc.want == "") == ok || got.Name != tc.want {
				t.Errorf("PreviousRelease = %q, %v; want %q", got.Name, ok, tc.want)
			}
		})
	}
}
