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

package clusterconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: s3cr3t-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`

func TestLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, source, err := Load("consumer", file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || source != "kubeconfig "+file {
		t.Errorf("host %q, source %q", cfg.Host, source)
	}
	if !cfg.DisableCompression {
		t.Error("responses of the cluster the binary runs in are to be uncompressed")
	}

	if _, _, err := Load("consumer", filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "loading the consumer cluster configuration from") {
		t.Errorf("missing file: %v", err)
	}
	// Outside a Pod and without --kubeconfig the error says what to set.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, _, err := Load("provider", ""); err == nil || !strings.Contains(err.Error(), "set --kubeconfig when running outside a Pod") {
		t.Errorf("no configuration: %v", err)
	}
}
