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

package syncer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/mutation"
)

// Mutations are the compiled mutation rules of the entry of spec.apis
// whose consumer API is crd, nil when it has none (docs/shaping.md#mutations),
// to run under limits (MutationLimits). An error is the first rule that
// does not compile, naming it.
func Mutations(spec kbindv1alpha1.BindingSpec, crd string, limits mutation.Limits) (up, down *mutation.Program, err error) {
	entry, ok := spec.APIFor(crd)
	if !ok || entry.Mutations == nil {
		return nil, nil, nil
	}
	if err := writesReference(spec, entry); err != nil {
		return nil, nil, fmt.Errorf("the mutations of %s: %w", entry.Name, err)
	}
	if up, err = compiled(mutation.Up, entry.Mutations.Up, limits); err != nil {
		return nil, nil, fmt.Errorf("the mutations of %s: %w", entry.Name, err)
	}
	if down, err = compiled(mutation.Down, entry.Mutations.Down, limits); err != nil {
		return nil, nil, fmt.Errorf("the mutations of %s: %w", entry.Name, err)
	}
	return up, down, nil
}

// MutationLimits are the runtime cost limits of b's mutation rules: a
// namespaced Binding's (a namespace user's rules, run on workers every
// namespace of the Connection shares) are far below a ClusterBinding's,
// which are the API server's (docs/shaping.md#mutations).
func MutationLimits(b kbindv1alpha1.BindingObject) mutation.Limits {
	if b.GetNamespace() != "" {
		return mutation.NamespacedLimits
	}
	return mutation.ClusterLimits
}

// programs caches compiled rule lists by their text and limits: a
// binding's policy is computed at every scope check, and CEL compiles in
// milliseconds. The same rules under the same limits give the same
// *Program, so an unchanged binding leaves its Syncers' scope unchanged (a
// new Program re-queues every object, as it should); the same rules in a
// Binding and a ClusterBinding are two Programs.
var programs = struct {
	sync.Mutex
	byText map[string]*mutation.Program
}{byText: map[string]*mutation.Program{}}

// maxPrograms bounds the cache; it is emptied when full (a binding edited
// that often recompiles, nothing else).
const maxPrograms = 1024

func compiled(dir mutation.Direction, rules []kbindv1alpha1.MutationRule, limits mutation.Limits) (*mutation.Program, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	text, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s/%d/%d/%s", dir, limits.PerCall, limits.PerObject, text)
	programs.Lock()
	p, ok := programs.byText[key]
	programs.Unlock()
	if ok {
		return p, nil
	}
	in := make([]mutation.Rule, 0, len(rules))
	for _, r := range rules {
		in = append(in, mutation.Rule{Path: r.Path, Expression: r.Expression, Delete: r.Delete})
	}
	if p, err = mutation.CompileWithin(dir, in, limits); err != nil {
		return nil, err
	}
	programs.Lock()
	if len(programs.byText) >= maxPrograms {
		programs.byText = map[string]*mutation.Program{}
	}
	programs.byText[key] = p
	programs.Unlock()
	return p, nil
}

// writesReference refuses an up rule of entry that writes a field one of
// the binding's reference entries reads a related object's name from (the
// field itself, a field below it, or an object holding it): kbind maps
// that field to the related copy at the object's own namespace's provider
// place, and a rule changing it could point the provider's controller at
// another consumer namespace's copy under Namespace isolation
// (team-y.db from team-x's object, issue #51).
func writesReference(spec kbindv1alpha1.BindingSpec, entry kbindv1alpha1.APIReference) error {
	for i, rule := range entry.Mutations.Up {
		for j, rel := range spec.RelatedResources {
			if rel.Reference == nil || rel.Reference.API != entry.Name {
				continue
			}
			field := rel.Reference.FieldPath
			if rule.Path == field || strings.HasPrefix(field, rule.Path+".") || strings.HasPrefix(rule.Path, field+".") {
				return &mutation.RuleError{Direction: mutation.Up, Index: i, Path: rule.Path, Err: fmt.Errorf(
					"it writes %s, which relatedResources[%d] reads the related object's name from: kbind writes that field of the provider copy itself "+
						"(naming the related copy at the object's own namespace's place), so no rule may change it; remove the rule, or reference another field", field, j)}
			}
		}
	}
	return nil
}
