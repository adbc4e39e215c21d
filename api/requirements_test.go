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

// Package api holds repository-wide checks of the api module. The module's
// Go packages are api/core/v1alpha1 and api/crds; this directory has only
// tests.
package api

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository root, seen from the api module.
const repoRoot = ".."

// requirementsPage is where every requirement id has an anchor.
const requirementsPage = "docs/requirements.md"

var (
	// idPattern is a requirement id such as CONN-7, SYNC-D or SYNC-R4.
	idPattern = regexp.MustCompile(`\b(CONN|HB|SCHEMA|BIND|SYNC|BE)-[0-9A-Z]+\b`)
	// rangePattern is a range of ids: CONN-1..8, BE-1..BE-3, SYNC-R1..R4.
	rangePattern = regexp.MustCompile(`\b(CONN|HB|SCHEMA|BIND|SYNC|BE)-([A-Z]*)([0-9]+)\.\.(?:(?:CONN|HB|SCHEMA|BIND|SYNC|BE)-)?([A-Z]*)([0-9]+)\b`)
	// anchorPattern is an explicit anchor: <a id="conn-7"></a>.
	anchorPattern = regexp.MustCompile(`<a\s+id="([^"]+)"`)
	// headingPattern is a heading that is exactly an id: ### CONN-7.
	headingPattern = regexp.MustCompile(`^#+\s+(\S+)\s*$`)
)

// TestRequirementIDsResolve fails naming every requirement id that a Go or
// Markdown file, a chart or the Makefile cites and docs/requirements.md has
// no anchor for, so that every such reference resolves inside the
// repository.
func TestRequirementIDsResolve(t *testing.T) {
	anchors, err := requirementAnchors(filepath.Join(repoRoot, requirementsPage))
	if err != nil {
		t.Fatal(err)
	}
	citations := map[string][]string{} // id -> "file:line"
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(filepath.ToSlash(rel)) {
			return nil
		}
		return cite(path, filepath.ToSlash(rel), citations)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(citations) == 0 {
		t.Fatal("no requirement id found anywhere: is the walk starting at the repository root?")
	}
	var missing []string
	for id, where := range citations {
		if !anchors[strings.ToLower(id)] {
			missing = append(missing, fmt.Sprintf("%s (cited at %s)", id, strings.Join(where, ", ")))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("requirement id %s has no anchor in %s: add an entry for it", m, requirementsPage)
	}
}

// scanned reports whether a file (slash-separated, relative to the
// repository root) is searched for requirement ids.
func scanned(rel string) bool {
	switch {
	case strings.HasSuffix(rel, ".go"), strings.HasSuffix(rel, ".md"):
		return true
	case rel == "Makefile", strings.HasPrefix(rel, "charts/"):
		return true
	}
	return false
}

// cite records every id a file cites, ranges expanded, with its line.
func cite(path, rel string, citations map[string][]string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		ids := idPattern.FindAllString(line, -1)
		for _, m := range rangePattern.FindAllStringSubmatch(line, -1) {
			ids = append(ids, expand(m)...)
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				citations[id] = append(citations[id], rel+":"+strconv.Itoa(n))
			}
		}
	}
	return sc.Err()
}

// expand lists the ids of a range match: CONN-1..3 is CONN-1, CONN-2,
// CONN-3; SYNC-R1..R4 is SYNC-R1 to SYNC-R4.
func expand(m []string) []string {
	area, letters, toLetters := m[1], m[2], m[4]
	from, _ := strconv.Atoi(m[3])
	to, _ := strconv.Atoi(m[5])
	if letters != toLetters || to < from || to-from > 100 {
		// Not a range of one series: its ends are still cited.
		return []string{fmt.Sprintf("%s-%s%s", area, toLetters, m[5])}
	}
	var ids []string
	for i := from; i <= to; i++ {
		ids = append(ids, fmt.Sprintf("%s-%s%d", area, letters, i))
	}
	return ids
}

// requirementAnchors returns the anchors of the requirements page, lower
// case: explicit <a id="..."> anchors and headings that are exactly an id.
func requirementAnchors(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		for _, m := range anchorPattern.FindAllStringSubmatch(line, -1) {
			anchors[strings.ToLower(m[1])] = true
		}
		if m := headingPattern.FindStringSubmatch(line); m != nil && idPattern.MatchString(m[1]) {
			anchors[strings.ToLower(m[1])] = true
		}
	}
	return anchors, nil
}

func TestExpand(t *testing.T) {
	for in, want := range map[string]string{
		"spec CONN-1..3,":      "CONN-1 CONN-2 CONN-3",
		"(BE-1..BE-2)":         "BE-1 BE-2",
		"SYNC-R1..R3":          "SYNC-R1 SYNC-R2 SYNC-R3",
		"SCHEMA-3..5 and more": "SCHEMA-3 SCHEMA-4 SCHEMA-5",
	} {
		m := rangePattern.FindStringSubmatch(in)
		if m == nil {
			t.Errorf("%q: no range found", in)
			continue
		}
		if got := strings.Join(expand(m), " "); got != want {
			t.Errorf("%q expands to %q, want %q", in, got, want)
		}
	}
}
