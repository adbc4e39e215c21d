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

package gettingstarted

import (
	"strings"
	"testing"
)

// TestParseBlocks: the page's convention, and what breaks it.
func TestParseBlocks(t *testing.T) {
	t.Parallel()
	fence := "```"
	for name, tc := range map[string]struct {
		page  string
		steps []string
		err   string
	}{
		"tagged": {page: fence + "sh e2e:one\na\n" + fence + "\ntext\n" + fence + "yaml\nb: 1\n" + fence + "\n" + fence + "sh no-e2e:pod\nc\n" + fence + "\n" + fence + "sh e2e:two\nd\ne\n" + fence + "\n",
			steps: []string{"one", "", "two"}},
		"indented fence": {page: "- item\n  " + fence + "sh e2e:one\n  a\n  " + fence + "\n", steps: []string{"one"}},
		"untagged":       {page: fence + "sh\na\n" + fence + "\n", err: "line 1: ```sh: a shell block is tagged e2e:<step>"},
		"unknown reason": {page: fence + "sh no-e2e:later\na\n" + fence + "\n", err: "line 1: ```sh no-e2e:later"},
		"bad step name":  {page: fence + "sh e2e:One\na\n" + fence + "\n", err: "line 1: ```sh e2e:One"},
		"duplicate step": {page: fence + "sh e2e:one\na\n" + fence + "\n" + fence + "sh e2e:one\nb\n" + fence + "\n", err: "line 4: step one is tagged on line 1 already"},
		"unclosed":       {page: fence + "sh e2e:one\na\n", err: "line 1: the fence is never closed"},
		"inline fence":   {page: "run ` " + fence + "sh e2e:<step> ` blocks\n", steps: nil},
	} {
		t.Run(name, func(t *testing.T) {
			blocks, err := parseBlocks(tc.page)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var steps []string
			for _, b := range blocks {
				steps = append(steps, b.Step())
			}
			if strings.Join(steps, ",") != strings.Join(tc.steps, ",") {
				t.Errorf("steps %q, want %q", steps, tc.steps)
			}
		})
	}
	blocks, _ := parseBlocks(fence + "sh e2e:one\nkubectl get x \\\n  -o name\n" + fence + "\n")
	if blocks[0].Body != "kubectl get x \\\n  -o name\n" || blocks[0].Line != 1 {
		t.Errorf("body %q, line %d", blocks[0].Body, blocks[0].Line)
	}
}

func TestSubstitute(t *testing.T) {
	t.Parallel()
	values := map[string]string{"<provider-server>": "https://127.0.0.1:6443"}
	got, err := substitute("kubectl kbind grant a --server <provider-server> > a.yaml\n", values)
	if err != nil || got != "kubectl kbind grant a --server https://127.0.0.1:6443 > a.yaml\n" {
		t.Errorf("%q, %v", got, err)
	}
	if _, err := substitute("crane copy a:<version> b:<version>\n", values); err == nil || !strings.Contains(err.Error(), "<version>, <version>") {
		t.Errorf("an unknown placeholder: %v", err)
	}
}

// TestHelmFlags: the command lines of the page's helm blocks, as the
// test's helm reads them.
func TestHelmFlags(t *testing.T) {
	t.Parallel()
	f, err := parseHelmFlags(strings.Fields("konnector charts/konnector --kube-context consumer -n kbind --create-namespace --set rbac.boundResourceGroups={example.org} --set=installCRDs=false"))
	if err != nil {
		t.Fatal(err)
	}
	if f.kubeContext != "consumer" || f.namespace != "kbind" || !f.createNamespace || strings.Join(f.positional, " ") != "konnector charts/konnector" ||
		strings.Join(f.set, " ") != "rbac.boundResourceGroups={example.org} installCRDs=false" {
		t.Errorf("%+v", f)
	}
	if _, err := parseHelmFlags([]string{"x", "--wait"}); err == nil || !strings.Contains(err.Error(), "unknown flag: --wait") {
		t.Errorf("an unknown flag: %v", err)
	}
	if _, err := parseHelmFlags([]string{"x", "--set"}); err == nil {
		t.Error("--set without a value is accepted")
	}
}
