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

package main

import (
	"fmt"
	"regexp"
	"strings"
)

// changelogSection returns the section of CHANGELOG.md for version: the
// lines from its "## <version>" heading (anything may follow the version
// on that line, e.g. a date) to the next "## " heading. A development
// build (a pre-release starting with "dev") takes the "## Unreleased"
// section. A release without a section of its own is refused: what it
// changes must be written down before it ships.
func changelogSection(changelog, version string) (string, error) {
	heading := version
	if strings.Contains(version, "-dev") {
		heading = "Unreleased"
	}
	start := regexp.MustCompile(`(?m)^## \[?` + regexp.QuoteMeta(heading) + `\]?(\s|$)`)
	loc := start.FindStringIndex(changelog)
	if loc == nil {
		return "", fmt.Errorf("CHANGELOG.md has no section \"## %s\": write what %s changes before releasing it", heading, version)
	}
	rest := changelog[loc[0]:]
	if next := regexp.MustCompile(`(?m)^## `).FindAllStringIndex(rest, 2); len(next) == 2 {
		rest = rest[:next[1][0]]
	}
	return strings.TrimRight(rest, "\n") + "\n", nil
}
