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
