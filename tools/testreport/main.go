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

// Command testreport reads the test2json stream `make test` keeps (the
// file gotestsum writes with --jsonfile, or `go test -json` output; several
// runs may be appended to one file) and prints each package's wall time,
// slowest first, with the number of its tests that passed, failed and were
// skipped — the per-package report gotestsum's `tool slowest` (which ranks
// single tests) does not give. With -names it prints every test instead,
// one line each with its outcome, for comparing two runs' test lists. With
// -failures it prints each failed test's own output (and a failed
// package's output outside its tests: a build error, a panic in TestMain),
// its first and last -lines lines when longer: the reason a test failed is
// usually in its first lines, while its cleanup dumps logs after them.
//
// A package's time is the Elapsed of its own pass or fail event: the wall
// time of its test binary. Packages run side by side (go test -p), so the
// times add up to more than the run took.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	names := flag.Bool("names", false, "print every test (and subtest) with its outcome, sorted, instead of the package table")
	failures := flag.Bool("failures", false, "print each failed test's output instead of the package table")
	lines := flag.Int("lines", 40, "with -failures: the first and last this many lines of a longer output")
	trim := flag.String("trim", "github.com/kbind/kbind/", "prefix removed from package import paths in the output")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: testreport [-names | -failures [-lines n]] [-trim prefix] file.json...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	r := newReport()
	for _, name := range flag.Args() {
		if err := readFile(r, name); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
	}
	switch {
	case *names:
		r.writeNames(os.Stdout, *trim)
	case *failures:
		r.writeFailures(os.Stdout, *trim, *lines)
	default:
		r.writeTable(os.Stdout, *trim)
	}
}

func readFile(r *report, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := r.read(f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// event is one line of the test2json stream.
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
	// A build's output (go test -json since Go 1.24) names the package
	// being built ("pkg [pkg.test]"), not Package; a package whose build
	// failed names it in FailedBuild.
	ImportPath string
}

// failure is a failed test (Test empty: the package) and its output.
type failure struct {
	pkg, test string
	elapsed   float64
	output    []string
}

// pkg is what the stream says about one package.
type pkg struct {
	name    string
	elapsed float64 // summed over runs
	runs    int     // package-level pass/fail/skip events
	failed  bool
	build   bool // failed to build
	// Top-level tests by outcome, and subtests (any outcome).
	pass, fail, skip, subtests, subFail int
}

type report struct {
	pkgs  map[string]*pkg
	tests map[string]string // "pkg\x00Test/sub" → last outcome
	// The output of each running test (and package), until it ends; the
	// failed ones, in the order they failed.
	output   map[string][]string
	failures []failure
}

func newReport() *report {
	return &report{pkgs: map[string]*pkg{}, tests: map[string]string{}, output: map[string][]string{}}
}

// read adds a stream's events; lines that are not JSON objects (a build
// error printed by an older go test) are skipped.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			continue
		}
		r.add(e)
	}
	return sc.Err()
}

func (r *report) pkg(name string) *pkg {
	p := r.pkgs[name]
	if p == nil {
		p = &pkg{name: name}
		r.pkgs[name] = p
	}
	return p
}

func (r *report) add(e event) {
	if e.Action == "build-output" && e.ImportPath != "" {
		key := "build\x00" + e.ImportPath
		r.output[key] = append(r.output[key], strings.TrimSuffix(e.Output, "\n"))
		return
	}
	if e.Package == "" {
		return
	}
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output", "build-output":
		r.output[key] = append(r.output[key], strings.TrimSuffix(e.Output, "\n"))
		return
	case "pass", "skip":
		delete(r.output, key)
	case "fail":
		out := r.output[key]
		if e.FailedBuild != "" {
			out = append(r.output["build\x00"+e.FailedBuild], out...)
		}
		r.failures = append(r.failures, failure{pkg: e.Package, test: e.Test, elapsed: e.Elapsed, output: out})
		delete(r.output, key)
	default:
		return
	}
	p := r.pkg(e.Package)
	if e.Test == "" {
		p.runs++
		p.elapsed += e.Elapsed
		if e.Action == "fail" {
			p.failed = true
			if e.FailedBuild != "" {
				p.build = true
			}
		}
		return
	}
	r.tests[key] = e.Action
	if strings.Contains(e.Test, "/") {
		p.subtests++
		if e.Action == "fail" {
			p.subFail++
		}
		return
	}
	switch e.Action {
	case "pass":
		p.pass++
	case "fail":
		p.fail++
	case "skip":
		p.skip++
	}
}

// sorted is the packages slowest first (by name among equals).
func (r *report) sorted() []*pkg {
	out := make([]*pkg, 0, len(r.pkgs))
	for _, p := range r.pkgs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].elapsed != out[j].elapsed {
			return out[i].elapsed > out[j].elapsed
		}
		return out[i].name < out[j].name
	})
	return out
}

func (p *pkg) status() string {
	switch {
	case p.build:
		return "BUILD FAILED"
	case p.failed:
		return "FAIL"
	case p.runs == 0:
		return "no result"
	case p.pass+p.fail+p.skip == 0:
		return "no tests"
	}
	return "ok"
}

func (r *report) writeTable(w io.Writer, trim string) {
	fmt.Fprintf(w, "%9s %5s %5s %5s %8s  %-12s %s\n", "WALL", "PASS", "FAIL", "SKIP", "SUBTESTS", "STATUS", "PACKAGE")
	var sum float64
	var pass, fail, skip, sub int
	for _, p := range r.sorted() {
		if p.runs == 0 && p.pass+p.fail+p.skip == 0 {
			continue // a package with no test files says nothing
		}
		name := strings.TrimPrefix(p.name, trim)
		if p.runs > 1 {
			name += fmt.Sprintf(" (%d runs)", p.runs)
		}
		fmt.Fprintf(w, "%8.1fs %5d %5d %5d %8d  %-12s %s\n", p.elapsed, p.pass, p.fail, p.skip, p.subtests, p.status(), name)
		sum += p.elapsed
		pass, fail, skip, sub = pass+p.pass, fail+p.fail, skip+p.skip, sub+p.subtests
	}
	fmt.Fprintf(w, "%8.1fs %5d %5d %5d %8d  (sum of the package times; packages run side by side)\n", sum, pass, fail, skip, sub)
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", pass, fail, skip)
}

func (r *report) writeNames(w io.Writer, trim string) {
	keys := make([]string, 0, len(r.tests))
	for k := range r.tests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pkgName, test, _ := strings.Cut(k, "\x00")
		fmt.Fprintf(w, "%s %s %s\n", r.tests[k], strings.TrimPrefix(pkgName, trim), test)
	}
}

// writeFailures prints each failure's output, its first and last n lines
// when it has more than 2n.
func (r *report) writeFailures(w io.Writer, trim string, n int) {
	if len(r.failures) == 0 {
		fmt.Fprintln(w, "no test failed")
		return
	}
	for _, f := range r.failures {
		name := strings.TrimPrefix(f.pkg, trim)
		if f.test != "" {
			name += " " + f.test
		} else {
			name += " (the package, outside its tests)"
		}
		fmt.Fprintf(w, "=== FAIL: %s (%.1fs), %d lines of output\n", name, f.elapsed, len(f.output))
		out := f.output
		if n >= 0 && len(out) > 2*n {
			for _, l := range out[:n] {
				fmt.Fprintln(w, l)
			}
			fmt.Fprintf(w, "    [... %d lines ...]\n", len(out)-2*n)
			out = out[len(out)-n:]
		}
		for _, l := range out {
			fmt.Fprintln(w, l)
		}
	}
}
