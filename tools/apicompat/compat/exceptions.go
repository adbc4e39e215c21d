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

package compat

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Exception accepts one breaking change, named by its exact message, with the
// reason it is accepted and the issue that decided it.
type Exception struct {
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Issue   int    `json:"issue"`
}

// exceptionsFile is the layout of hack/api-compat/exceptions.yaml.
type exceptionsFile struct {
	Exceptions []Exception `json:"exceptions"`
}

// ParseExceptions reads an exceptions file: a list under "exceptions", each
// entry with a message, a reason and an issue number; unknown keys, a missing
// field and a message listed twice are errors.
func ParseExceptions(data []byte) ([]Exception, error) {
	var f exceptionsFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("want a list under \"exceptions\" of {message, reason, issue}: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, e := range f.Exceptions {
		var missing []string
		if strings.TrimSpace(e.Message) == "" {
			missing = append(missing, "message (the exact breaking change the gate printed)")
		}
		if strings.TrimSpace(e.Reason) == "" {
			missing = append(missing, "reason (why the break is accepted)")
		}
		if e.Issue <= 0 {
			missing = append(missing, "issue (the number of the issue that decided it)")
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("exception %d (%q): add %s", i+1, e.Message, strings.Join(missing, ", ")))
		}
		if seen[e.Message] {
			errs = append(errs, fmt.Errorf("exception %d: %q is listed twice: keep one", i+1, e.Message))
		}
		seen[e.Message] = true
	}
	return f.Exceptions, errors.Join(errs...)
}

// Accepted is a breaking change an exception accepts.
type Accepted struct {
	Change    Change
	Exception Exception
}

// Verdict sorts the changes: the breaking changes no exception accepts (the
// gate fails on them), those accepted, the compatible ones, and the stale
// exceptions that match no breaking change (the gate fails on them too, so
// the exceptions file cannot rot).
type Verdict struct {
	Breaking   []Change
	Accepted   []Accepted
	Compatible []Change
	Stale      []Exception
}

// OK reports whether the gate passes.
func (v Verdict) OK() bool {
	return len(v.Breaking) == 0 && len(v.Stale) == 0
}

// Judge applies the exceptions to the changes.
func Judge(changes []Change, exceptions []Exception) Verdict {
	var v Verdict
	byMessage := make(map[string]Exception, len(exceptions))
	for _, e := range exceptions {
		byMessage[e.Message] = e
	}
	used := map[string]bool{}
	for _, c := range changes {
		e, ok := byMessage[c.Message]
		switch {
		case !c.Breaking:
			v.Compatible = append(v.Compatible, c)
		case ok:
			v.Accepted = append(v.Accepted, Accepted{Change: c, Exception: e})
			used[c.Message] = true
		default:
			v.Breaking = append(v.Breaking, c)
		}
	}
	for _, e := range exceptions {
		if !used[e.Message] {
			v.Stale = append(v.Stale, e)
		}
	}
	return v
}
