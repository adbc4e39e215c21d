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

package mutation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// What a down rule reads of consumer, and when that loops, is described in
// the package doc ("Loops").

// readPath is what one occurrence of consumer reads, as field names from the
// object root; empty means the whole object.
type readPath []string

// String renders a read as a CEL selection.
func (r readPath) String() string {
	if len(r) == 0 {
		return consumerVar
	}
	return consumerVar + "." + strings.Join(r, ".")
}

// consumerReads returns what each occurrence of consumer in a checked
// expression reads.
func consumerReads(checked *ast.AST) []readPath {
	root := ast.NavigateAST(checked)
	idents := ast.MatchDescendants(root, func(e ast.NavigableExpr) bool {
		return e.Kind() == ast.IdentKind && e.AsIdent() == consumerVar
	})
	reads := make([]readPath, 0, len(idents))
	for _, id := range idents {
		reads = append(reads, chainFrom(id))
	}
	return reads
}

// chainFrom climbs from an occurrence of consumer through the selections
// and constant indexes applied to it and returns the fields they name.
func chainFrom(e ast.NavigableExpr) readPath {
	var fields readPath
	for {
		parent, ok := e.Parent()
		if !ok {
			return fields
		}
		field, ok := selectedField(parent, e.ID())
		if !ok {
			return fields
		}
		fields = append(fields, field)
		e = parent
	}
}

// selectedField reports the field name that parent selects from its
// operand, when the operand is the expression with id operandID and the
// field is a constant: a (presence-test) select, an optional select, or an
// index or optional index with a string literal.
func selectedField(parent ast.NavigableExpr, operandID int64) (string, bool) {
	switch parent.Kind() {
	case ast.SelectKind:
		sel := parent.AsSelect()
		return sel.FieldName(), sel.Operand().ID() == operandID
	case ast.CallKind:
		call := parent.AsCall()
		switch call.FunctionName() {
		case operators.Index, operators.OptIndex, operators.OptSelect:
		default:
			return "", false
		}
		args := call.Args()
		if len(args) != 2 || args[0].ID() != operandID || args[1].Kind() != ast.LiteralKind {
			return "", false
		}
		s, ok := args[1].AsLiteral().(types.String)
		return string(s), ok
	default:
		return "", false
	}
}

// overlaps reports whether a read and a written path (both from the object
// root) touch the same data: one is a prefix of the other.
func overlaps(read readPath, written []string) bool {
	n := min(len(read), len(written))
	return slices.Equal(read[:n], written[:n])
}

// loopError returns the first conflict between what the compiled rules read
// of consumer and what they write, as a *RuleError on the reading rule.
func loopError(dir Direction, steps []step) error {
	for _, reader := range steps {
		for _, read := range reader.reads {
			for _, writer := range steps {
				if overlaps(read, writer.fields) {
					return reader.fail(dir, loopMessage(dir, read, writer))
				}
			}
		}
	}
	return nil
}

// loopMessage words a conflict.
func loopMessage(dir Direction, read readPath, writer step) error {
	what := "reads " + read.String()
	if len(read) == 0 {
		what = "reads the consumer object as a whole (consumer used whole, or indexed with something other than a constant string)"
	}
	verb := "writes"
	if writer.rule.Delete {
		verb = "deletes"
	}
	return fmt.Errorf("%s, and %s %s %s: a down rule may not read a consumer field that a down rule writes or deletes (it would loop); read the provider's value from object instead",
		what, ruleName(dir, writer.index), verb, pathString(writer.fields))
}
