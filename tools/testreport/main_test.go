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
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	for _, c := range []struct {
		name, stream string
		table, names string
		failures     string // -lines 2
	}{{
		name: "passes, a failure, a skip and subtests; slowest package first",
		stream: `{"Action":"start","Package":"github.com/kbind/kbind/engine/a"}
{"Action":"run","Package":"github.com/kbind/kbind/engine/a","Test":"TestX"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX","Output":"=== RUN   TestX\n"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/two","Output":"    x_test.go:9: the reason\n"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/two","Output":"line 2\n"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/two","Output":"line 3\n"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/two","Output":"line 4\n"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/two","Output":"    --- FAIL: TestX/two (0.10s)\n"}
{"Action":"output","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/one","Output":"passing output is not shown\n"}
{"Action":"pass","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/one","Elapsed":0.1}
{"Action":"fail","Package":"github.com/kbind/kbind/engine/a","Test":"TestX/two","Elapsed":0.1}
{"Action":"fail","Package":"github.com/kbind/kbind/engine/a","Test":"TestX","Elapsed":0.3}
{"Action":"skip","Package":"github.com/kbind/kbind/engine/a","Test":"TestY","Elapsed":0}
{"Action":"fail","Package":"github.com/kbind/kbind/engine/a","Elapsed":2.5}
{"Action":"pass","Package":"github.com/kbind/kbind/cli/b","Test":"TestZ","Elapsed":1}
{"Action":"pass","Package":"github.com/kbind/kbind/cli/b","Elapsed":12.25}
`,
		table: `     WALL  PASS  FAIL  SKIP SUBTESTS  STATUS       PACKAGE
    12.2s     1     0     0        0  ok           cli/b
     2.5s     0     1     1        2  FAIL         engine/a
    14.8s     1     1     1        2  (sum of the package times; packages run side by side)
tests: 1 passed, 1 failed, 1 skipped
`,
		names: `pass cli/b TestZ
fail engine/a TestX
pass engine/a TestX/one
fail engine/a TestX/two
skip engine/a TestY
`,
		failures: `=== FAIL: engine/a TestX/two (0.1s), 5 lines of output
    x_test.go:9: the reason
line 2
    [... 1 lines ...]
line 4
    --- FAIL: TestX/two (0.10s)
=== FAIL: engine/a TestX (0.3s), 1 lines of output
=== RUN   TestX
=== FAIL: engine/a (the package, outside its tests) (2.5s), 0 lines of output
`,
	}, {
		name: "appended runs add up; a build failure; a package without tests; non-JSON lines skipped",
		stream: `# github.com/kbind/kbind/engine/c
engine/c/c.go:3:1: syntax error
{"ImportPath":"github.com/kbind/kbind/engine/c [github.com/kbind/kbind/engine/c.test]","Action":"build-output","Output":"engine/c/c.go:3:1: syntax error\n"}
{"ImportPath":"github.com/kbind/kbind/engine/c [github.com/kbind/kbind/engine/c.test]","Action":"build-fail"}
{"Action":"pass","Package":"github.com/kbind/kbind/engine/a","Test":"TestX","Elapsed":1}
{"Action":"pass","Package":"github.com/kbind/kbind/engine/a","Elapsed":3}
{"Action":"fail","Package":"github.com/kbind/kbind/engine/c","Elapsed":0,"FailedBuild":"github.com/kbind/kbind/engine/c [github.com/kbind/kbind/engine/c.test]"}
{"Action":"skip","Package":"github.com/kbind/kbind/engine/d","Elapsed":0}
{"Action":"output","Package":"github.com/kbind/kbind/engine/e","Output":"?   \tengine/e\t[no test files]\n"}
{"Action":"pass","Package":"github.com/kbind/kbind/engine/a","Test":"TestX","Elapsed":1}
{"Action":"pass","Package":"github.com/kbind/kbind/engine/a","Elapsed":4}
`,
		table: `     WALL  PASS  FAIL  SKIP SUBTESTS  STATUS       PACKAGE
     7.0s     2     0     0        0  ok           engine/a (2 runs)
     0.0s     0     0     0        0  BUILD FAILED engine/c
     0.0s     0     0     0        0  no tests     engine/d
     7.0s     2     0     0        0  (sum of the package times; packages run side by side)
tests: 2 passed, 0 failed, 0 skipped
`,
		names: "pass engine/a TestX\n",
		failures: `=== FAIL: engine/c (the package, outside its tests) (0.0s), 1 lines of output
engine/c/c.go:3:1: syntax error
`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			r := newReport()
			if err := r.read(strings.NewReader(c.stream)); err != nil {
				t.Fatal(err)
			}
			var table, names, failures strings.Builder
			r.writeTable(&table, "github.com/kbind/kbind/")
			r.writeNames(&names, "github.com/kbind/kbind/")
			r.writeFailures(&failures, "github.com/kbind/kbind/", 2)
			if failures.String() != c.failures {
				t.Errorf("failures:\n%s\nwant:\n%s", failures.String(), c.failures)
			}
			if table.String() != c.table {
				t.Errorf("table:\n%s\nwant:\n%s", table.String(), c.table)
			}
			if names.String() != c.names {
				t.Errorf("names:\n%s\nwant:\n%s", names.String(), c.names)
			}
		})
	}
}

func TestReportNoFailures(t *testing.T) {
	r := newReport()
	if err := r.read(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r.writeFailures(&out, "", 40)
	if out.String() != "no test failed\n" {
		t.Errorf("failures of a passing run: %q", out.String())
	}
}
