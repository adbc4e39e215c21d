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

package suite

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/e2e/harness"
)

// relatedFeature: a ConfigMap copied up, a Secret copied down, rotation
// both ways, a foreign target left alone and reported, copies removed on
// unbind.
func relatedFeature() features.Feature {
	const ns = "related"
	return features.New("related resources both ways").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("sprockets", "Sprocket", "example.org", "Namespaced", true)+"---\n"+namespaces(ns))
			s.Apply(ctx, t, harness.ProviderContext, `apiVersion: v1
kind: Secret
metadata: {name: sprocket-creds, namespace: related, labels: {app: sprocket}}
stringData: {password: first}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shared-config, namespace: related}
data: {owner: provider-team}
`)
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(ns)+`apiVersion: v1
kind: ConfigMap
metadata: {name: sprocket-config, namespace: related}
data: {teeth: "12"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shared-config, namespace: related}
data: {owner: me}
---
`+clusterBinding("sprockets", connection, `  relatedResources:
  - {resource: configmaps, direction: FromConsumer, selector: {names: [sprocket-config, shared-config]}}
  - {resource: secrets, direction: FromProvider, selector: {labelSelector: {matchLabels: {app: sprocket}}}}
`, "sprockets.example.org"))
			waitReady(ctx, t, "clusterbinding/sprockets")
			return ctx
		}).
		Assess("FromConsumer copies up, FromProvider copies down", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventuallyJSONPath(ctx, t, "12", "{.data.teeth}", provider, "-n", ns, "get", "configmap", "sprocket-config")
			got := jsonpath(ctx, t, `{.metadata.labels.core\.kbind\.io/managed}/{.metadata.annotations.core\.kbind\.io/related-binding}`, provider, "-n", ns, "get", "configmap", "sprocket-config")
			if len(got) < len("true/x") || got[:5] != "true/" {
				t.Errorf("related copy markers: %q", got)
			}
			eventuallyJSONPath(ctx, t, "Zmlyc3Q=", "{.data.password}", consumer, "-n", ns, "get", "secret", "sprocket-creds")
			// Source labels are not copied; the copy is marked as kbind's.
			if got := jsonpath(ctx, t, `{.metadata.labels.app}/{.metadata.labels.core\.kbind\.io/managed}`, consumer, "-n", ns, "get", "secret", "sprocket-creds"); got != "/true" {
				t.Errorf("consumer copy labels: %q", got)
			}
			return ctx
		}).
		Assess("rotation is carried by watches", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, provider, "-n", ns, "patch", "secret", "sprocket-creds", "--type=merge", "-p", `{"stringData":{"password":"second"}}`)
			eventuallyJSONPath(ctx, t, "c2Vjb25k", "{.data.password}", consumer, "-n", ns, "get", "secret", "sprocket-creds")
			s.Run(ctx, t, consumer, "-n", ns, "patch", "configmap", "sprocket-config", "--type=merge", "-p", `{"data":{"teeth":"16"}}`)
			eventuallyJSONPath(ctx, t, "16", "{.data.teeth}", provider, "-n", ns, "get", "configmap", "sprocket-config")
			return ctx
		}).
		Assess("a foreign target is left alone and reported", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventuallyJSONPath(ctx, t, "1", "{.status.relatedResources.conflicts}", consumer, "get", "clusterbinding", "sprockets")
			s.EventuallyOutput(ctx, t, harness.Contains("shared-config"), consumer, "get", "events", "-A", "--field-selector", "involvedObject.kind=ClusterBinding,involvedObject.name=sprockets")
			if got := jsonpath(ctx, t, "{.data.owner}", provider, "-n", ns, "get", "configmap", "shared-config"); got != "provider-team" {
				t.Errorf("foreign ConfigMap overwritten: %q", got)
			}
			return ctx
		}).
		Assess("removing an entry deletes the copies it made, and only those", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "patch", "clusterbinding", "sprockets", "--type=json", "-p",
				`[{"op":"remove","path":"/spec/relatedResources/1"}]`)
			s.Gone(ctx, t, consumer, "-n", ns, "secret", "sprocket-creds")
			s.Run(ctx, t, provider, "-n", ns, "get", "secret", "sprocket-creds") // the source stays
			s.Run(ctx, t, provider, "-n", ns, "get", "configmap", "sprocket-config")
			return ctx
		}).
		Assess("unbind deletes the copies, not the foreign target", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "sprockets", "--timeout=90s")
			s.Gone(ctx, t, provider, "-n", ns, "configmap", "sprocket-config")
			s.Run(ctx, t, provider, "-n", ns, "get", "configmap", "shared-config")
			s.Run(ctx, t, consumer, "-n", ns, "get", "configmap", "sprocket-config") // sources stay
			s.Run(ctx, t, provider, "-n", ns, "get", "secret", "sprocket-creds")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "sprockets", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, provider, "delete", "namespace", ns, "--wait=false")
			return ctx
		}).Feature()
}
