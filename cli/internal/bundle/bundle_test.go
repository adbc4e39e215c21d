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

package bundle

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestYAML(t *testing.T) {
	b := Bundle{Consumer: "team-a", Connection: "provider", SecretNamespace: "kbind",
		Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "kbind-team-a"},
		APIs:      []string{"widgets.example.org"}, Server: "https://provider.example:6443", CAData: []byte("ca"), Token: "t0ken"}
	data, err := b.YAML()
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents:\n%s", len(docs), data)
	}
	var secret struct {
		Metadata struct {
			Name, Namespace string
			Labels          map[string]string
		} `json:"metadata"`
		StringData map[string]string `json:"stringData"`
	}
	if err := yaml.Unmarshal([]byte(docs[0]), &secret); err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load([]byte(secret.StringData["kubeconfig"]))
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if kc.Clusters[ctx.Cluster].Server != b.Server || string(kc.Clusters[ctx.Cluster].CertificateAuthorityData) != "ca" || kc.AuthInfos[ctx.AuthInfo].Token != "t0ken" {
		t.Errorf("kubeconfig %+v", kc)
	}
	if secret.Metadata.Name != "provider-kubeconfig" || secret.Metadata.Namespace != "kbind" {
		t.Errorf("secret metadata %v", secret.Metadata)
	}
	// Every object is protected from deletion by accident: the Secret by
	// the label the chart's policy reads, the others by their field.
	if secret.Metadata.Labels[kbindv1alpha1.DeletionProtectionLabel] != "true" {
		t.Errorf("the Secret is not labelled %s=true: %v", kbindv1alpha1.DeletionProtectionLabel, secret.Metadata.Labels)
	}
	var conn kbindv1alpha1.Connection
	if err := yaml.Unmarshal([]byte(docs[1]), &conn); err != nil {
		t.Fatal(err)
	}
	if conn.Spec.Isolation != b.Isolation || conn.Spec.KubeconfigSecretRef.Name != "provider-kubeconfig" || !conn.Spec.DeletionProtection {
		t.Errorf("connection %+v", conn.Spec)
	}
	var cb kbindv1alpha1.ClusterBinding
	if err := yaml.Unmarshal([]byte(docs[2]), &cb); err != nil {
		t.Fatal(err)
	}
	if cb.Spec.ConnectionRef.Name != "provider" || len(cb.Spec.APIs) != 1 || cb.Spec.APIs[0].Name != "widgets.example.org" || !cb.Spec.DeletionProtection {
		t.Errorf("clusterbinding %+v", cb.Spec)
	}
	if strings.Contains(string(data), "creationTimestamp") || strings.Contains(string(data), "status:") {
		t.Errorf("the bundle carries empty server fields:\n%s", data)
	}
}
