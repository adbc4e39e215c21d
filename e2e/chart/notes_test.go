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

package chart

import (
	"strings"
	"testing"
)

// TestNotesLeadToYourOwnClusters: the install notes name the image the
// release runs and how to use another registry, lead to the "Your own
// clusters" guide and to grant (with the Secret namespace the konnector
// reads, when grant's default is not one), and say whether deletion
// protection's policy is on.
func TestNotesLeadToYourOwnClusters(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		values    map[string]any
		want, not []string
	}{
		"defaults": {bound("example.org"), []string{
			"from the image ghcr.io/kbind/konnector:0.1.0:",
			"kbind publishes its images as ghcr.io/kbind/konnector:<version> (docs/images.md)",
			"--set image.repository=registry.example.com/kbind/konnector",
			"https://github.com/kbind/kbind/blob/main/docs/getting-started.md",
			"kubectl kbind --context <provider> export <plural>.<group>\n",
			"kubectl kbind --context <provider> grant <this-cluster> --apis <plural>.<group> > bundle.yaml\n",
			"kubectl apply -f bundle.yaml\n",
			"Deletion protection is on (deletionProtection.policy)",
			"kubectl kbind unbind <binding>",
		}, []string{"quickstart", "--secret-namespace", "policy is off"}},
		"own registry, other Secret namespace, policy off": {map[string]any{
			"rbac":               map[string]any{"boundResourceGroups": []any{"example.org"}},
			"image":              map[string]any{"repository": "registry.example.com/kbind/konnector", "tag": "0.1.0-rc.1"},
			"secretNamespaces":   []any{"platform", "kbind"},
			"deletionProtection": map[string]any{"policy": false},
		}, []string{
			"from the image registry.example.com/kbind/konnector:0.1.0-rc.1:",
			"--apis <plural>.<group> --secret-namespace platform > bundle.yaml",
			"Deletion protection's policy is off (deletionProtection.policy=false)",
		}, []string{"Deletion protection is on"}},
	} {
		t.Run(name, func(t *testing.T) {
			n := notes(t, load(t), "konnector", tc.values)
			for _, w := range tc.want {
				if !strings.Contains(n, w) {
					t.Errorf("notes lack %q:\n%s", w, n)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(n, w) {
					t.Errorf("notes hold %q:\n%s", w, n)
				}
			}
		})
	}
}
