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

package compat

import (
	"slices"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	const (
		removed  = "connections.core.kbind.io v1alpha1: .spec.secretRef.namespace: removed"
		goRemove = "go: ./core/v1alpha1.ConnectionSpec.AutoBind: removed"
		added    = "connections.core.kbind.io v1alpha1: .spec.secretRef.key: added"
	)
	changes := []Change{{Message: removed, Breaking: true}, {Message: goRemove, Breaking: true}, {Message: added}}
	accept := func(msg string) Exception { return Exception{Message: msg, Reason: "nobody set it", Issue: 39} }
	cases := []struct {
		name       string
		exceptions []Exception
		ok         bool
		breaking   []string
		accepted   []string
		stale      []string
	}{
		{
			name:     "no exceptions: every breaking change fails",
			breaking: []string{removed, goRemove},
		},
		{
			name:       "an exception matches its change exactly",
			exceptions: []Exception{accept(removed)},
			breaking:   []string{goRemove},
			accepted:   []string{removed},
		},
		{
			name:       "all accepted passes",
			exceptions: []Exception{accept(goRemove), accept(removed)},
			ok:         true,
			accepted:   []string{removed, goRemove},
		},
		{
			name:       "a stale exception fails",
			exceptions: []Exception{accept(goRemove), accept(removed), accept("connections.core.kbind.io v1alpha1: .spec.mode: removed")},
			accepted:   []string{removed, goRemove},
			stale:      []string{"connections.core.kbind.io v1alpha1: .spec.mode: removed"},
		},
		{
			name:       "an exception for a compatible change is stale",
			exceptions: []Exception{accept(goRemove), accept(removed), accept(added)},
			accepted:   []string{removed, goRemove},
			stale:      []string{added},
		},
		{
			name:       "a prefix is not a match",
			exceptions: []Exception{accept(goRemove), accept(strings.TrimSuffix(removed, ": removed"))},
			breaking:   []string{removed},
			accepted:   []string{goRemove},
			stale:      []string{strings.TrimSuffix(removed, ": removed")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(changes, tc.exceptions)
			if v.OK() != tc.ok {
				t.Errorf("OK() = %v, want %v", v.OK(), tc.ok)
			}
			var breaking, accepted, stale []string
			for _, c := range v.Breaking {
				breaking = append(breaking, c.Message)
			}
			for _, a := range v.Accepted {
				accepted = append(accepted, a.Change.Message)
			}
			for _, e := range v.Stale {
				stale = append(stale, e.Message)
			}
			if !slices.Equal(breaking, tc.breaking) || !slices.Equal(accepted, tc.accepted) || !slices.Equal(stale, tc.stale) {
				t.Errorf("breaking %q accepted %q stale %q\nwant     %q accepted %q stale %q", breaking, accepted, stale, tc.breaking, tc.accepted, tc.stale)
			}
			if len(v.Compatible) != 1 || v.Compatible[0].Message != added {
				t.Errorf("compatible %v, want only %q", v.Compatible, added)
			}
		})
	}
}

func TestParseExceptions(t *testing.T) {
	cases := []struct {
		name string
		file string
		want int
		err  string
	}{
		{name: "empty list", file: "exceptions: []\n"},
		{name: "one entry", file: "exceptions:\n- message: 'x: removed'\n  reason: renamed before any user\n  issue: 39\n", want: 1},
		{name: "no reason", file: "exceptions:\n- message: 'x: removed'\n  issue: 39\n", err: "add reason"},
		{name: "no issue", file: "exceptions:\n- message: 'x: removed'\n  reason: r\n", err: "add issue"},
		{name: "no message", file: "exceptions:\n- reason: r\n  issue: 39\n", err: "add message"},
		{name: "listed twice", file: "exceptions:\n- {message: a, reason: r, issue: 1}\n- {message: a, reason: r, issue: 1}\n", err: "listed twice"},
		{name: "unknown key", file: "exceptions:\n- {message: a, reason: r, issue: 1, id: x}\n", err: "unknown field"},
		{name: "not a list", file: "exceptions: a\n", err: "want a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseExceptions([]byte(tc.file))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			case tc.err == "" && len(got) != tc.want:
				t.Fatalf("%d exceptions, want %d", len(got), tc.want)
			}
		})
	}
}
