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

// Package doctor is the troubleshooting guide (docs/troubleshooting.md) as
// code: it reads a consumer cluster and, with each Connection's own
// credentials, its provider, and reports findings — what is wrong, the
// evidence, the exact command that fixes it, and the section of the guide
// that explains it. The decisions are pure functions of what was read
// (checks.go); gather.go does the reading.
package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Severity orders findings. Errors and warnings make the report unhealthy;
// notes are context (e.g. "the konnector runs outside this cluster").
type Severity string

// The severities, most severe first.
const (
	SeverityError   Severity = "Error"
	SeverityWarning Severity = "Warning"
	SeverityNote    Severity = "Note"
)

// Object names an object on one of the two clusters.
type Object struct {
	// Cluster is "consumer" or "provider".
	Cluster   string `json:"cluster"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (o Object) String() string {
	name := o.Name
	if o.Namespace != "" {
		name = o.Namespace + "/" + o.Name
	}
	return fmt.Sprintf("%s %s (%s)", o.Kind, name, o.Cluster)
}

// Finding is one thing that is wrong.
type Finding struct {
	// Check is the stable id of the check that found it, e.g.
	// "connection.secret" (docs/cli.md lists them).
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Object   Object   `json:"object"`
	// Field is where on Object the evidence is, e.g.
	// "status.conditions[Connected]" or "spec.apis[1].name".
	Field string `json:"field,omitempty"`
	// Problem says what is wrong, in one sentence.
	Problem string `json:"problem"`
	// Evidence is what was read that shows it.
	Evidence string `json:"evidence,omitempty"`
	// Fix is the command (or commands, one per line) that fixes it.
	Fix string `json:"fix"`
	// Doc is the section of the troubleshooting guide that explains it.
	Doc string `json:"doc"`
}

// ReportVersion identifies the JSON schema of Report (docs/cli.md#doctor).
const ReportVersion = "doctor.kbind.io/v1"

// Report is doctor's result; its JSON form is a documented interface.
type Report struct {
	Version string `json:"version"`
	// Healthy is true when no finding is an Error or a Warning and
	// everything could be checked.
	Healthy bool `json:"healthy"`
	// Checked lists what was examined, e.g. "Connection provider".
	Checked  []string  `json:"checked"`
	Findings []Finding `json:"findings"`
	// Unchecked lists what could not be examined, and why.
	Unchecked []string `json:"unchecked,omitempty"`
}

// Exit codes of doctor.
const (
	ExitHealthy       = 0
	ExitFindings      = 1
	ExitCouldNotCheck = 2
)

// finish fills Version and Healthy.
func (r *Report) finish() {
	r.Version = ReportVersion
	if r.Checked == nil {
		r.Checked = []string{}
	}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	r.Healthy = len(r.Unchecked) == 0
	for _, f := range r.Findings {
		if f.Severity != SeverityNote {
			r.Healthy = false
		}
	}
}

// Exit is the exit code for r: 1 when there are findings, else 2 when
// something could not be checked, else 0.
func (r *Report) Exit() int {
	for _, f := range r.Findings {
		if f.Severity != SeverityNote {
			return ExitFindings
		}
	}
	if len(r.Unchecked) > 0 {
		return ExitCouldNotCheck
	}
	return ExitHealthy
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for a person: each finding as a block, errors first.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, sev := range []Severity{SeverityError, SeverityWarning, SeverityNote} {
		for _, f := range r.Findings {
			if f.Severity != sev {
				continue
			}
			fmt.Fprintf(&b, "%s  %s  %s\n", strings.ToUpper(string(f.Severity)), f.Check, f.Object)
			fmt.Fprintf(&b, "  problem:  %s\n", f.Problem)
			if f.Evidence != "" {
				where := ""
				if f.Field != "" {
					where = f.Field + ": "
				}
				fmt.Fprintf(&b, "  evidence: %s%s\n", where, f.Evidence)
			}
			for i, line := range strings.Split(f.Fix, "\n") {
				label := "  fix:      "
				if i > 0 {
					label = "            "
				}
				fmt.Fprintf(&b, "%s%s\n", label, line)
			}
			fmt.Fprintf(&b, "  see:      %s\n\n", f.Doc)
		}
	}
	for _, u := range r.Unchecked {
		fmt.Fprintf(&b, "NOT CHECKED  %s\n", u)
	}
	problems := 0
	for _, f := range r.Findings {
		if f.Severity != SeverityNote {
			problems++
		}
	}
	switch {
	case problems > 0:
		fmt.Fprintf(&b, "%d problem(s) found; checked: %s\n", problems, strings.Join(r.Checked, ", "))
	case len(r.Unchecked) > 0:
		fmt.Fprintf(&b, "no problems found in what could be checked: %s\n", strings.Join(r.Checked, ", "))
	default:
		fmt.Fprintf(&b, "no problems found; checked: %s\n", strings.Join(r.Checked, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
