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

package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// column is a hostile tenant's isolation mode (grant's and the chart's
// credentials alike: the suite holds them equal).
type column string

const (
	colNamespace column = "Namespace"
	colPrefixed  column = "Prefixed"
	colNone      column = "None"
	colOverlap   column = "Prefixed, prefix extending the victim's"
)

var columns = []column{colNamespace, colPrefixed, colNone, colOverlap}

// allowance is what docs/isolation.md says a mode does not guarantee: the
// only reason an attempt may succeed.
type allowance struct{ id, text string }

var (
	readsBoundAPIs = allowance{"reads", "Prefixed and None credentials read the bound APIs in every namespace (RBAC cannot confine a read to a prefix): every tenant's objects of those APIs are readable; none of them is writable."}
	noneShares     = allowance{"shares", "None keeps consumer namespaces and names: None tenants share them, and can write each other's objects of a bound API outside the namespaces labelled for a tenant (their konnectors report OwnedByAnother instead of overwriting). Give None to one consumer per provider."}
	noneSquats     = allowance{"squats", "A None tenant can create a namespace or a cluster-scoped object under any name that does not exist yet and is not labelled for a tenant; a tenant that later needs that name reports a conflict (ForeignObjectExists) and writes nothing into it. Do not mix None with Prefixed tenants on one provider."}
	overlapSquats  = allowance{"overlap", "Prefixes that extend each other (grant refuses them; only a hand-installed chart can make them) can claim each other's future names, never what the other already has: the policy checks core.kbind.io/prefix on every namespace and cluster-scoped object."}
)

// allowances maps an attempt ("<whose> <what>") per mode to the statement
// of docs/isolation.md that allows it.
var allowances = map[column]map[string]allowance{
	colPrefixed: {
		"a Namespace-isolated tenant's get an object": readsBoundAPIs, "a Namespace-isolated tenant's list its objects": readsBoundAPIs,
		"a Namespace-isolated tenant's watch its objects": readsBoundAPIs,
	},
	colNone: {
		"a Namespace-isolated tenant's get an object": readsBoundAPIs, "a Namespace-isolated tenant's list its objects": readsBoundAPIs,
		"a Namespace-isolated tenant's watch its objects":                        readsBoundAPIs,
		"a None tenant's patch its object in a shared namespace":                 noneShares,
		"a Prefixed tenant's create a cluster-scoped object under its prefix":    noneSquats,
		"a Prefixed tenant's create a namespace under its prefix (squat)":        noneSquats,
		"the provider's create a namespace a future tenant needs (kbind-future)": noneSquats,
	},
	colOverlap: {
		"a Namespace-isolated tenant's get an object": readsBoundAPIs, "a Namespace-isolated tenant's list its objects": readsBoundAPIs,
		"a Namespace-isolated tenant's watch its objects":                     readsBoundAPIs,
		"a Prefixed tenant's create a cluster-scoped object under its prefix": overlapSquats,
		"a Prefixed tenant's create a namespace under its prefix (squat)":     overlapSquats,
	},
}

// checkAllowances fails every success docs/isolation.md does not allow,
// and every allowance that no longer succeeds (the docs would promise less
// than kbind gives, or the suite no longer tests what they say).
func checkAllowances(t *testing.T, attacks []attack, results map[column]map[string]outcome) {
	t.Helper()
	for _, col := range columns {
		for _, a := range attacks {
			key := a.group + " " + a.name
			got := results[col][key]
			_, documented := allowances[col][key]
			switch {
			case got == allowed && !documented:
				t.Errorf("ATTACK SUCCEEDED: %s tenant: %s — not allowed by docs/isolation.md", col, key)
			case got != allowed && !got.refused():
				t.Errorf("%s tenant: %s: %s", col, key, got)
			case got != allowed && documented:
				t.Errorf("%s tenant: %s was %s, but docs/isolation.md says it is allowed: tighten the docs", col, key, got)
			}
		}
	}
}

// renderTable is the markdown table of every attempt per mode, with the
// allowances as footnotes.
func renderTable(attacks []attack, results map[column]map[string]outcome) string {
	var b strings.Builder
	b.WriteString("| whose | attempt |")
	for _, col := range columns {
		fmt.Fprintf(&b, " %s |", col)
	}
	b.WriteString("\n|---|---|")
	for range columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	used := map[string]allowance{}
	for _, a := range attacks {
		key := a.group + " " + a.name
		fmt.Fprintf(&b, "| %s | %s |", a.group, a.name)
		for _, col := range columns {
			cell := string(results[col][key])
			if al, ok := allowances[col][key]; ok && results[col][key] == allowed {
				cell += " [" + al.id + "]"
				used[al.id] = al
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	texts := map[string]string{}
	for id, al := range used {
		texts[id] = al.text
	}
	b.WriteString(footnotes(texts))
	return b.String()
}

// footnotes renders the allowances a table used, by id: a blank line,
// then "- [id] text" per allowance, sorted by id.
func footnotes(texts map[string]string) string {
	ids := make([]string, 0, len(texts))
	for id := range texts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	b.WriteString("\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "- [%s] %s\n", id, texts[id])
	}
	return b.String()
}

// checkDocs holds the block named name of docs/isolation.md equal to
// content; KBIND_UPDATE_DOCS=1 rewrites it instead.
// docsMu serialises the reads and rewrites of docs/isolation.md.
var docsMu sync.Mutex

func checkDocs(t *testing.T, name, content string) {
	t.Helper()
	// The attack tests run in parallel and each holds its own block of
	// the one file: a rewrite reads and writes it whole.
	docsMu.Lock()
	defer docsMu.Unlock()
	path := filepath.Join("..", "..", "docs", "isolation.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- BEGIN "+name+" (generated by e2e/attack) -->\n", "<!-- END "+name+" -->"
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/isolation.md has no %q … %q block", strings.TrimSpace(begin), end)
	}
	current := doc[i+len(begin) : j]
	if current == content {
		return
	}
	if os.Getenv("KBIND_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+content+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the %s block of docs/isolation.md", name)
		return
	}
	t.Errorf("docs/isolation.md's %s table is not what the suite measured (KBIND_UPDATE_DOCS=1 rewrites it):\n%s", name, content)
}
