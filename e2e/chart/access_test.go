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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/testenv"
)

const accessChartDir = "../../charts/consumer-access"

// renderAccess renders the consumer-access chart as `helm install
// consumer-a charts/consumer-access -n kbind` would, by kind/name@namespace.
func renderAccess(t *testing.T, values map[string]any) (map[string]map[string]any, error) {
	t.Helper()
	c, err := loader.Load(accessChartDir)
	if err != nil {
		t.Fatal(err)
	}
	return renderChart(t, c, "consumer-a", values)
}

// accessValues are the values of consumer "a" with the isolation block
// and the API example.org/widgets, gadgets.
func accessValues(isolation map[string]any, more map[string]any) map[string]any {
	v := map[string]any{
		"consumer":  "a",
		"isolation": isolation,
		"apis":      []any{map[string]any{"group": "example.org", "resources": []any{"widgets", "gadgets"}}},
	}
	for k, val := range more {
		v[k] = val
	}
	return v
}

var (
	namespaceMode = map[string]any{"mode": "Namespace", "namespace": "tenant-a"}
	prefixedMode  = map[string]any{"mode": "Prefixed", "prefix": "a"}
	noneMode      = map[string]any{"mode": "None"}
)

func TestAccessLint(t *testing.T) {
	t.Parallel()
	lintChart(t, accessChartDir, accessValues(namespaceMode, nil), accessValues(prefixedMode, nil), accessValues(noneMode, nil))
}

// TestAccessRender: each mode grants exactly its documented objects
// (docs/isolation.md#permissions).
func TestAccessRender(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"Namespace", accessValues(namespaceMode, nil), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a", "Namespace/tenant-a",
			"Role/kbind-consumer-a.token@kbind", "Role/kbind-consumer-a@tenant-a", "RoleBinding/kbind-consumer-a.token@kbind", "RoleBinding/kbind-consumer-a@tenant-a",
			"ServiceAccount/kbind-consumer-a@kbind", "ValidatingAdmissionPolicy/kbind-consumer-a.token", "ValidatingAdmissionPolicyBinding/kbind-consumer-a.token",
		}},
		{"Namespace, related Secrets: the Secrets policy", accessValues(namespaceMode, map[string]any{"related": []any{"configmaps", "secrets"}}), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a", "Namespace/tenant-a",
			"Role/kbind-consumer-a.token@kbind", "Role/kbind-consumer-a@tenant-a", "RoleBinding/kbind-consumer-a.token@kbind", "RoleBinding/kbind-consumer-a@tenant-a",
			"ServiceAccount/kbind-consumer-a@kbind",
			"ValidatingAdmissionPolicy/kbind-consumer-a", "ValidatingAdmissionPolicy/kbind-consumer-a.token",
			"ValidatingAdmissionPolicyBinding/kbind-consumer-a", "ValidatingAdmissionPolicyBinding/kbind-consumer-a.token",
		}},
		{"Namespace, related Secrets, a user", accessValues(namespaceMode, map[string]any{"related": []any{"secrets"}, "user": "consumer-a"}), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a", "Namespace/tenant-a",
			"Role/kbind-consumer-a@tenant-a", "RoleBinding/kbind-consumer-a@tenant-a",
			"ValidatingAdmissionPolicy/kbind-consumer-a", "ValidatingAdmissionPolicyBinding/kbind-consumer-a",
		}},
		{"Namespace, related ConfigMaps only: no Secrets policy", accessValues(namespaceMode, map[string]any{"related": []any{"configmaps"}}), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a", "Namespace/tenant-a",
			"Role/kbind-consumer-a.token@kbind", "Role/kbind-consumer-a@tenant-a", "RoleBinding/kbind-consumer-a.token@kbind", "RoleBinding/kbind-consumer-a@tenant-a",
			"ServiceAccount/kbind-consumer-a@kbind", "ValidatingAdmissionPolicy/kbind-consumer-a.token", "ValidatingAdmissionPolicyBinding/kbind-consumer-a.token",
		}},
		{"Namespace, existing namespace, OpenAPI, no token renewal", accessValues(map[string]any{"mode": "Namespace", "namespace": "tenant-a", "createNamespace": false},
			map[string]any{"schemaSource": "OpenAPI", "tokenRenewal": map[string]any{"enabled": false}}), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a",
			"Role/kbind-consumer-a@tenant-a", "RoleBinding/kbind-consumer-a@tenant-a", "ServiceAccount/kbind-consumer-a@kbind",
		}},
		{"Prefixed", accessValues(prefixedMode, map[string]any{"related": []any{"secrets"}, "relatedClusterWide": true}), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a", "Namespace/a",
			"Role/kbind-consumer-a.token@kbind", "Role/kbind-consumer-a@a", "RoleBinding/kbind-consumer-a.token@kbind", "RoleBinding/kbind-consumer-a@a",
			"ServiceAccount/kbind-consumer-a@kbind",
			"ValidatingAdmissionPolicy/kbind-consumer-a", "ValidatingAdmissionPolicy/kbind-consumer-a.token",
			"ValidatingAdmissionPolicyBinding/kbind-consumer-a", "ValidatingAdmissionPolicyBinding/kbind-consumer-a.token",
		}},
		{"None, a user", accessValues(noneMode, map[string]any{"user": "consumer-a"}), []string{
			"ClusterRole/kbind-consumer-a", "ClusterRoleBinding/kbind-consumer-a", "Namespace/kbind-a",
			"Role/kbind-consumer-a@kbind-a", "RoleBinding/kbind-consumer-a@kbind-a",
			"ValidatingAdmissionPolicy/kbind-consumer-a", "ValidatingAdmissionPolicyBinding/kbind-consumer-a",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderAccess(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			got := keys(objs)
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("rendered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			// Leases and Events are never granted cluster-wide without consent.
			cluster, _ := yaml.Marshal(objs["ClusterRole/kbind-consumer-a"]["rules"])
			if strings.Contains(string(cluster), "leases") || strings.Contains(string(cluster), "events") {
				t.Errorf("the ClusterRole grants Leases or Events cluster-wide:\n%s", cluster)
			}
		})
	}
	objs, err := renderAccess(t, accessValues(namespaceMode, map[string]any{"related": []any{"secrets", "configmaps"}}))
	if err != nil {
		t.Fatal(err)
	}
	role, _ := yaml.Marshal(objs["Role/kbind-consumer-a@tenant-a"]["rules"])
	for _, want := range []string{"widgets", "gadgets", "leases", "secrets", "configmaps"} {
		if !strings.Contains(string(role), want) {
			t.Errorf("the Role misses %s:\n%s", want, role)
		}
	}
	cluster, _ := yaml.Marshal(objs["ClusterRole/kbind-consumer-a"]["rules"])
	if !strings.Contains(string(cluster), "kube-system") || strings.Contains(string(cluster), "widgets") {
		t.Errorf("the Namespace-mode ClusterRole grants more than the identity and CRD reads:\n%s", cluster)
	}
	// The Secrets policy of a user matches that user.
	objs, err = renderAccess(t, accessValues(namespaceMode, map[string]any{"related": []any{"secrets"}, "user": "consumer-a"}))
	if err != nil {
		t.Fatal(err)
	}
	if policy, _ := yaml.Marshal(objs["ValidatingAdmissionPolicy/kbind-consumer-a"]["spec"]); !strings.Contains(string(policy), `request.userInfo.username == "consumer-a"`) ||
		!strings.Contains(string(policy), "kubernetes.io/service-account-token") {
		t.Errorf("the Secrets policy of user consumer-a:\n%s", policy)
	}
	objs, err = renderAccess(t, accessValues(prefixedMode, map[string]any{"providerEventsClusterWide": true}))
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := yaml.Marshal(objs["ValidatingAdmissionPolicy/kbind-consumer-a"]["spec"])
	for _, want := range []string{`system:serviceaccount:kbind:kbind-consumer-a`, `variables.place == "a" || variables.place.startsWith("a-")`,
		`variables.namespacePrefix == "a"`} {
		if !strings.Contains(string(policy), want) {
			t.Errorf("the admission policy lacks %s:\n%s", want, policy)
		}
	}
	if cluster, _ := yaml.Marshal(objs["ClusterRole/kbind-consumer-a"]["rules"]); !strings.Contains(string(cluster), "events") {
		t.Errorf("providerEventsClusterWide grants no Events read:\n%s", cluster)
	}
	if labels := objs["Namespace/a"]["metadata"].(map[string]any)["labels"].(map[string]any); labels[kbindv1alpha1.PrefixLabel] != "a" || labels[access.ConsumerLabel] != "a" {
		t.Errorf("the Prefixed namespace's labels %v", labels)
	}
}

func TestAccessRefusesBadValues(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"no consumer":                     {map[string]any{"isolation": namespaceMode, "apis": []any{map[string]any{"group": "example.org", "resources": []any{"widgets"}}}}, "consumer"},
		"no apis":                         {map[string]any{"consumer": "a", "isolation": namespaceMode}, "apis"},
		"unknown mode":                    {accessValues(map[string]any{"mode": "Shared"}, nil), "/isolation/mode"},
		"namespace not a label":           {accessValues(map[string]any{"mode": "Namespace", "namespace": "Tenant_A"}, nil), "/isolation/namespace"},
		"unknown related kind":            {accessValues(namespaceMode, map[string]any{"related": []any{"pods"}}), "related"},
		"Namespace without namespace":     {accessValues(map[string]any{"mode": "Namespace"}, nil), "isolation.mode Namespace needs isolation.namespace"},
		"Prefixed without prefix":         {accessValues(map[string]any{"mode": "Prefixed"}, nil), "isolation.mode Prefixed needs isolation.prefix"},
		"related cluster-wide unasked":    {accessValues(prefixedMode, map[string]any{"related": []any{"secrets"}}), "kube-system's (service-account tokens, certificates) included"},
		"related with None":               {accessValues(noneMode, map[string]any{"related": []any{"secrets"}, "relatedClusterWide": true}), "None cannot be confined"},
		"reserved prefix":                 {accessValues(map[string]any{"mode": "Prefixed", "prefix": "kube"}, nil), `isolation.prefix "kube" is reserved`},
		"prefix extending a reserved one": {accessValues(map[string]any{"mode": "Prefixed", "prefix": "kbind-x"}, nil), "is reserved"},
		"isolation namespace kube-system": {accessValues(map[string]any{"mode": "Namespace", "namespace": "kube-system"}, nil), "cannot be the consumer's own namespace"},
		"token lifetime under 10m":        {accessValues(namespaceMode, map[string]any{"tokenRenewal": map[string]any{"maxLifetimeSeconds": 599}}), "maxLifetimeSeconds"},
		"no token audiences":              {accessValues(namespaceMode, map[string]any{"tokenRenewal": map[string]any{"audiences": []any{}}}), "audiences"},
		"isolation namespace = release":   {accessValues(map[string]any{"mode": "Namespace", "namespace": "kbind"}, nil), "the release namespace holding the ServiceAccount"},
		"Lease namespace default":         {accessValues(noneMode, map[string]any{"leaseNamespace": "default"}), "cannot be the consumer's own namespace"},
		"Events with Namespace isolation": {accessValues(namespaceMode, map[string]any{"providerEventsClusterWide": true}), "providerEventsClusterWide goes with"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderAccess(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("expected an error naming %q, got %v", tc.want, err)
			}
		})
	}
}

// TestAccessRefusesPrefixOverReleaseNamespace: a prefix that covers the
// namespace holding the ServiceAccounts would let the consumer write there.
func TestAccessRefusesPrefixOverReleaseNamespace(t *testing.T) {
	t.Parallel()
	c, err := loader.Load(accessChartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team", "team-sas"} {
		_, err := harness.RenderChart(c, "consumer-a", ns, accessValues(map[string]any{"mode": "Prefixed", "prefix": "team"}, nil))
		if want := "covers the release namespace " + ns; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("release namespace %s: %v, want an error naming %q", ns, err, want)
		}
	}
}

// TestAccessNotesToken: the NOTES' token command asks for the lifetime the
// token policy allows, and says the konnector renews it.
func TestAccessNotesToken(t *testing.T) {
	t.Parallel()
	c, err := loader.Load(accessChartDir)
	if err != nil {
		t.Fatal(err)
	}
	got := notes(t, c, "consumer-a", accessValues(namespaceMode, map[string]any{"tokenRenewal": map[string]any{"maxLifetimeSeconds": 3600}}))
	for _, want := range []string{"create token kbind-consumer-a --duration=3600s", "the konnector renews it itself", "https://kubernetes.default.svc.cluster.local"} {
		if !strings.Contains(got, want) {
			t.Errorf("NOTES lack %q:\n%s", want, got)
		}
	}
}

// TestAccessOnARealAPIServer: every mode's manifests are accepted by a
// real API server, applied for three consumers side by side.
func TestAccessOnARealAPIServer(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ensureNamespace(t, c.KubeconfigPath, "kbind")
	for _, tc := range []struct {
		consumer string
		values   map[string]any
	}{
		{"a", accessValues(namespaceMode, map[string]any{"related": []any{"secrets", "configmaps"}})},
		{"b", accessValues(map[string]any{"mode": "Prefixed", "prefix": "b"}, map[string]any{"related": []any{"configmaps"}, "relatedClusterWide": true})},
		{"c", accessValues(noneMode, nil)},
	} {
		tc.values["consumer"] = tc.consumer
		mode := tc.values["isolation"].(map[string]any)["mode"]
		chrt, err := loader.Load(accessChartDir)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := renderRelease(t, chrt, "consumer-"+tc.consumer, tc.values)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "access.yaml")
		if err := os.WriteFile(file, []byte(rel.Manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := testenv.Kubectl(context.Background(), c.KubeconfigPath, "apply", "-f", file)
		if err != nil {
			t.Fatalf("the API server refuses the %s manifests: %v\n%s", mode, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		t.Logf("%s:\n%s", mode, strings.Join(lines, "\n"))
	}
}

// TestAccessChartMatchesGrant: the chart and `kubectl kbind grant` (the
// cli/access package) grant the same objects — rules, subjects, admission
// policy, the consumer's namespace and its labels — for the same request.
func TestAccessChartMatchesGrant(t *testing.T) {
	t.Parallel()
	apis := []access.API{{Group: "example.org", Resource: "widgets", Namespaced: true}, {Group: "example.org", Resource: "gadgets", Namespaced: true}}
	// The chart's defaults, and what grant would learn from an API server
	// with two audiences and --duration 1h.
	defaults := &access.TokenRenewal{Audiences: []string{"https://kubernetes.default.svc.cluster.local"}, MaxLifetimeSeconds: 2592000}
	custom := &access.TokenRenewal{Audiences: []string{"https://k8s.example.com", "rke2"}, MaxLifetimeSeconds: 3600}
	customValues := map[string]any{"audiences": []any{"https://k8s.example.com", "rke2"}, "maxLifetimeSeconds": 3600}
	for _, tc := range []struct {
		values map[string]any
		req    access.Request
	}{
		{accessValues(namespaceMode, map[string]any{"related": []any{"secrets"}}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"},
				APIs: apis, Related: []string{"secrets"}, CRDReads: true, TokenRenewal: defaults}},
		{accessValues(namespaceMode, map[string]any{"related": []any{"secrets", "configmaps"}, "schemaSource": "OpenAPI", "tokenRenewal": customValues}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"},
				APIs: apis, Related: []string{"secrets", "configmaps"}, TokenRenewal: custom}},
		{accessValues(namespaceMode, map[string]any{"related": []any{"configmaps"}}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"},
				APIs: apis, Related: []string{"configmaps"}, CRDReads: true, TokenRenewal: defaults}},
		{accessValues(namespaceMode, map[string]any{"tokenRenewal": customValues}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"},
				APIs: apis, CRDReads: true, TokenRenewal: custom}},
		{accessValues(namespaceMode, map[string]any{"tokenRenewal": map[string]any{"enabled": false}}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"},
				APIs: apis, CRDReads: true}},
		{accessValues(prefixedMode, nil),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}, APIs: apis, CRDReads: true, TokenRenewal: defaults}},
		{accessValues(prefixedMode, map[string]any{"providerEventsClusterWide": true, "schemaSource": "OpenAPI"}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}, APIs: apis, ClusterWideEvents: true, TokenRenewal: defaults}},
		{accessValues(noneMode, map[string]any{"tokenRenewal": customValues}),
			access.Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}, LeaseNamespace: "kbind-a", APIs: apis, CRDReads: true, TokenRenewal: custom}},
	} {
		rendered, err := renderAccess(t, tc.values)
		if err != nil {
			t.Fatal(err)
		}
		granted := tc.req.Objects()
		if len(granted) != len(rendered) {
			t.Errorf("%s: grant makes %d objects, the chart %d: %v", tc.req.Isolation.Mode, len(granted), len(rendered), keys(rendered))
		}
		for _, obj := range granted {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			k := fmt.Sprintf("%s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
			if obj.GetNamespace() != "" {
				k += "@" + obj.GetNamespace()
			}
			chartObj, ok := rendered[k]
			if !ok {
				t.Errorf("%s: grant makes %s, the chart does not", tc.req.Isolation.Mode, k)
				continue
			}
			for _, field := range []string{"rules", "subjects", "roleRef", "spec"} {
				if m, ok := u[field].(map[string]any); ok && len(m) == 0 {
					delete(u, field) // a Namespace's empty spec
				}
				want, _ := yaml.Marshal(u[field])
				got, _ := yaml.Marshal(chartObj[field])
				if string(want) != string(got) {
					t.Errorf("%s %s.%s differs:\ngrant:\n%s\nchart:\n%s", tc.req.Isolation.Mode, k, field, want, got)
				}
			}
			// The labels and annotations the policies and a later grant read.
			meta := chartObj["metadata"].(map[string]any)
			for _, key := range []string{access.ConsumerLabel, kbindv1alpha1.PrefixLabel} {
				if want := obj.GetLabels()[key]; want != "" && fmt.Sprint(meta["labels"].(map[string]any)[key]) != want {
					t.Errorf("%s %s: label %s is %v in the chart, %q by grant", tc.req.Isolation.Mode, k, key, meta["labels"].(map[string]any)[key], want)
				}
			}
			for key, want := range obj.GetAnnotations() {
				if got := fmt.Sprint(meta["annotations"].(map[string]any)[key]); got != want {
					t.Errorf("%s %s: annotation %s is %s in the chart, %q by grant", tc.req.Isolation.Mode, k, key, got, want)
				}
			}
		}
	}
}
