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

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		version, tag, wantErr string
	}{
		{"0.2.0", "", ""},
		{"0.2.0", "v0.2.0", ""},
		{"1.0.0-rc.1", "v1.0.0-rc.1", ""},
		{"0.0.0-dev+1a2b3c4", "", ""},
		{"0.2.0", "v0.2.1", "HEAD is tagged v0.2.1 but the release is 0.2.0"},
		{"v0.2.0", "", "is not MAJOR.MINOR.PATCH"},
		{"0.2", "", "is not MAJOR.MINOR.PATCH"},
		{"00.2.0", "", "is not MAJOR.MINOR.PATCH"},
	} {
		err := checkVersion(tc.version, tc.tag)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("checkVersion(%q, %q) = %v, want %q", tc.version, tc.tag, err, tc.wantErr)
		}
	}
}

func TestConsistent(t *testing.T) {
	ok := []stamped{{"chart konnector version", "0.2.0"}, {"binary konnector", "0.2.0"}}
	if err := consistent("0.2.0", ok); err != nil {
		t.Errorf("consistent: %v", err)
	}
	bad := append(ok, stamped{"binary kubectl-kbind", "0.1.0"}, stamped{"chart backend appVersion", "dev"})
	err := consistent("0.2.0", bad)
	if err == nil || !strings.Contains(err.Error(), `binary kubectl-kbind says "0.1.0"; chart backend appVersion says "dev"`) {
		t.Errorf("consistent = %v, want both disagreements named", err)
	}
}

func TestImageTag(t *testing.T) {
	if got := imageTag("0.0.0-dev+1a2b3c4"); got != "0.0.0-dev_1a2b3c4" {
		t.Errorf("imageTag = %q", got)
	}
	if got := imageTag("0.2.0"); got != "0.2.0" {
		t.Errorf("imageTag = %q", got)
	}
}
