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

import (
	"regexp"

	"golang.org/x/mod/semver"
)

// Tag is a git tag and the commit it points at.
type Tag struct {
	Name   string
	Commit string
}

// releaseTag is the v*.*.* form of a release tag: three numbers, an optional
// pre-release and build metadata.
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// PreviousRelease picks the baseline among the tags reachable from HEAD: the
// release tag (v*.*.*, a valid semantic version) with the highest version
// that does not point at head itself, so a release commit is compared with
// the release before it. ok is false when there is none; the gate then uses
// the commit named in hack/api-compat/baseline.
func PreviousRelease(tags []Tag, head string) (tag Tag, ok bool) {
	for _, t := range tags {
		if t.Commit == head || !releaseTag.MatchString(t.Name) || !semver.IsValid(t.Name) {
			continue
		}
		if !ok || semver.Compare(t.Name, tag.Name) > 0 {
			tag, ok = t, true
		}
	}
	return tag, ok
}
