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

package syncer_test

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/typeutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// TestOneDoorForDeletes holds the engine to "deletion only through one
// door" (issue #51): every deletion of a provider copy or a consumer
// instance and every removal of the core.kbind.io/syncer finalizer happens
// in engine/syncer/release.go (the releaser), and every other delete or
// finalizer removal in the engine — Leases, related copies, renewed-token
// Secrets, the cleanup finalizer, consumer CRDs — is listed in the
// deletion map at the head of that file, with the read that justifies it,
// one row per call. docs/sync.md holds the same map.
//
// It reads the engine with go/types, not as plain syntax: a call is a
// delete when it resolves to a function or method named Delete,
// DeleteAllOf or DeleteCollection whose first parameter is a
// context.Context (a client's, a dynamic client's, heartbeat.Delete), so
// sync.Map.Delete and the builtin delete are not; a finalizer removal is
// a call of RemoveFinalizer (controllerutil's, or the patch helper) or of
// SetFinalizers, whether written at once or later by an Update or Patch
// (toProvider drops the finalizer in memory). An object deleted outside the
// releaser must have a static type that says what it is: an unstructured
// object is a bound object's copy or instance.
//
// It only reads source files, and type-checking the module takes a while
// (minutes on a busy machine): it runs in parallel with the tests of the
// package's engine rather than ahead of them.
func TestOneDoorForDeletes(t *testing.T) {
	t.Parallel()
	sites := deletionSites(t)
	door, others := deletionMap(t, "release.go")
	if len(door) == 0 || len(others) == 0 {
		t.Fatalf("release.go's deletion map lists %d door rows and %d other rows: is its layout what deletionMap reads?", len(door), len(others))
	}

	byFunc := map[string][]site{}
	for _, s := range sites {
		byFunc[s.function] = append(byFunc[s.function], s)
		switch {
		case s.inDoor:
		case s.syncerFinalizer:
			t.Errorf("%s: %s removes the %s finalizer outside the releaser (engine/syncer/release.go)", s.pos, s.function, kbindv1alpha1.SyncerFinalizer)
		case s.unstructured:
			t.Errorf("%s: %s deletes an unstructured object (%s) outside the releaser: bound objects' provider copies and consumer instances are deleted in engine/syncer/release.go only",
				s.pos, s.function, s.object)
		case others[s.function] == 0:
			t.Errorf("%s: %s %s outside the releaser and is not in the deletion map of engine/syncer/release.go: route it through the releaser, or list it there (and in docs/sync.md) with the read that justifies it",
				s.pos, s.function, s.what())
		}
	}
	for fn, rows := range others {
		var outside int
		for _, s := range byFunc[fn] {
			if !s.inDoor {
				outside++
			}
		}
		if outside != rows {
			t.Errorf("the deletion map lists %s %d time(s), and it has %d delete or finalizer-removal call(s): one row per call (a function renamed or gone, or a call added to it)",
				fn, rows, outside)
		}
	}
	for fn := range door {
		found := false
		for _, s := range byFunc[fn] {
			found = found || s.inDoor
		}
		if !found {
			t.Errorf("the deletion map names %s as a door of release.go, and no delete or finalizer removal is made there", fn)
		}
	}

	// docs/sync.md shows the same map.
	code := mapBlock(t, "release.go", "//\t")
	docs := mapBlock(t, filepath.Join("..", "..", "docs", "sync.md"), "")
	if code != docs {
		t.Errorf("docs/sync.md's deletion map differs from engine/syncer/release.go's; copy it over:\n%s", code)
	}
	t.Logf("%d delete and finalizer-removal calls in the engine; %d in the releaser", len(sites), countDoor(sites))
}

// site is one delete or finalizer-removal call.
type site struct {
	pos      token.Position
	function string // pkg.Func or pkg.Type.Method (the enclosing declaration)
	callee   string
	object   string // the deleted object's static type
	inDoor   bool   // in engine/syncer/release.go
	// syncerFinalizer: a removal of core.kbind.io/syncer; unstructured:
	// a delete of an unstructured object.
	syncerFinalizer, unstructured, finalizer bool
}

func (s site) what() string {
	if s.finalizer {
		return "removes a finalizer (" + s.callee + ")"
	}
	return "deletes " + s.object + " (" + s.callee + ")"
}

func countDoor(sites []site) int {
	n := 0
	for _, s := range sites {
		if s.inDoor {
			n++
		}
	}
	return n
}

// deletionSites loads every package of the engine module but its test
// helpers (engine/test/...) with types and finds every delete and
// finalizer-removal call.
func deletionSites(t *testing.T) []site {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	var sites []site
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("loading %s: %v", p.PkgPath, e)
		}
		if strings.Contains(p.PkgPath, "/engine/test/") {
			continue
		}
		for _, f := range p.Syntax {
			file := p.Fset.Position(f.Pos()).Filename
			door := p.PkgPath == "github.com/kbind/kbind/engine/syncer" && filepath.Base(file) == "release.go"
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				name := p.Name + "." + declName(fd)
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					if s, ok := classify(p.TypesInfo, call); ok {
						s.pos, s.function, s.inDoor = p.Fset.Position(call.Pos()), name, door
						sites = append(sites, s)
					}
					return true
				})
			}
		}
	}
	sort.Slice(sites, func(i, j int) bool { return sites[i].pos.String() < sites[j].pos.String() })
	return sites
}

// declName is Func, or Type.Method for a method.
func declName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// classify says whether call deletes an object or removes a finalizer,
// and what.
func classify(info *types.Info, call *ast.CallExpr) (site, bool) {
	fn, ok := typeutil.Callee(info, call).(*types.Func)
	if !ok {
		return site{}, false
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return site{}, false
	}
	callee := fn.FullName()
	switch fn.Name() {
	case "Delete", "DeleteAllOf", "DeleteCollection":
		if sig.Params().Len() == 0 || !isContext(sig.Params().At(0).Type()) {
			return site{}, false // sync.Map.Delete, a cache's forget
		}
		s := site{callee: callee, object: "an object named by a string"}
		if len(call.Args) > 1 {
			if tv, ok := info.Types[call.Args[1]]; ok && !isString(tv.Type) {
				s.object = types.TypeString(tv.Type, nil)
				s.unstructured = strings.HasSuffix(s.object, "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.Unstructured")
			}
		}
		return s, true
	case "RemoveFinalizer", "SetFinalizers":
		s := site{callee: callee, finalizer: true}
		for _, arg := range call.Args {
			if tv, ok := info.Types[arg]; ok && tv.Value != nil && tv.Value.Kind() == constant.String &&
				constant.StringVal(tv.Value) == kbindv1alpha1.SyncerFinalizer {
				s.syncerFinalizer = true
			}
		}
		return s, true
	}
	return site{}, false
}

func isContext(t types.Type) bool { return types.TypeString(t, nil) == "context.Context" }

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// mapRow is the first column of a row of the deletion map: a function,
// as pkg.Func or pkg.Type.Method.
var mapRow = regexp.MustCompile(`^([a-z][a-z0-9]*(\.[A-Za-z_][A-Za-z0-9_]*){1,2})\s`)

// deletionMap reads the deletion map at the head of file: the functions
// its door table and its other-deletes table list (with how many rows
// each).
func deletionMap(t *testing.T, file string) (door, others map[string]int) {
	t.Helper()
	door, others = map[string]int{}, map[string]int{}
	table := map[string]int(nil)
	for _, line := range strings.Split(mapBlock(t, file, "//\t"), "\n") {
		switch {
		case strings.HasPrefix(line, "door "):
			table = door
			continue
		case strings.HasPrefix(line, "other deletes "):
			table = others
			continue
		}
		if m := mapRow.FindStringSubmatch(line); m != nil && table != nil {
			table[m[1]]++
		}
	}
	return door, others
}

// mapBlock is the deletion map in file, between its "BEGIN deletion map"
// and "END deletion map" lines, each line with prefix cut off (release.go's
// is in a comment, docs/sync.md's in a code block).
func mapBlock(t *testing.T, file, prefix string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimPrefix(strings.TrimPrefix(line, "//"), " ")
		switch {
		case strings.Contains(trimmed, "BEGIN deletion map"):
			in = true
			continue
		case strings.Contains(trimmed, "END deletion map"):
			in = false
			continue
		}
		if in {
			if prefix != "" {
				line = strings.TrimPrefix(strings.TrimPrefix(line, "//"), "\t")
			}
			out = append(out, strings.TrimRight(line, " "))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no BEGIN deletion map … END deletion map block", file)
	}
	return strings.Join(out, "\n")
}
