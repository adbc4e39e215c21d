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
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kbind/kbind/engine/test/testenv"
)

// HelmConfig is a Helm SDK configuration against a kubeconfig's context,
// releases stored as Secrets in namespace.
func HelmConfig(kubeconfig, context, namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Context, flags.Namespace = &kubeconfig, &context, ptr.To(namespace)
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// RenderChart renders chrt as release in namespace without a cluster, as
// `helm install --dry-run` would against the test control plane's
// Kubernetes version.
func RenderChart(chrt *chart.Chart, release, namespace string, values map[string]any) (*helmrelease.Release, error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.ReleaseName, install.Namespace = true, true, release, namespace
	minor := strings.Split(testenv.KubernetesVersion, ".")[1]
	install.KubeVersion = &chartutil.KubeVersion{Version: testenv.KubernetesVersion, Major: "1", Minor: minor}
	return install.Run(chrt, values)
}

// ManifestObjects splits a rendered manifest into its objects.
func ManifestObjects(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("rendered manifest does not parse: %w\n%s", err, doc)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out, nil
}

// Deployment returns the Deployment named name in a rendered manifest.
func Deployment(manifest, name string) (*appsv1.Deployment, error) {
	objs, err := ManifestObjects(manifest)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != name {
			continue
		}
		data, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal(data, d); err != nil {
			return nil, fmt.Errorf("decoding Deployment %s: %w", name, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("the manifest has no Deployment %s", name)
}
