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

// addSizeProperty is a JSON patch giving a test CRD's spec a typed
// property: a schema change on the provider.
const addSizeProperty = `[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties","value":{"size":{"type":"integer"}}}]`

// sizePath prints the type of spec.size in a consumer CRD's first version.
const sizePath = "{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.type}"

// schemaSourceFeature: the CRD source serves every version the provider
// serves (conversion None); the OpenAPI source
// synthesizes a CRD from /openapi/v3 and (beyond) refreshes it; Auto picks
// CRD where there are exports and falls through to OpenAPI where there
// are none.
func schemaSourceFeature() features.Feature {
	return features.New("schema source CRD, OpenAPI and Auto").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, twoVersionCRD+"---\n"+harness.CRDManifest("things", "Thing", "openapi.example.org", "Namespaced", false))
			s.Apply(ctx, t, harness.ProviderBContext, harness.CRDManifest("bolts", "Bolt", "b.example.org", "Namespaced", false)+"---\n"+
				harness.CRDManifest("nuts", "Nut", "b.example.org", "Namespaced", false))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("schema"))
			return ctx
		}).
		Assess("CRD source: every served version, no conversion, kbind's markers", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, clusterBinding("engines", connection, "", "engines.example.org"))
			waitReady(ctx, t, "clusterbinding/engines")
			got := jsonpath(ctx, t, `{.spec.versions[*].name}/{.spec.conversion.strategy}/{.metadata.annotations.core\.kbind\.io/connection}`, consumer, "get", "crd", "engines.example.org")
			if got != "v1alpha1 v1/None/provider" {
				t.Errorf("consumer CRD versions/conversion/connection: %q, want v1alpha1 v1/None/provider (every served version)", got)
			}
			s.Apply(ctx, t, harness.ConsumerContext, "apiVersion: example.org/v1\nkind: Engine\nmetadata: {name: e1, namespace: schema}\nspec: {hp: 90}\n")
			eventuallyJSONPath(ctx, t, "90", "{.spec.hp}", provider, "-n", "schema", "get", "engines.v1.example.org", "e1")
			// An object created at the version that is not stored syncs too.
			s.Apply(ctx, t, harness.ConsumerContext, "apiVersion: example.org/v1alpha1\nkind: Engine\nmetadata: {name: e0, namespace: schema}\nspec: {hp: 80}\n")
			eventuallyJSONPath(ctx, t, "80", "{.spec.hp}", provider, "-n", "schema", "get", "engines.v1.example.org", "e0")
			return ctx
		}).
		Assess("CRD source: a storage-version change keeps every object syncing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The provider now stores v1alpha1 (conversion None); updatePolicy
			// Always follows.
			s.Run(ctx, t, provider, "patch", "crd", "engines.example.org", "--type=json", "-p",
				`[{"op":"replace","path":"/spec/versions/0/storage","value":true},{"op":"replace","path":"/spec/versions/1/storage","value":false}]`)
			eventuallyJSONPath(ctx, t, "v1alpha1", `{.spec.versions[?(@.storage==true)].name}`, consumer, "get", "crd", "engines.example.org")
			// Objects stored before the change, at either version, still sync;
			// new ones at either version too.
			s.Run(ctx, t, consumer, "-n", "schema", "patch", "engines.v1.example.org", "e1", "--type=merge", "-p", `{"spec":{"hp":95}}`)
			s.Run(ctx, t, consumer, "-n", "schema", "patch", "engines.v1alpha1.example.org", "e0", "--type=merge", "-p", `{"spec":{"hp":85}}`)
			s.Apply(ctx, t, harness.ConsumerContext, "apiVersion: example.org/v1\nkind: Engine\nmetadata: {name: e2, namespace: schema}\nspec: {hp: 70}\n")
			for name, hp := range map[string]string{"e1": "95", "e0": "85", "e2": "70"} {
				eventuallyJSONPath(ctx, t, hp, "{.spec.hp}", provider, "-n", "schema", "get", "engines.v1alpha1.example.org", name)
			}
			return ctx
		}).
		Assess("OpenAPI source: a synthesized CRD, refreshed on change", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, harness.ConnectionManifest("openapi", "openapi-kubeconfig", s.ProviderKubeconfig(harness.ProviderContext), "  schema: {source: OpenAPI}\n")+
				"---\n"+clusterBinding("things", "openapi", "", "things.openapi.example.org"))
			waitReady(ctx, t, "connection/openapi", "clusterbinding/things")
			exported := jsonpath(ctx, t, "{.status.activeSchemaSource} {.status.exportedAPIs[*].name}", consumer, "get", "connection", "openapi")
			mustContain(t, exported, "OpenAPI ", "things.openapi.example.org")
			mustNotContain(t, exported, "deployments.apps", "leases.coordination.k8s.io")
			s.Apply(ctx, t, harness.ConsumerContext, object("openapi.example.org", "Thing", "schema", "t1", "{size: 1}"))
			eventuallyJSONPath(ctx, t, "1", "{.spec.size}", provider, "-n", "schema", "get", "things.openapi.example.org", "t1")
			// (beyond) Always refreshes an OpenAPI-synthesized CRD too.
			s.Run(ctx, t, provider, "patch", "crd", "things.openapi.example.org", "--type=json", "-p", addSizeProperty)
			eventuallyJSONPath(ctx, t, "integer", sizePath, consumer, "get", "crd", "things.openapi.example.org")
			return ctx
		}).
		Assess("Auto: CRD where CRDs are exported, OpenAPI where none are", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventuallyJSONPath(ctx, t, "CRD", "{.status.activeSchemaSource}", consumer, "get", "connection", connection)
			s.Apply(ctx, t, harness.ConsumerContext, harness.ConnectionManifest("auto-b", "auto-b-kubeconfig", s.ProviderKubeconfig(harness.ProviderBContext), ""))
			waitReady(ctx, t, "connection/auto-b")
			out := jsonpath(ctx, t, "{.status.activeSchemaSource} {.status.exportedAPIs[*].name}", consumer, "get", "connection", "auto-b")
			mustContain(t, out, "OpenAPI ", "bolts.b.example.org", "nuts.b.example.org")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "engines", "things", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "delete", "connection", "openapi", "auto-b", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "openapi-kubeconfig", "auto-b-kubeconfig", "--ignore-not-found", "--timeout=60s")
			s.Gone(ctx, t, consumer, "crd", "engines.example.org")
			s.Gone(ctx, t, consumer, "crd", "things.openapi.example.org")
			s.Gone(ctx, t, provider, "-n", "schema", "engines.v1.example.org", "e1")
			s.Gone(ctx, t, provider, "-n", "schema", "engines.v1.example.org", "e0")
			s.Gone(ctx, t, provider, "-n", "schema", "things.openapi.example.org", "t1")
			return ctx
		}).Feature()
}

// twoVersionCRD serves v1alpha1 and stores v1 (conversion None): the CRD
// source serves both and stores v1.
const twoVersionCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: engines.example.org
  labels: {core.kbind.io/exported: "true"}
spec:
  group: example.org
  scope: Namespaced
  names: {plural: engines, singular: engine, kind: Engine, listKind: EngineList}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// policiesFeature: pullPolicy None and All, updatePolicy Always and Once.
func policiesFeature() features.Feature {
	return features.New("pullPolicy and updatePolicy").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("valves", "Valve", "example.org", "Namespaced", true)+"---\n"+
				harness.CRDManifest("pumps", "Pump", "example.org", "Namespaced", true)+"---\n"+
				harness.CRDManifest("dials", "Dial", "example.org", "Namespaced", true))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("policies"))
			return ctx
		}).
		Assess("pullPolicy None: Pending until the operator installs the CRD, which kbind never deletes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, harness.ConnectionManifest("none", "none-kubeconfig", s.ProviderKubeconfig(harness.ProviderContext), "  schema: {source: CRD, pullPolicy: None}\n")+
				"---\n"+clusterBinding("valves", "none", "", "valves.example.org"))
			waitReady(ctx, t, "connection/none")
			// (beyond) not a false success while the CRD is absent.
			eventuallyCondition(ctx, t, "Ready", "False", "Pending", []string{"valves.example.org", "not present"}, consumer, "get", "clusterbinding", "valves")
			if _, err := s.Kubectl(ctx, consumer, "get", "crd", "valves.example.org"); err == nil {
				t.Fatal("pullPolicy None created the CRD")
			}
			s.Apply(ctx, t, harness.ConsumerContext, harness.CRDManifest("valves", "Valve", "example.org", "Namespaced", false))
			waitReady(ctx, t, "clusterbinding/valves")
			eventuallyJSONPath(ctx, t, "none", `{.metadata.annotations.core\.kbind\.io/connection}`, consumer, "get", "crd", "valves.example.org")
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Valve", "policies", "v1", "{open: true}"))
			eventuallyJSONPath(ctx, t, "true", "{.spec.open}", provider, "-n", "policies", "get", "valve", "v1")
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "valves", "--timeout=90s")
			s.Gone(ctx, t, provider, "-n", "policies", "valve", "v1")
			s.Run(ctx, t, consumer, "get", "crd", "valves.example.org") // not kbind's: kept
			s.Run(ctx, t, consumer, "delete", "crd", "valves.example.org", "--timeout=60s")
			return ctx
		}).
		Assess("pullPolicy All installs every export without a binding", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, providerB, "label", "crd", "nuts.b.example.org", "core.kbind.io/exported=true")
			s.Apply(ctx, t, harness.ConsumerContext, harness.ConnectionManifest("all-b", "all-b-kubeconfig", s.ProviderKubeconfig(harness.ProviderBContext), "  schema: {source: CRD, pullPolicy: All}\n"))
			waitReady(ctx, t, "connection/all-b")
			eventuallyJSONPath(ctx, t, "all-b", `{.metadata.annotations.core\.kbind\.io/connection}`, consumer, "get", "crd", "nuts.b.example.org")
			if out, err := s.Kubectl(ctx, consumer, "get", "crd", "bolts.b.example.org"); err == nil {
				t.Errorf("an unexported CRD was installed: %s", out)
			}
			return ctx
		}).
		Assess("updatePolicy Always follows the provider, Once keeps the first schema", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, harness.ConnectionManifest("once", "once-kubeconfig", s.ProviderKubeconfig(harness.ProviderContext), "  schema: {updatePolicy: Once}\n")+
				"---\n"+clusterBinding("dials", "once", "", "dials.example.org")+"---\n"+clusterBinding("pumps", connection, "", "pumps.example.org"))
			waitReady(ctx, t, "clusterbinding/dials", "clusterbinding/pumps")
			onceHash := jsonpath(ctx, t, `{.metadata.annotations.core\.kbind\.io/schema-hash}`, consumer, "get", "crd", "dials.example.org")
			s.Run(ctx, t, provider, "patch", "crd", "dials.example.org", "--type=json", "-p", addSizeProperty)
			s.Run(ctx, t, provider, "patch", "crd", "pumps.example.org", "--type=json", "-p", addSizeProperty)
			eventuallyJSONPath(ctx, t, "integer", sizePath, consumer, "get", "crd", "pumps.example.org")
			// Both Connections rediscover every 2 s: wait for the Once
			// Connection to have seen the change, then check its CRD.
			s.EventuallyOutput(ctx, t, harness.Contains("True/AsExpected"), consumer, "get", "connection", "once", "-o", harness.ConditionPath("SchemaInSync"))
			s.Run(ctx, t, consumer, "wait", "--for=condition=Ready", "clusterbinding/dials", "--timeout=30s")
			if got := jsonpath(ctx, t, sizePath+`/{.metadata.annotations.core\.kbind\.io/schema-hash}`, consumer, "get", "crd", "dials.example.org"); got != "/"+onceHash {
				t.Errorf("updatePolicy Once changed the CRD: %q (hash was %s)", got, onceHash)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "dials", "pumps", "valves", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "delete", "connection", "none", "all-b", "once", "--ignore-not-found", "--timeout=90s")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "none-kubeconfig", "all-b-kubeconfig", "once-kubeconfig", "--ignore-not-found", "--timeout=60s")
			// Under All, kbind leaves the CRDs it pulled without a binding
			// (docs/bindings.md); the operator removes them.
			s.Run(ctx, t, consumer, "delete", "crd", "nuts.b.example.org", "--ignore-not-found", "--timeout=60s")
			s.Gone(ctx, t, consumer, "crd", "dials.example.org")
			s.Gone(ctx, t, consumer, "crd", "pumps.example.org")
			return ctx
		}).Feature()
}

// autoBindFeature: autoBind maintains a ClusterBinding named after the
// Connection, owned by it, and deletes it with the Connection.
func autoBindFeature() features.Feature {
	return features.New("autoBind").
		Assess("the Connection binds every export and unbinds on deletion", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, namespaces("autobind")+harness.ConnectionManifest("autobind", "autobind-kubeconfig", s.ProviderKubeconfig(harness.ProviderBContext), "  autoBind: true\n"))
			waitReady(ctx, t, "connection/autobind")
			s.EventuallyOutput(ctx, t, harness.Equals("Connection/autobind true nuts.b.example.org"), consumer, "get", "clusterbinding", "autobind",
				"-o", `jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.labels.core\.kbind\.io/managed} {.spec.apis[*].name}`)
			waitReady(ctx, t, "clusterbinding/autobind")
			s.Apply(ctx, t, harness.ConsumerContext, object("b.example.org", "Nut", "autobind", "n1", "{thread: m8}"))
			s.EventuallyOutput(ctx, t, harness.Equals("m8"), providerB, "-n", "autobind", "get", "nut", "n1", "-o", "jsonpath={.spec.thread}")
			s.Run(ctx, t, consumer, "delete", "connection", "autobind", "--timeout=90s")
			s.Gone(ctx, t, consumer, "clusterbinding", "autobind")
			s.Gone(ctx, t, consumer, "crd", "nuts.b.example.org")
			s.Gone(ctx, t, providerB, "-n", "autobind", "nut", "n1")
			s.Run(ctx, t, consumer, "-n", "kbind", "delete", "secret", "autobind-kubeconfig", "--timeout=60s")
			return ctx
		}).Feature()
}
