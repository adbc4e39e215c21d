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

package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Dashboard is the part of a Grafana dashboard JSON the tests read: its
// template variables and its panels' queries.
type Dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is one dashboard panel; rows hold none of their own queries.
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *DatasourceRef `json:"datasource"`
	Targets    []Target       `json:"targets"`
	Panels     []Panel        `json:"panels"` // a collapsed row's
}

// Target is one query of a panel.
type Target struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource *DatasourceRef `json:"datasource"`
}

// DatasourceRef names the data source a panel or query uses.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Variable is a template variable; Query is a string or, in Grafana's
// newer form, an object with the query in "query".
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *DatasourceRef  `json:"datasource"`
}

// QueryString is the variable's query text, whichever form it is in.
func (v Variable) QueryString() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// LoadDashboard reads and decodes a dashboard JSON file.
func LoadDashboard(path string) (*Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	if err := json.Unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("dashboard %s does not parse: %w", path, err)
	}
	return d, nil
}

// AllPanels are the dashboard's panels, those inside collapsed rows
// included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Query is one panel query of a dashboard.
type Query struct {
	Panel string // "<panel title>/<refId>"
	Expr  string
}

// Queries are the queries of every panel, and of every query variable as
// the instant selector its label_values(...) reads (so a variable that
// names a metric no one serves fails as a panel would).
func (d *Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{Panel: p.Title + "/" + t.RefID, Expr: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if sel, ok := LabelValuesSelector(v.QueryString()); ok {
			out = append(out, Query{Panel: "variable $" + v.Name, Expr: sel})
		}
	}
	return out
}

var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// LabelValuesSelector returns the series selector of a Grafana
// label_values(selector, label) variable query.
func LabelValuesSelector(q string) (string, bool) {
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		return "", false
	}
	return m[1], true
}

var variableRef = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)\}?`)

// Variables are the names of the template variables an expression uses
// ("$x" and "${x}"), sorted, without repeats.
func Variables(expr string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}

// Expand replaces every template variable of expr by its value in values;
// a variable without a value is an error.
func Expand(expr string, values map[string]string) (string, error) {
	var missing []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		name := variableRef.FindStringSubmatch(ref)[1]
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for %s in %q", strings.Join(missing, ", "), expr)
	}
	return out, nil
}
