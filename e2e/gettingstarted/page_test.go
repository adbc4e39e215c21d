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

package gettingstarted

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// block is a fenced ```sh block of the page.
type block struct {
	// Tag is the info string's second word: e2e:<step> or no-e2e:<reason>.
	Tag string
	// Body is the block's text, with its final newline.
	Body string
	// Line is the line of the opening fence, from 1.
	Line int
}

// Step is the step name of an e2e:<step> block; "" for any other.
func (b block) Step() string {
	step, _ := strings.CutPrefix(b.Tag, "e2e:")
	if step == b.Tag {
		return ""
	}
	return step
}

// notRunReasons are the reasons a ```sh block may be left out of the test.
var notRunReasons = []string{
	"registry", // needs your registry or its credentials
	"pod",      // needs the konnector as a Pod: make test-images
	"example",  // sets up the page's example API, which the test installs itself
}

// parseBlocks returns the ```sh blocks of a Markdown page in order. Every
// one must be tagged e2e:<step> (run by the test) or no-e2e:<reason> (one
// of notRunReasons); step names must be unique.
func parseBlocks(page string) ([]block, error) {
	var out []block
	var problems []string
	seen := map[string]int{}
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		open := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(open, "```") {
			continue
		}
		info := strings.Fields(strings.TrimPrefix(open, "```"))
		start := i + 1
		var body strings.Builder
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the fence is never closed", start)
		}
		if len(info) == 0 || info[0] != "sh" {
			continue
		}
		b := block{Body: body.String(), Line: start}
		if len(info) == 2 {
			b.Tag = info[1]
		}
		reason, notRun := strings.CutPrefix(b.Tag, "no-e2e:")
		switch {
		case b.Step() != "" && validStep.MatchString(b.Step()):
			if first, dup := seen[b.Step()]; dup {
				problems = append(problems, fmt.Sprintf("line %d: step %s is tagged on line %d already", start, b.Step(), first))
			}
			seen[b.Step()] = start
		case notRun && slices.Contains(notRunReasons, reason):
		default:
			problems = append(problems, fmt.Sprintf("line %d: ```%s: a shell block is tagged e2e:<step> (run by the test) or no-e2e:<%s>",
				start, strings.Join(info, " "), strings.Join(notRunReasons, "|")))
		}
		out = append(out, b)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return out, nil
}

var (
	validStep   = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	placeholder = regexp.MustCompile(`<[a-z][a-z0-9-]*>`)
)

// substitute replaces the placeholders (<name>) of a block the test runs;
// a placeholder it has no value for is an error, so that the page cannot
// gain one the test would pass to the shell as it is.
func substitute(body string, values map[string]string) (string, error) {
	var unknown []string
	out := placeholder.ReplaceAllStringFunc(body, func(p string) string {
		v, ok := values[p]
		if !ok {
			unknown = append(unknown, p)
			return p
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("placeholders the test has no value for: %s", strings.Join(unknown, ", "))
	}
	return out, nil
}
