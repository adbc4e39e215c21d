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

// Package bundle renders the consumer bundle of a grant: one YAML file
// with the kubeconfig Secret, the Connection (with its isolation) and a
// ClusterBinding, each protected from deletion, ready for
// `kubectl apply -f` on the consumer.
package bundle

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Bundle is what the consumer applies.
type Bundle struct {
	// Consumer names the consumer the grant is for (a comment only).
	Consumer string
	// Connection names the Connection, its Secret (<connection>-kubeconfig)
	// and its ClusterBinding.
	Connection      string
	SecretNamespace string
	Isolation       kbindv1alpha1.Isolation
	// Namespace is the consumer's own provider namespace: the kubeconfig's
	// context namespace, where the heartbeat Lease of a None Connection
	// lives.
	Namespace string
	// IgnoreProviderEvents makes the ClusterBinding leave the provider's
	// Events on the provider (providerEvents: Ignore): the grant did not
	// let the consumer read them.
	IgnoreProviderEvents bool
	// APIs are "<plural>.<group>" names.
	APIs []string
	// Server, CAData and Token make the provider kubeconfig.
	Server string
	CAData []byte
	Token  string
}

// Kubeconfig is the provider kubeconfig of the bundle: one cluster, one
// token user, one context, credentials inline.
func (b Bundle) Kubeconfig() ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["provider"] = &clientcmdapi.Cluster{Server: b.Server, CertificateAuthorityData: b.CAData}
	kc.AuthInfos[b.Consumer] = &clientcmdapi.AuthInfo{Token: b.Token}
	kc.Contexts["provider"] = &clientcmdapi.Context{Cluster: "provider", AuthInfo: b.Consumer, Namespace: b.Namespace}
	kc.CurrentContext = "provider"
	return clientcmd.Write(*kc)
}

// YAML renders the bundle.
func (b Bundle) YAML() ([]byte, error) {
	kubeconfig, err := b.Kubeconfig()
	if err != nil {
		return nil, err
	}
	secretName := b.Connection + "-kubeconfig"
	apis := make([]kbindv1alpha1.APIReference, 0, len(b.APIs))
	for _, a := range b.APIs {
		apis = append(apis, kbindv1alpha1.APIReference{Name: a})
	}
	// Every object of the bundle is protected from deletion by accident
	// (kubectl delete -f, a GitOps prune): the Connection and the
	// ClusterBinding by spec.deletionProtection, the Secret by the label
	// the konnector chart's policy reads (docs/bindings.md#deletion-protection);
	// kubectl kbind unbind turns it off and deletes.
	bindingSpec := kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: b.Connection}, APIs: apis, DeletionProtection: true}
	if b.IgnoreProviderEvents {
		bindingSpec.ProviderEvents = kbindv1alpha1.ProviderEventsIgnore
	}
	objs := []any{
		&corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: b.SecretNamespace, Name: secretName,
				Labels: map[string]string{kbindv1alpha1.DeletionProtectionLabel: "true"}},
			StringData: map[string]string{kbindv1alpha1.DefaultKubeconfigKey: string(kubeconfig)},
		},
		&kbindv1alpha1.Connection{
			TypeMeta:   metav1.TypeMeta{APIVersion: kbindv1alpha1.GroupVersion.String(), Kind: "Connection"},
			ObjectMeta: metav1.ObjectMeta{Name: b.Connection},
			Spec: kbindv1alpha1.ConnectionSpec{
				KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: b.SecretNamespace, Name: secretName},
				Isolation:           b.Isolation,
				DeletionProtection:  true,
			},
		},
		&kbindv1alpha1.ClusterBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: kbindv1alpha1.GroupVersion.String(), Kind: "ClusterBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: b.Connection},
			Spec:       bindingSpec,
		},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# kbind consumer bundle for %q: apply it on the consumer cluster with `kubectl apply -f <this file>`.\n", b.Consumer)
	out.WriteString("# It holds a provider credential: keep it like a Secret.\n")
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(cleaned(data))
	}
	return []byte(out.String()), nil
}

// cleaned drops the empty fields typed objects marshal (creationTimestamp,
// status) so the bundle reads like a hand-written manifest.
func cleaned(data []byte) []byte {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return data
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return data
	}
	return out
}
