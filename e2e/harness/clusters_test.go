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
	"errors"
	"testing"
)

func TestSelectMode(t *testing.T) {
	works := func(string, ...string) error { return nil }
	fails := func(string, ...string) error { return errors.New("no") }
	dockerOnly := func(name string, _ ...string) error {
		if name == "docker" {
			return nil
		}
		return errors.New("kind: not found")
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		probe   func(string, ...string) error
		want    Mode
		wantErr bool
	}{
		{"unset, docker and kind work", nil, works, Kind, false},
		{"unset, no docker", nil, fails, Local, false},
		{"auto, docker without kind", map[string]string{ClustersEnv: "auto"}, dockerOnly, Local, false},
		{"forced local where kind works", map[string]string{ClustersEnv: "local"}, works, Local, false},
		{"forced kind without docker", map[string]string{ClustersEnv: "kind"}, fails, Kind, false},
		{"typo", map[string]string{ClustersEnv: "knid"}, works, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectMode(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, tc.probe)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("SelectMode = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
