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

// Package mutation owns the field mutations of a binding's API (issue #34,
// apis[].mutations): parsing, validating, compiling and applying an
// ordered list of rules, each setting one field to the value of a CEL
// expression or deleting it. It is pure — no API server, no clients — so
// the binding controller compiles a rule list once per generation and
// reports a *RuleError as a condition, and the syncer applies the Program
// to every object and reports a *RuleError as an Event.
//
// Directions. Up rules shape the provider copy of a consumer object: the
// expression sees object (the consumer object) and paths are confined to
// .spec. Down rules shape the status going to the consumer: the expression
// sees object (the provider object) and consumer (the consumer object as it
// is) and paths are confined to .status. No rule can reach metadata (kbind's
// markers, name, namespace), apiVersion, kind, or another object.
//
// Paths are dotted field names, the grammar of a relatedResources
// fieldPath: ^[.]spec([.][A-Za-z_][A-Za-z0-9_-]*)+$ up and the same with
// status down. No list indexes, wildcards, or the bare root.
//
// Expressions are compiled in the CEL environment of the Kubernetes API
// server (k8s.io/apiserver pkg/cel/environment, its base environment and
// Kubernetes libraries at the compatibility version of the linked release),
// with object and consumer typed dyn, and with the static cost limit the
// API server applies to CRD validation rules: an estimated cost above
// StaticCostLimit is refused at Compile (sizes bounded by MaxElements).
//
// Cost. At Apply a Program runs under Limits: one evaluation stops at
// PerCall, and all rules on one object share PerObject. ClusterLimits, a
// ClusterBinding's (an administrator's rules), are the API server's:
// PerCallCostLimit and RuntimeCostBudget. NamespacedLimits, a namespaced
// Binding's (a namespace user's rules, run on workers every namespace
// shares), are a thousandth and a two-thousandth of those:
// NamespacedPerCallCostLimit and NamespacedCostBudget, and what a rule
// writes is charged too (a value per value converted, a string a tenth of
// its length). Measured here: with cel-go v0.29.2's cost tracking, which
// the API server's environment turns on, a comprehension's running time
// grows with the square of its iterations (the tracker's value stack grows
// each iteration and is searched), so a rule iterating a list of 150,000
// items ran 35 s before the per-call limit of 1,000,000 stopped it (1,000
// items: 5 ms; 10,000: 0.15 s; 30,000: 2 s). The API server evaluates its
// rules the same way. Under NamespacedLimits the worst spread of 32 rules
// costs 2.3 to 3.5 ms per object (BenchmarkApplyWorstNamespaced).
//
// What no cost limit reaches, measured on the largest object (1.5 MiB):
//   - cel-go copies a map's keys before a comprehension iterates it, and
//     charges nothing for that: 32 rules that each iterate a map of
//     196,608 keys and stop at once took 200 ms per object. Maps of
//     unstructured content are therefore iterated in place
//     (objectAdapter): 0.06 ms.
//   - A rule's value is converted to unstructured content, which took
//     1 s per object for 32 rules returning the largest list
//     (object.spec.items, cost 2 to evaluate). Under NamespacedLimits
//     conversion is charged (above): 0.2 ms.
//   - A library function is charged when it returns: one regular
//     expression over a 1.5 MiB string runs about 40 ms before the object
//     fails; it stops the object, so once per object and Apply.
//   - Some costs the tracker misses (the API server's rules share them):
//     s.charAt(i) costs 1 and walks the string (4 ms at 700,000), and
//     s + s of the same field costs nothing for its copy; 32 such rules
//     take about 140 ms on the largest string.
//
// Loops. A down rule may not read a field of the consumer object that a
// down rule writes or deletes (issue #34): the status it writes goes to the
// consumer, the consumer's update runs the rules again, and a rule reading
// its own output would write a new value every round. Compile finds what a
// rule reads of consumer by walking the checked AST: every occurrence of
// the identifier consumer is followed up through the field selections and
// constant-string indexes applied to it — consumer.status.a.b,
// has(consumer.status.a) (a presence test reads the field as much as a
// select does), consumer["status"]["a"], consumer.?status.a,
// consumer[?"status"] — and the longest such chain is what that occurrence
// reads. A read conflicts with a written or deleted path when either is a
// prefix of the other: reading consumer.status reads every written field
// below it, reading consumer.status.a.b reads part of a written
// consumer.status.a. The check is conservative and refuses what it cannot
// prove harmless:
//   - consumer used whole — passed to a function, put in a list or map,
//     compared, iterated — reads everything and conflicts with every
//     written path;
//   - a chain broken by a non-constant or non-string index (consumer[k],
//     consumer.status[k], consumer.status.list[0]) reads everything below
//     where it breaks, since the index could name a written field;
//   - a comprehension variable named consumer counts as the consumer.
//
// Reading the consumer's metadata or spec, or a status field no down rule
// writes, is allowed.
//
// Apply is all or nothing: it works on a copy-on-write draft of the target
// and commits only when every rule succeeded, and it never modifies object,
// consumer or any map nested in the target in place (the target may share
// maps with object). Results become unstructured content: map[string]any,
// []any, string, int64, float64, bool and nil; timestamps, durations and
// quantities become their strings; bytes, NaN, optionals, non-string map
// keys and the other library types (IP, CIDR, URL, semver) are refused.
//
// Cost: BenchmarkApply (one set rule on a small object) measured 2,700 to
// 3,500 ns/op, 1,592 B and 18 allocations per op, on the shared 2-core
// development machine (6,000 to 12,000 ns/op while it was busier).
package mutation
