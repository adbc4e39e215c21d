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

// Package buildinfo owns what the build stamps into kbind's binaries: the
// release version and the source revision. `make build` and `make image`
// set them with -ldflags -X (see the Makefile); a plain `go build` leaves
// the version "dev" and takes the revision from Go's VCS stamp.
//
// The binaries print it for --version and export it as the
// kbind_build_info metric, so an operator can tell which build runs in a
// Pod without reading the image.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at build time with
// -ldflags "-X github.com/kbind/kbind/flagconfig/buildinfo.version=0.1.0
// -X github.com/kbind/kbind/flagconfig/buildinfo.revision=<commit>".
var (
	version  = ""
	revision = ""
)

// Info is one binary's build.
type Info struct {
	// Version is the release version (the charts' appVersion and the
	// image tag), "dev" when the build did not stamp one.
	Version string
	// Revision is the source commit, "unknown" when neither the build nor
	// Go's VCS stamp recorded one.
	Revision string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Get returns this binary's build.
func Get() Info {
	return resolve(version, revision, runtime.Version(), vcsRevision())
}

// resolve fills what the build did not stamp.
func resolve(version, revision, goVersion, vcs string) Info {
	if version == "" {
		version = "dev"
	}
	if revision == "" {
		revision = vcs
	}
	if revision == "" {
		revision = "unknown"
	}
	return Info{Version: version, Revision: revision, GoVersion: goVersion}
}

// vcsRevision is the commit Go stamped into the binary, if any.
func vcsRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" && modified {
		rev += "-dirty"
	}
	return rev
}

// String is the --version line: "<binary> <version> (revision <r>, <go>)".
func (i Info) String(binary string) string {
	return fmt.Sprintf("%s %s (revision %s, %s)", binary, i.Version, i.Revision, i.GoVersion)
}

// MetricName is the build-info gauge every kbind binary exports.
const MetricName = "kbind_build_info"

// Collector returns the kbind_build_info gauge of binary: always 1, the
// build in its labels (binary, version, revision, goversion).
func Collector(binary string) prometheus.Collector {
	i := Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricName,
		Help: "The build of this kbind binary: always 1, the version, source revision and Go version in its labels.",
		ConstLabels: prometheus.Labels{
			"binary":    binary,
			"version":   i.Version,
			"revision":  i.Revision,
			"goversion": i.GoVersion,
		},
	}, func() float64 { return 1 })
}
