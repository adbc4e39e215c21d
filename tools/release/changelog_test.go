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

package main

import (
	"strings"
	"testing"
)

func TestChangelogSection(t *testing.T) {
	log := "# Changelog\n\n## Unreleased\n\n- next\n\n## 0.2.0 (2026-12-05)\n\n- shaping\n\n## [0.1.0]\n\n- first\n"
	for _, tc := range []struct{ version, want, wantErr string }{
		{"0.2.0", "## 0.2.0 (2026-12-05)\n\n- shaping\n", ""},
		{"0.1.0", "## [0.1.0]\n\n- first\n", ""},
		{"0.0.0-dev+1a2b3c4", "## Unreleased\n\n- next\n", ""},
		{"0.3.0", "", `no section "## 0.3.0"`},
		{"0.2", "", `no section "## 0.2"`},
	} {
		got, err := changelogSection(log, tc.version)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.version, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.version, got, err, tc.want)
		}
	}
}
