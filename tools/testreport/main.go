// Command testreport reads the test2json stream `make test` keeps (the
// file gotestsum writes with --jsonfile, or `go test -json` output; several
// runs may be appended to one file) and prints each package's wall time,
// slowest first, with the number of its tests that passed, failed and were
// skipped — the per-package report gotestsum's `tool slowest` (which ranks
// single tests) does not give. With -names it prints every test instead,
// one line each with its outcome, for comparing two runs' test lists.
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
	trim := flag.String("trim", "github.com/kbind/kbind/", "prefix removed from package import paths in the output")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: testreport [-names] [-trim prefix] file.json...\n")
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
	if *names {
		r.writeNames(os.Stdout, *trim)
		return
	}
	r.writeTable(os.Stdout, *trim)
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
	FailedBuild string
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
}

func newReport() *report {
	return &report{pkgs: map[string]*pkg{}, tests: map[string]string{}}
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
	if e.Package == "" {
		return
	}
	switch e.Action {
	case "pass", "fail", "skip":
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
	r.tests[e.Package+"\x00"+e.Test] = e.Action
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
