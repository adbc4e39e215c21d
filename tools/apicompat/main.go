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

// Command apicompat is the api module's compatibility gate (make api-compat,
// run by make verify): it compares the exported Go API of every package of
// the api module and the openAPIV3Schema of every served CRD version at the
// baseline with the working tree, and fails on a breaking change that
// hack/api-compat/exceptions.yaml does not accept, or on an exception that
// matches nothing. See docs/versioning.md, "The compatibility gate".
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kbind/kbind/tools/apicompat/compat"
)

// options are the tool's flags; the paths are relative to the repository.
type options struct {
	repo       string
	module     string
	baseline   string
	exceptions string
}

func main() {
	var o options
	flag.StringVar(&o.repo, "C", ".", "a directory inside the git repository")
	flag.StringVar(&o.module, "module", "api", "the module's directory in the repository")
	flag.StringVar(&o.baseline, "baseline", "hack/api-compat/baseline", "the file naming the baseline commit while no release tag v*.*.* is reachable from HEAD")
	flag.StringVar(&o.exceptions, "exceptions", "hack/api-compat/exceptions.yaml", "the accepted breaking changes")
	flag.Parse()
	ok, err := run(o, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "api-compat: %v\n", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run compares the module at the baseline with the working tree and prints
// the verdict to out; ok is whether the gate passes, err a failure to
// compare at all.
func run(o options, out io.Writer) (ok bool, err error) {
	repo, err := git(o.repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return false, fmt.Errorf("-C %s: not in a git repository: %w", o.repo, err)
	}
	data, err := os.ReadFile(filepath.Join(repo, o.exceptions))
	if err != nil {
		return false, fmt.Errorf("reading the exceptions: %w", err)
	}
	exceptions, err := compat.ParseExceptions(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w", o.exceptions, err)
	}
	b, err := resolveBaseline(repo, o.baseline)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "apicompat-")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := extract(repo, b.commit, o.module, tmp); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "api-compat: %s/ of the working tree against %s (%s)\n", o.module, b.commit[:12], b.source)
	changes, err := compare(filepath.Join(tmp, o.module), filepath.Join(repo, o.module))
	if err != nil {
		return false, err
	}
	v := compat.Judge(changes, exceptions)
	report(out, v, o.exceptions)
	return v.OK(), nil
}

// report prints the verdict: compatible changes (informational), accepted
// ones, then what fails the gate and how to fix it.
func report(out io.Writer, v compat.Verdict, exceptionsFile string) {
	section(out, "compatible changes (informational):", "+", v.Compatible)
	if len(v.Accepted) > 0 {
		fmt.Fprintf(out, "breaking changes accepted by %s:\n", exceptionsFile)
		for _, a := range v.Accepted {
			fmt.Fprintf(out, "  ~ %s (#%d: %s)\n", a.Change.Message, a.Exception.Issue, a.Exception.Reason)
		}
	}
	section(out, "BREAKING changes:", "-", v.Breaking)
	if len(v.Stale) > 0 {
		fmt.Fprintf(out, "stale exceptions in %s (they match no breaking change any more):\n", exceptionsFile)
		for _, e := range v.Stale {
			fmt.Fprintf(out, "  ? %s (#%d)\n", e.Message, e.Issue)
		}
	}
	switch {
	case v.OK():
		fmt.Fprintf(out, "api-compat: ok (%d compatible, %d accepted, no breaking change)\n", len(v.Compatible), len(v.Accepted))
	default:
		fmt.Fprintf(out, "api-compat: FAILED: %d breaking changes, %d stale exceptions.\n", len(v.Breaking), len(v.Stale))
		if len(v.Breaking) > 0 {
			fmt.Fprintf(out, "  Undo each breaking change, or accept it in %s: its exact message, a reason and the issue (docs/versioning.md#the-compatibility-gate).\n", exceptionsFile)
		}
		if len(v.Stale) > 0 {
			fmt.Fprintf(out, "  Remove each stale exception from %s.\n", exceptionsFile)
		}
	}
}

func section(out io.Writer, title, mark string, changes []compat.Change) {
	if len(changes) == 0 {
		return
	}
	fmt.Fprintln(out, title)
	for _, c := range changes {
		fmt.Fprintf(out, "  %s %s\n", mark, c.Message)
	}
}
