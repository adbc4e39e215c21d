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

package upgrade

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// exception is one intended one-time change an upgrade may write (a new
// annotation, say), with the issue that introduced it.
type exception struct {
	Cluster  string `json:"cluster"`  // consumer or provider
	Resource string `json:"resource"` // e.g. widgets, secrets
	Change   string `json:"change"`   // as the test names it, e.g. metadata.annotations[core.kbind.io/x]
	Reason   string `json:"reason"`
	Issue    int    `json:"issue"`
}

func loadExceptions(file string) ([]exception, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []exception
	if err := yaml.UnmarshalStrict(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i, e := range out {
		if e.Cluster == "" || e.Resource == "" || e.Change == "" || e.Reason == "" || e.Issue == 0 {
			return nil, fmt.Errorf("%s: entry %d needs cluster, resource, change, reason and issue", file, i+1)
		}
	}
	return out, nil
}

// unexpected is the writes not every change of which an exception names.
func unexpected(writes []write, exceptions []exception) []write {
	var out []write
	for _, w := range writes {
		for _, c := range w.changes {
			if !excepted(w, c, exceptions) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

func excepted(w write, change string, exceptions []exception) bool {
	for _, e := range exceptions {
		if e.Cluster == w.cluster && e.Resource == w.resource && e.Change == change {
			return true
		}
	}
	return false
}
