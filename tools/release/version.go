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

// semver is MAJOR.MINOR.PATCH with an optional pre-release and build
// metadata (semver.org), the form every kbind version takes.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// checkVersion refuses a version that is not semver, and one that
// disagrees with the tag HEAD carries (tags are "v" + version); an
// untagged commit may be released under any version.
func checkVersion(version, tag string) error {
	if !semver.MatchString(version) {
		return fmt.Errorf("version %q is not MAJOR.MINOR.PATCH[-pre][+build] (give VERSION=x.y.z without a leading v)", version)
	}
	if tag != "" && tag != "v"+version {
		return fmt.Errorf("HEAD is tagged %s but the release is %s: release the tag's version (VERSION=%s) or tag the commit v%s",
			tag, version, strings.TrimPrefix(tag, "v"), version)
	}
	return nil
}

// imageTag is the version as an image tag: a tag may not hold "+", so
// build metadata is joined with "_" (0.0.0-dev+1a2b3c4 → 0.0.0-dev_1a2b3c4),
// as Helm does for OCI chart tags. Released versions have no build
// metadata, and their tag is the version.
func imageTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// stamped is what one artifact says its version is.
type stamped struct {
	artifact string // e.g. "chart konnector version", "binary konnector"
	version  string
}

// consistent checks that every artifact carries want (the tag check
// happens before anything is built, in checkVersion; this one runs on the
// results, so a Makefile or chart that stamps something else is caught).
func consistent(want string, found []stamped) error {
	var bad []string
	for _, s := range found {
		if s.version != want {
			bad = append(bad, fmt.Sprintf("%s says %q", s.artifact, s.version))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("release %s is inconsistent: %s", want, strings.Join(bad, "; "))
	}
	return nil
}

// untag is imageTag's inverse for the versions kbind releases (their
// pre-release and build parts never hold "_").
func untag(tag string) string { return strings.Replace(tag, "_", "+", 1) }
