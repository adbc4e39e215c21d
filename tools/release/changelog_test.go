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
