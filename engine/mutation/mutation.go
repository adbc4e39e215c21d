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
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Direction of a rule list.
type Direction string

const (
	// Up rules shape the provider copy of a consumer object: object is the
	// consumer object, paths are confined to .spec.
	Up Direction = "up"
	// Down rules shape the status going down to the consumer: object is the
	// provider object, consumer the current consumer object, paths are
	// confined to .status.
	Down Direction = "down"
)

// Rule sets the field at Path to the value of Expression, or removes it
// (Delete). Exactly one of Expression and Delete is given.
type Rule struct {
	Path       string
	Expression string
	Delete     bool
}

// RuleError is what went wrong with one rule, at Compile or at Apply. Its
// message names the rule as the binding spells it,
// "mutations.up[2] (.spec.tenant): ...".
type RuleError struct {
	Direction Direction
	// Index is the rule's position in its list.
	Index int
	// Path is the rule's path as written.
	Path string
	// Err is what is wrong, in words an operator can act on.
	Err error
}

// Error implements error.
func (e *RuleError) Error() string {
	return fmt.Sprintf("%s (%s): %v", ruleName(e.Direction, e.Index), e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *RuleError) Unwrap() error { return e.Err }

// ruleName is a rule's place in the binding, "mutations.up[2]".
func ruleName(dir Direction, index int) string {
	return fmt.Sprintf("mutations.%s[%d]", dir, index)
}

// Program is a compiled rule list. It is immutable and safe for concurrent
// use; the zero of *Program (nil) applies no rules.
type Program struct {
	dir   Direction
	steps []step
	// limits are the runtime cost limits it runs under (tests lower
	// PerObject).
	limits Limits
}

// step is one compiled rule.
type step struct {
	index int
	rule  Rule
	// fields is the parsed path, root included.
	fields []string
	// prog evaluates the expression; nil for a delete.
	prog cel.Program
	// reads is what the expression reads of consumer (down only).
	reads []readPath
}

// fail wraps err as this rule's RuleError.
func (s step) fail(dir Direction, err error) *RuleError {
	return &RuleError{Direction: dir, Index: s.index, Path: s.rule.Path, Err: err}
}

// Compile validates and compiles a rule list once (per binding generation).
// Every problem with a rule is a *RuleError naming the first rule at fault;
// an unknown direction is a caller's mistake and a plain error.
//
// A rule is refused when its path is outside the direction's grammar, when
// it has both or neither of Expression and Delete, when its expression does
// not compile in the API server's CEL environment (an up rule has no
// consumer), when its estimated cost exceeds StaticCostLimit, or, for down
// rules, when it reads a consumer field a down rule writes (see "Loops" in
// the package doc).
func Compile(dir Direction, rules []Rule) (*Program, error) {
	return CompileWithin(dir, rules, ClusterLimits)
}

// CompileWithin is Compile for a Program that runs under limits
// (ClusterLimits or NamespacedLimits). The static check is the same for
// both: limits bound what a rule costs at Apply, on the object at hand.
func CompileWithin(dir Direction, rules []Rule, limits Limits) (*Program, error) {
	if err := limits.check(); err != nil {
		return nil, err
	}
	if dir != Up && dir != Down {
		return nil, fmt.Errorf("mutation: unknown direction %q (want %q or %q)", dir, Up, Down)
	}
	envByDir, err := envs()
	if err != nil {
		return nil, fmt.Errorf("mutation: %w", err)
	}
	steps := make([]step, 0, len(rules))
	for i, r := range rules {
		s, err := compileRule(envByDir[dir], dir, i, r, limits)
		if err != nil {
			return nil, err
		}
		steps = append(steps, s)
	}
	if err := loopError(dir, steps); err != nil {
		return nil, err
	}
	return &Program{dir: dir, steps: steps, limits: limits}, nil
}

// compileRule validates and compiles one rule.
func compileRule(env *cel.Env, dir Direction, index int, r Rule, limits Limits) (step, error) {
	s := step{index: index, rule: r}
	fields, err := parsePath(dir, r.Path)
	if err != nil {
		return s, s.fail(dir, err)
	}
	s.fields = fields
	hasExpr := strings.TrimSpace(r.Expression) != ""
	switch {
	case hasExpr && r.Delete:
		return s, s.fail(dir, errors.New("a rule has either an expression or delete: true, not both"))
	case !hasExpr && !r.Delete:
		return s, s.fail(dir, errors.New("a rule needs an expression (the value to set) or delete: true"))
	case r.Delete:
		return s, nil
	}
	checked, err := compileExpression(env, dir, r.Expression)
	if err != nil {
		return s, s.fail(dir, err)
	}
	if s.prog, err = env.Program(checked, programOptions(limits)...); err != nil {
		return s, s.fail(dir, fmt.Errorf("building the program: %w", err))
	}
	if dir == Down {
		s.reads = consumerReads(checked.NativeRep())
	}
	return s, nil
}

// compileExpression parses and type-checks an expression and checks its
// estimated cost.
func compileExpression(env *cel.Env, dir Direction, expr string) (*cel.Ast, error) {
	checked, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		msg := issues.Err().Error()
		if dir == Up && strings.Contains(msg, "undeclared reference to '"+consumerVar+"'") {
			msg += " (consumer exists only in down rules; in an up rule the consumer object is object)"
		}
		return nil, fmt.Errorf("expression does not compile: %s", msg)
	}
	cost, err := env.EstimateCost(checked, costEstimator())
	if err != nil {
		return nil, fmt.Errorf("estimating the expression's cost: %w", err)
	}
	if cost.Max > StaticCostLimit {
		return nil, fmt.Errorf("the expression's estimated cost %d exceeds the limit of %d (the API server's for one CRD validation rule): it could take over a second on the largest object a cluster stores; loop over fewer lists (nested loops multiply)",
			cost.Max, StaticCostLimit)
	}
	return checked, nil
}

// Apply runs the program. For Up, object is the consumer object and target
// the outgoing provider copy; for Down, object is the provider object,
// consumer the current consumer object and target the object carrying the
// status down. All are unstructured content; only target is changed.
//
// Rules run in order and every expression sees the same object and
// consumer (not the target as earlier rules left it). Setting creates
// missing intermediate objects; setting below a field that is not an
// object is an error; deleting an absent field is not. Apply is all or
// nothing: on any error target is left exactly as it was, and the error is
// a *RuleError (an expression that fails on this object, a cost limit, a
// value JSON cannot hold). Maps nested in target are never modified in
// place, only replaced, so target may share them with object.
func (p *Program) Apply(target, object, consumer map[string]any) error {
	if p == nil || len(p.steps) == 0 {
		return nil
	}
	if target == nil {
		return p.steps[0].fail(p.dir, errors.New("there is no target object to write to"))
	}
	vars := map[string]any{objectVar: object}
	if p.dir == Down {
		vars[consumerVar] = consumer
	}
	d := newDraft(target)
	budget := &costBudget{limits: p.limits, left: p.limits.PerObject}
	for _, s := range p.steps {
		if err := p.run(s, d, vars, budget); err != nil {
			return err
		}
	}
	d.commit(target)
	return nil
}

// run applies one rule to the draft, charging its cost to budget.
func (p *Program) run(s step, d *draft, vars map[string]any, budget *costBudget) error {
	if s.rule.Delete {
		d.remove(s.fields)
		return nil
	}
	value, err := budget.evaluate(s.prog, vars)
	if err != nil {
		return s.fail(p.dir, err)
	}
	if err := d.set(s.fields, value); err != nil {
		return s.fail(p.dir, err)
	}
	return nil
}

// evaluate runs an expression, charges its actual cost to the budget and
// converts the result.
func (b *costBudget) evaluate(prog cel.Program, vars map[string]any) (any, error) {
	val, details, err := prog.Eval(vars)
	if err != nil {
		return nil, b.evalError(err)
	}
	if err := b.charge(details.ActualCost()); err != nil {
		return nil, err
	}
	return b.convert(val)
}

// convert turns a result into unstructured content. Under limits that
// charge results, every value converted costs one more: a rule whose value
// is a large part of the object (object.spec.items) costs what copying it
// takes, and stops when the budget is spent.
func (b *costBudget) convert(val ref.Val) (any, error) {
	if !b.limits.chargeResults {
		unlimited := uint64(math.MaxUint64)
		return toJSON(val, &unlimited)
	}
	left := b.left
	out, err := toJSON(val, &left)
	if errors.Is(err, errResultTooLarge) {
		return nil, fmt.Errorf("%w: %w", err, b.overBudget())
	}
	b.left = left
	return out, err
}

// costBudget is what the rules may still cost on one object.
type costBudget struct {
	limits Limits
	left   uint64
}

// charge takes one evaluation's actual cost (nil when not tracked) from the
// budget.
func (b *costBudget) charge(cost *uint64) error {
	if cost == nil {
		return nil
	}
	if *cost > b.left {
		return b.overBudget()
	}
	b.left -= *cost
	return nil
}

// overBudget is the error of rules that exceeded the per-object budget.
func (b *costBudget) overBudget() error {
	return fmt.Errorf("the rules together exceeded the runtime cost budget of %d for one object (%s)%s",
		b.limits.PerObject, b.limits.perObjectWhose, b.limits.suffix())
}

// evalError words an evaluation failure.
func (b *costBudget) evalError(err error) error {
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return fmt.Errorf("the expression exceeded the runtime cost limit of %d for one evaluation (%s)%s: %w",
			b.limits.PerCall, b.limits.perCallWhose, b.limits.suffix(), err)
	}
	return fmt.Errorf("the expression failed on this object: %w", err)
}
