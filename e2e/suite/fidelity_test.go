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
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kbind/kbind/e2e/harness"
)

const (
	fidelityNS  = "fidelity"
	databaseAPI = "databases.example.org"
)

// fidelityBinding binds databases with labels and annotations copied up
// and two related objects named by reference, one each way.
var fidelityBinding = clusterBinding("databases", connection, `  metadata:
    labels: [team]
    annotations: [example.org/]
  relatedResources:
  - resource: secrets
    direction: FromProvider
    reference: {api: `+databaseAPI+`, fieldPath: .spec.secretRef.name}
  - resource: configmaps
    direction: FromConsumer
    reference: {api: `+databaseAPI+`, fieldPath: .spec.configRef.name}
`, databaseAPI)

// providerEvent is an Event a provider controller records on a copy.
func providerEvent(name, object, uid, reason, message string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: %[1]s, namespace: %[2]s}
involvedObject: {apiVersion: example.org/v1alpha1, kind: Database, namespace: %[3]s, name: %[4]s, uid: %[5]s}
type: Warning
reason: %[6]s
message: %[8]q
source: {component: database-controller}
count: 1
firstTimestamp: %[7]q
lastTimestamp: %[7]q
`, name, fidelityNS, fidelityNS, object, uid, reason, time.Now().UTC().Format(time.RFC3339), message)
}

// forwardedEvents counts the Events kbind forwarded to a consumer Database.
func forwardedEvents(ctx context.Context, t *testing.T, object string) int {
	t.Helper()
	out := s.Run(ctx, t, consumer, "-n", fidelityNS, "get", "events", "-l", "core.kbind.io/managed=true",
		"--field-selector", "involvedObject.kind=Database,involvedObject.name="+object, "-o", "name")
	return len(strings.Fields(out))
}

// fidelityFeature: labels and annotations up (provider-set ones kept), the
// provider's Events on the consumer object (kubectl describe; a burst of
// 1000 bounded), and related objects named by a field, both ways, through
// create, a change of the field and delete (issue #18, parts 1–3; the
// versions part is in schemaSourceFeature).
func fidelityFeature() features.Feature {
	return features.New("sync fidelity: metadata, provider Events, related by reference").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ProviderContext, harness.CRDManifest("databases", "Database", "example.org", "Namespaced", true)+"---\n"+namespaces(fidelityNS))
			s.Apply(ctx, t, harness.ConsumerContext, namespaces(fidelityNS)+fidelityBinding)
			waitReady(ctx, t, "clusterbinding/databases")
			return ctx
		}).
		Assess("labels and annotations up; the provider's own kept", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Apply(ctx, t, harness.ConsumerContext, `apiVersion: example.org/v1alpha1
kind: Database
metadata:
  name: db1
  namespace: fidelity
  labels: {team: a, local: "yes"}
  annotations: {example.org/owner: alice, other.org/note: stays-home}
spec: {size: 1}
`)
			eventuallyJSONPath(ctx, t, "a//alice/", `{.metadata.labels.team}/{.metadata.labels.local}/{.metadata.annotations.example\.org/owner}/{.metadata.annotations.other\.org/note}`,
				provider, "-n", fidelityNS, "get", "databases", "db1")
			s.Run(ctx, t, provider, "-n", fidelityNS, "label", "databases", "db1", "controller=set-by-provider")
			s.Run(ctx, t, consumer, "-n", fidelityNS, "label", "databases", "db1", "team=b", "--overwrite")
			eventuallyJSONPath(ctx, t, "b/set-by-provider", "{.metadata.labels.team}/{.metadata.labels.controller}", provider, "-n", fidelityNS, "get", "databases", "db1")
			s.Run(ctx, t, consumer, "-n", fidelityNS, "label", "databases", "db1", "team-")
			eventuallyJSONPath(ctx, t, "/set-by-provider", "{.metadata.labels.team}/{.metadata.labels.controller}", provider, "-n", fidelityNS, "get", "databases", "db1")
			return ctx
		}).
		Assess("the provider's Events on the consumer object, a burst bounded", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			uid := jsonpath(ctx, t, "{.metadata.uid}", provider, "-n", fidelityNS, "get", "databases", "db1")
			s.Apply(ctx, t, harness.ProviderContext, providerEvent("db1.quota", "db1", uid, "ProvisioningFailed", "quota exceeded: 3 databases per team"))
			s.EventuallyOutput(ctx, t, harness.Contains("ProvisioningFailed", "quota exceeded: 3 databases per team", "database-controller (provider provider)"),
				consumer, "-n", fidelityNS, "describe", "databases", "db1")

			// 1000 distinct Events at once on the same copy.
			var burst strings.Builder
			for i := 0; i < 1000; i++ {
				burst.WriteString(providerEvent(fmt.Sprintf("db1.burst-%04d", i), "db1", uid, "Flapping", "flap "+strconv.Itoa(i)) + "---\n")
			}
			s.Run(ctx, t, provider, "create", "-f", s.WriteFile(t, burst.String()))
			// The forwarder decides a Kind's Events in order: once a later
			// Event on another object is through, the burst is decided.
			s.Apply(ctx, t, harness.ConsumerContext, object("example.org", "Database", fidelityNS, "db2", "{size: 2}"))
			uid2 := s.EventuallyOutput(ctx, t, func(out string) error {
				if out == "" {
					return fmt.Errorf("no copy yet")
				}
				return nil
			}, provider, "-n", fidelityNS, "get", "databases", "db2", "-o", "jsonpath={.metadata.uid}")
			s.Apply(ctx, t, harness.ProviderContext, providerEvent("db2.after", "db2", uid2, "Marker", "after the burst"))
			s.EventuallyOutput(ctx, t, harness.Contains("after the burst"), consumer, "-n", fidelityNS, "describe", "databases", "db2")
			n := forwardedEvents(ctx, t, "db1")
			t.Logf("1001 provider Events on db1: %d on the consumer", n)
			if n < 20 || n > 27 {
				t.Errorf("%d provider Events of 1001 forwarded to db1, want about 25 (the per-object burst)", n)
			}
			return ctx
		}).
		Assess("related objects by reference, both ways", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// FromConsumer: the ConfigMap a Database names goes up with it.
			s.Apply(ctx, t, harness.ConsumerContext, `apiVersion: v1
kind: ConfigMap
metadata: {name: db3-config, namespace: fidelity}
data: {tuning: fast}
---
`+object("example.org", "Database", fidelityNS, "db3", "{secretRef: {name: db3-conn}, configRef: {name: db3-config}}"))
			eventuallyJSONPath(ctx, t, "fast", "{.data.tuning}", provider, "-n", fidelityNS, "get", "configmap", "db3-config")
			// FromProvider: the Secret the provider's controller writes comes down.
			s.Apply(ctx, t, harness.ProviderContext, "apiVersion: v1\nkind: Secret\nmetadata: {name: db3-conn, namespace: fidelity}\nstringData: {password: one}\n")
			eventuallyJSONPath(ctx, t, "b25l", "{.data.password}", consumer, "-n", fidelityNS, "get", "secret", "db3-conn")

			// The fields change: the new objects follow, kbind's old copies go.
			s.Apply(ctx, t, harness.ProviderContext, "apiVersion: v1\nkind: Secret\nmetadata: {name: db3-conn2, namespace: fidelity}\nstringData: {password: two}\n")
			s.Apply(ctx, t, harness.ConsumerContext, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db3-config2, namespace: fidelity}\ndata: {tuning: safe}\n")
			s.Run(ctx, t, consumer, "-n", fidelityNS, "patch", "databases", "db3", "--type=merge", "-p",
				`{"spec":{"secretRef":{"name":"db3-conn2"},"configRef":{"name":"db3-config2"}}}`)
			eventuallyJSONPath(ctx, t, "dHdv", "{.data.password}", consumer, "-n", fidelityNS, "get", "secret", "db3-conn2")
			eventuallyJSONPath(ctx, t, "safe", "{.data.tuning}", provider, "-n", fidelityNS, "get", "configmap", "db3-config2")
			s.Gone(ctx, t, consumer, "-n", fidelityNS, "secret", "db3-conn")
			s.Gone(ctx, t, provider, "-n", fidelityNS, "configmap", "db3-config")
			// The sources stay where their owners put them.
			s.Run(ctx, t, provider, "-n", fidelityNS, "get", "secret", "db3-conn")
			s.Run(ctx, t, consumer, "-n", fidelityNS, "get", "configmap", "db3-config")

			// Deleting the owner deletes the copies kbind made.
			s.Run(ctx, t, consumer, "-n", fidelityNS, "delete", "databases", "db3", "--wait=false")
			s.Gone(ctx, t, consumer, "-n", fidelityNS, "secret", "db3-conn2")
			s.Gone(ctx, t, provider, "-n", fidelityNS, "configmap", "db3-config2")
			s.Run(ctx, t, provider, "-n", fidelityNS, "get", "secret", "db3-conn2")
			s.Run(ctx, t, consumer, "-n", fidelityNS, "get", "configmap", "db3-config2")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Run(ctx, t, consumer, "-n", fidelityNS, "delete", "databases", "--all", "--wait=true", "--timeout=90s")
			s.Run(ctx, t, consumer, "delete", "clusterbinding", "databases", "--wait=true", "--timeout=90s")
			return ctx
		}).Feature()
}
