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

package engine

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestWhereDoesXLive holds docs/development.md to the code (issue #56):
// its "Where does X live" table names every production package of the
// engine (a directory with a non-test Go file, engine/test/ aside: one
// row covers those), and its Modules section names every engine package
// that konnector, backend, cli or e2e imports outside tests.
func TestWhereDoesXLive(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	table := section(t, doc, "## Where does X live")
	for _, pkg := range enginePackages(t) {
		if strings.HasPrefix(pkg, "engine/test/") {
			continue
		}
		if !names(table, pkg) {
			t.Errorf("docs/development.md's \"Where does X live\" does not name %s: add the row that says what it owns", pkg)
		}
	}
	modules := section(t, doc, "## Modules")
	for _, m := range []string{"konnector", "backend", "cli", "e2e"} {
		for _, pkg := range engineImports(t, filepath.Join("..", m)) {
			if strings.HasPrefix(pkg, "engine/test/") {
				continue // "the test helpers"
			}
			if !strings.Contains(modules, "`"+pkg+"`") {
				t.Errorf("%s imports %s, which docs/development.md's Modules section does not name", m, pkg)
			}
		}
	}
}

// section is the text of doc from heading to the next heading of the same
// level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/development.md has no %q", heading)
	}
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// names reports whether text names package pkg in backticks: `pkg`, a
// file of it (`pkg/file.go`) or, for a package under a named one, that
// path.
func names(text, pkg string) bool {
	return strings.Contains(text, "`"+pkg+"`") || strings.Contains(text, "`"+pkg+"/") || strings.Contains(text, "`"+pkg+" ")
}

// enginePackages are the engine's directories holding a non-test Go file,
// as engine/<path> ("engine" for the root).
func enginePackages(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			seen[filepath.ToSlash(filepath.Join("engine", filepath.Dir(path)))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	if len(out) < 20 {
		t.Fatalf("found %d engine packages, %v: run from engine/", len(out), out)
	}
	return out
}

// engineImports are the engine packages (engine/<path>) the non-test Go
// files under dir import.
func engineImports(t *testing.T, dir string) []string {
	t.Helper()
	const prefix = "github.com/kbind/kbind/"
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if rest, ok := strings.CutPrefix(p, prefix); ok && (rest == "engine" || strings.HasPrefix(rest, "engine/")) {
				seen[rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
