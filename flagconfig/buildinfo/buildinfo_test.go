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

package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResolve(t *testing.T) {
	cases := []struct {
		name                          string
		version, revision, goVer, vcs string
		want                          Info
	}{
		{"stamped", "0.1.0", "abc", "go1.26.8", "def", Info{"0.1.0", "abc", "go1.26.8"}},
		{"plain go build in a checkout", "", "", "go1.26.8", "def-dirty", Info{"dev", "def-dirty", "go1.26.8"}},
		{"nothing known", "", "", "go1.26.8", "", Info{"dev", "unknown", "go1.26.8"}},
		{"version only", "0.2.0", "", "go1.26.8", "", Info{"0.2.0", "unknown", "go1.26.8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := resolve(c.version, c.revision, c.goVer, c.vcs); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	if got, want := (Info{"0.1.0", "abc", "go1.26.8"}).String("konnector"), "konnector 0.1.0 (revision abc, go1.26.8)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector("konnector"))
	i := Get()
	want := `# HELP kbind_build_info The build of this kbind binary: always 1, the version, source revision and Go version in its labels.
# TYPE kbind_build_info gauge
kbind_build_info{binary="konnector",goversion="` + i.GoVersion + `",revision="` + i.Revision + `",version="` + i.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricName); err != nil {
		t.Error(err)
	}
}
