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

package scale

import (
	"maps"
	"testing"
)

func TestParseSample(t *testing.T) {
	t.Parallel() // pure
	for _, tc := range []struct {
		line   string
		name   string
		labels map[string]string
		value  float64
		ok     bool
	}{
		{`etcd_debugging_mvcc_keys_total 1234`, "etcd_debugging_mvcc_keys_total", nil, 1234, true},
		{`apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",verb="WATCH"} 3`,
			"apiserver_longrunning_requests", map[string]string{"component": "apiserver", "group": "", "resource": "pods", "scope": "cluster", "verb": "WATCH"}, 3, true},
		{`x{path="a\"b,c"} 1.5e+06`, "x", map[string]string{"path": `a"b,c`}, 1.5e6, true},
		{`x{a="1"} NaN-not`, "", nil, 0, false},
		{`x{a=1} 2`, "", nil, 0, false},
	} {
		name, labels, v, ok := parseSample(tc.line)
		if ok != tc.ok || name != tc.name || v != tc.value || !maps.Equal(labels, tc.labels) {
			t.Errorf("parseSample(%q) = %q %v %v %v, want %q %v %v %v", tc.line, name, labels, v, ok, tc.name, tc.labels, tc.value, tc.ok)
		}
	}
}
