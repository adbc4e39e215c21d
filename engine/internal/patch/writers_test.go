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

package patch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	engineModule = "github.com/kbind/kbind/engine"
	patchPath    = engineModule + "/internal/patch"
	apiPath      = "github.com/kbind/kbind/api/core/v1alpha1"
)

// statusWriters is, for each kbind type, the one engine package that writes
// its status (through Status). A second writer would overwrite the first's
// conditions with its own stale list: see Status.
var statusWriters = map[string]string{
	"Connection":     "connection",
	"ClusterBinding": "binding",
	"Binding":        "binding",
}

// byInterface are the kbind types a package writes through a client.Object
// whose concrete type the source does not show (a reconciler of several
// kinds). A call whose object the test cannot type, in a package not listed
// here, fails the test.
var byInterface = map[string][]string{
	"binding": {"Binding", "ClusterBinding"},
}

// TestOneStatusWriter walks the engine's non-test Go sources, finds every
// status write of a kbind object — a call of Status, or a direct
// Status().Update/Patch/Apply of an object the source types as a kbind
// type — and fails when a kbind type has a status writer in a package other
// than its one in statusWriters.
func TestOneStatusWriter(t *testing.T) {
	root := filepath.Join("..", "..")
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(mod), "module "+engineModule+"\n") {
		t.Fatalf("%s is not the engine module's root: %v", root, err)
	}
	found := map[string][]string{} // kbind type → writer packages
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg = filepath.ToSlash(pkg)
		for _, w := range statusWrites(t, path) {
			types := w.types
			if len(types) == 0 {
				if types = byInterface[pkg]; types == nil {
					t.Errorf("%s: a status write whose kbind type the source does not show: declare the object with its type, or list the package's types in byInterface", w.pos)
				}
			}
			for _, typ := range types {
				if !slices.Contains(found[typ], pkg) {
					found[typ] = append(found[typ], pkg)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for typ, pkg := range statusWriters {
		want[typ] = []string{pkg}
	}
	for typ, pkgs := range found {
		slices.Sort(pkgs)
		if len(pkgs) > 1 {
			t.Errorf("%s status is written from %s: each object has exactly one status writer (Status replaces the conditions list whole)", typ, strings.Join(pkgs, " and "))
		}
	}
	if !reflect.DeepEqual(found, want) {
		t.Errorf("status writers by kbind type: found %v, want %v", found, want)
	}
}

// statusWrite is one status write in a file: where, and the kbind types
// its object may be (none: the source does not say).
type statusWrite struct {
	pos   token.Position
	types []string
}

// statusWrites returns the status writes of kbind objects in the file at
// path: every call of Status, and every direct Status().Update, Patch or
// Apply whose object is typed as a kbind type.
func statusWrites(t *testing.T, path string) []statusWrite {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	patchName, apiName := importName(f, patchPath), importName(f, apiPath)
	if f.Name.Name == "patch" && strings.HasSuffix(filepath.ToSlash(filepath.Dir(path)), "internal/patch") {
		return nil // Status itself
	}
	var out []statusWrite
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var obj ast.Expr
			switch {
			case patchName != "" && isSelector(call.Fun, patchName, "Status") && len(call.Args) == 4:
				obj = call.Args[3]
			case isDirectStatusWrite(call) && len(call.Args) >= 2:
				obj = call.Args[1]
				if len(kbindTypes(fn, obj, apiName)) == 0 {
					return true // not typed as a kbind object: a bound object's status, say
				}
			default:
				return true
			}
			out = append(out, statusWrite{pos: fset.Position(call.Pos()), types: kbindTypes(fn, obj, apiName)})
			return true
		})
	}
	return out
}

// importName is the name under which f imports path ("" when it does not).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// isSelector reports whether e is x.sel.
func isSelector(e ast.Expr, x, sel string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != sel {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == x
}

// isDirectStatusWrite reports whether call is <client>.Status().Update,
// Patch or Apply.
func isDirectStatusWrite(call *ast.CallExpr) bool {
	s, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || (s.Sel.Name != "Update" && s.Sel.Name != "Patch" && s.Sel.Name != "Apply") {
		return false
	}
	inner, ok := s.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := inner.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Status" && len(inner.Args) == 0
}

// kbindTypes are the kbind types the source gives e in fn: its own type
// (&kbindv1alpha1.T{}, new(T)), or, for a name, the types of its
// declarations in fn (parameters, var, :=, =).
func kbindTypes(fn *ast.FuncDecl, e ast.Expr, apiName string) []string {
	if typ := exprType(e, apiName); typ != "" {
		return []string{typ}
	}
	id, ok := e.(*ast.Ident)
	if !ok || apiName == "" {
		return nil
	}
	var out []string
	add := func(typ string) {
		if typ != "" && !slices.Contains(out, typ) {
			out = append(out, typ)
		}
	}
	for _, list := range []*ast.FieldList{fn.Recv, fn.Type.Params, fn.Type.Results} {
		if list == nil {
			continue
		}
		for _, field := range list.List {
			for _, name := range field.Names {
				if name.Name == id.Name {
					add(typeName(field.Type, apiName))
				}
			}
		}
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if l, ok := lhs.(*ast.Ident); ok && l.Name == id.Name && len(n.Rhs) == len(n.Lhs) {
					add(exprType(n.Rhs[i], apiName))
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if name.Name != id.Name {
					continue
				}
				if n.Type != nil {
					add(typeName(n.Type, apiName))
				} else if i < len(n.Values) {
					add(exprType(n.Values[i], apiName))
				}
			}
		}
		return true
	})
	return out
}

// exprType is the kbind type of a value expression: &T{}, T{}, new(T).
func exprType(e ast.Expr, apiName string) string {
	switch e := e.(type) {
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return exprType(e.X, apiName)
		}
	case *ast.CompositeLit:
		return typeName(e.Type, apiName)
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "new" && len(e.Args) == 1 {
			return typeName(e.Args[0], apiName)
		}
	}
	return ""
}

// typeName is T of a type expression kbindv1alpha1.T or *kbindv1alpha1.T.
func typeName(e ast.Expr, apiName string) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if s, ok := e.(*ast.SelectorExpr); ok && apiName != "" && isSelector(s, apiName, s.Sel.Name) {
		return s.Sel.Name
	}
	return ""
}
