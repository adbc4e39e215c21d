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
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// pluginArchive is one platform's kubectl-kbind archive.
type pluginArchive struct {
	goos, goarch, file, sha256 string
}

// krewManifest is the krew index entry (krew.googlecontainertools.github.com/v1alpha2
// Plugin) for the plugin archives, each downloaded from baseURL/<file>.
func krewManifest(version, baseURL string, archives []pluginArchive) ([]byte, error) {
	platforms := make([]map[string]any, 0, len(archives))
	for _, a := range archives {
		bin := "kubectl-kbind"
		if a.goos == "windows" {
			bin += ".exe"
		}
		platforms = append(platforms, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]string{"os": a.goos, "arch": a.goarch}},
			"uri":      strings.TrimSuffix(baseURL, "/") + "/" + a.file,
			"sha256":   a.sha256,
			"bin":      bin,
		})
	}
	doc := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "kbind"},
		"spec": map[string]any{
			"version":          "v" + version,
			"homepage":         "https://github.com/kbind/kbind",
			"shortDescription": "Grant, inspect and diagnose kbind Connections and bindings",
			"description": "kubectl kbind onboards a consumer on a provider cluster (grant), shows what a consumer's\n" +
				"Connections and bindings sync (status, consumers) and diagnoses them (doctor).\n",
			"platforms": platforms,
		},
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("krew manifest: %w", err)
	}
	return out, nil
}
