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

package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// consumerList mirrors the documented JSON of kubectl kbind consumers -o
// json (docs/cli.md#consumers).
type consumerList struct {
	Version   string `json:"version"`
	Consumers []struct {
		Name, Status, Mode, Namespace, Prefix, ServiceAccount string
		APIs                                                  []string `json:"apis"`
		Heartbeat                                             struct {
			LastRenewal *time.Time `json:"lastRenewal"`
			Stale       bool       `json:"stale"`
		} `json:"heartbeat"`
		KonnectorVersions []string `json:"konnectorVersions"`
		Token             struct {
			Kind      string     `json:"kind"`
			ExpiresAt *time.Time `json:"expiresAt"`
			Renews    bool       `json:"renews"`
		} `json:"token"`
		Objects *int `json:"objects"`
		Copies  []struct {
			API, Namespace string
			Count          int
		} `json:"copies"`
		Leases []struct {
			Namespace, Name, Holder, KonnectorVersion, ProviderUser, CredentialKind string
		} `json:"leases"`
		Left     []string `json:"left"`
		Problems []string `json:"problems"`
	} `json:"consumers"`
	Problems []string `json:"problems"`
}

const microTime = "2006-01-02T15:04:05.000000Z"

// heartbeatLease is a heartbeat Lease as a konnector writes it, with the
// annotations it stamps on each renewal.
func heartbeatLease(ns, connection, uid string, renewed time.Time, annotations map[string]string) string {
	var ann strings.Builder
	fmt.Fprintf(&ann, "    core.kbind.io/connection: %s\n    core.kbind.io/consumer-cluster-uid: %s\n", connection, uid)
	for k, v := range annotations {
		fmt.Fprintf(&ann, "    %s: %q\n", k, v)
	}
	return fmt.Sprintf(`apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  namespace: %s
  name: %s-%s
  labels: {core.kbind.io/managed: "true", core.kbind.io/consumer-cluster-uid: %s}
  annotations:
%sspec:
  holderIdentity: %s
  leaseDurationSeconds: 60
  renewTime: %q
---
`, ns, connection, uid[:10], uid, ann.String(), uid, renewed.UTC().Format(microTime))
}

// providerCopy is a Widget (or ClusterWidget, ns "") as the konnector
// writes it on the provider for consumer cluster uid.
func providerCopy(kind, ns, name, uid string) string {
	namespace := ""
	if ns != "" {
		namespace = "namespace: " + ns + ", "
	}
	return fmt.Sprintf(`apiVersion: example.org/v1alpha1
kind: %s
metadata: {%sname: %s, labels: {core.kbind.io/managed: "true", core.kbind.io/consumer-cluster-uid: %s}, annotations: {core.kbind.io/consumer-cluster-uid: %s}}
spec: {size: 1}
---
`, kind, namespace, name, uid, uid)
}

// TestConsumers: three consumers granted in the three modes — a connected
// one (fresh Lease with version and credential expiry), a stale one, and
// one revoked with its Lease, namespace and copies left — as the table,
// the JSON and the detail show them; a read that is forbidden is reported
// and makes the exit code 1, never a silent 0.
func TestConsumers(t *testing.T) {
	// A provider of its own (no consumer: the consumers are written by
	// hand): it lists every consumer of the cluster, exactly these four.
	t.Parallel()
	providerCluster := testenv.StartClusterT(t, testenv.ProviderContext, testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, false),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, false),
	}})
	provider := providerCluster.KubeconfigPath
	if out := mustPlugin(t, "--kubeconfig", provider, "consumers"); !strings.Contains(out, "No consumers on this cluster") {
		t.Errorf("consumers of a provider without any:\n%s", out)
	}
	mustPlugin(t, "--kubeconfig", provider, "export", "widgets.example.org", "clusterwidgets.example.org")
	mustPlugin(t, "--kubeconfig", provider, "grant", "team-a", "--apis", "widgets.example.org")
	mustPlugin(t, "--kubeconfig", provider, "grant", "team-b", "--apis", "widgets.example.org,clusterwidgets.example.org", "--isolation", "Prefixed", "--prefix", "tb")
	mustPlugin(t, "--kubeconfig", provider, "grant", "team-c", "--apis", "widgets.example.org", "--isolation", "None")
	mustPlugin(t, "--kubeconfig", provider, "grant", "team-d", "--apis", "widgets.example.org")

	const uidA, uidB, uidC = "aaaaaaaa-1111-4000-8000-000000000001", "bbbbbbbb-2222-4000-8000-000000000002", "cccccccc-3333-4000-8000-000000000003"
	now := time.Now()
	expiry := now.Add(72 * time.Hour).UTC().Truncate(time.Second)
	kubectl(t, provider, "create", "namespace", "tb-default")
	kubectl(t, provider, "apply", "-f", writeFile(t, "leases.yaml",
		heartbeatLease("kbind-team-a", "provider", uidA, now, map[string]string{
			"core.kbind.io/konnector-version": "0.4.0", "core.kbind.io/api-version": "core.kbind.io/v1alpha1",
			"core.kbind.io/provider-user":   "system:serviceaccount:kbind:kbind-consumer-team-a",
			"core.kbind.io/credential-kind": "ClientCertificate", "core.kbind.io/credential-expiry": expiry.Format(time.RFC3339)})+
			heartbeatLease("tb", "provider", uidB, now.Add(-10*time.Minute), map[string]string{
				"core.kbind.io/konnector-version": "0.3.2", "core.kbind.io/credential-kind": "ServiceAccountToken",
				"core.kbind.io/credential-expiry": now.Add(24 * time.Hour).UTC().Format(time.RFC3339), "core.kbind.io/credential-renews": "true"})+
			heartbeatLease("kbind-team-c", "provider", uidC, now, map[string]string{"core.kbind.io/konnector-version": "0.4.0"})+
			providerCopy("Widget", "kbind-team-a", "default.w1", uidA)+
			providerCopy("Widget", "tb-default", "w1", uidB)+
			providerCopy("Widget", "tb-default", "w2", uidB)+
			providerCopy("ClusterWidget", "", "tb-cw1", uidB)+
			providerCopy("Widget", "default", "c1", uidC)+
			providerCopy("Widget", "default", "c2", uidC)+
			providerCopy("Widget", "default", "unrelated", "dddddddd-4444-4000-8000-000000000004")))
	mustPlugin(t, "--kubeconfig", provider, "revoke", "team-c")

	out := mustPlugin(t, "--kubeconfig", provider, "consumers")
	t.Logf("$ kubectl kbind consumers\n%s", out)
	rows := map[string][]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME MODE NAMESPACE/PREFIX HEARTBEAT KONNECTOR APIS OBJECTS TOKEN STATUS" {
		t.Errorf("header %v", got)
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		rows[f[0]] = f
	}
	expect := func(name string, want ...string) {
		t.Helper()
		got := rows[name]
		if len(got) < len(want) {
			t.Errorf("%s: row %v, want %v", name, got, want)
			return
		}
		for i, w := range want {
			if w != "*" && got[i] != w {
				t.Errorf("%s: column %d is %q, want %q (row %v)", name, i, got[i], w, got)
			}
		}
	}
	expect("team-a", "team-a", "Namespace", "kbind-team-a", "*", "0.4.0", "1", "1", expiry.Format("2006-01-02T15:04Z"), "connected")
	expect("team-b", "team-b", "Prefixed", "tb", "10m", "(stale)", "0.3.2", "2", "3", "renews", "stale")
	expect("team-c", "team-c", "-", "kbind-team-c", "*", "0.4.0", "0", "2", "-", "revoked", "(left:", "namespace", "kbind-team-c,", "1", "Lease,", "2", "copies)")
	expect("team-d", "team-d", "Namespace", "kbind-team-d", "-", "-", "1", "0", "-", "granted")
	if hb := rows["team-a"][3]; !strings.HasSuffix(hb, "s") {
		t.Errorf("team-a heartbeat %q, want seconds", hb)
	}

	var l consumerList
	if err := json.Unmarshal([]byte(mustPlugin(t, "--kubeconfig", provider, "consumers", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	if l.Version != "consumers.kbind.io/v1" || len(l.Consumers) != 4 || len(l.Problems) != 0 {
		t.Fatalf("consumers -o json: %+v", l)
	}
	byName := map[string]int{}
	for i, c := range l.Consumers {
		byName[c.Name] = i
	}
	a, b, c, d := l.Consumers[byName["team-a"]], l.Consumers[byName["team-b"]], l.Consumers[byName["team-c"]], l.Consumers[byName["team-d"]]
	if a.Status != "connected" || a.Mode != "Namespace" || a.ServiceAccount != "kbind/kbind-consumer-team-a" || a.Token.ExpiresAt == nil || !a.Token.ExpiresAt.Equal(expiry) ||
		a.Token.Kind != "ClientCertificate" || a.Objects == nil || *a.Objects != 1 || a.Heartbeat.Stale || len(a.Leases) != 1 || a.Leases[0].Holder != uidA {
		t.Errorf("team-a: %+v", a)
	}
	if b.Status != "stale" || b.Prefix != "tb" || !b.Token.Renews || b.Token.ExpiresAt != nil || !b.Heartbeat.Stale || b.Objects == nil || *b.Objects != 3 ||
		fmt.Sprint(b.APIs) != "[clusterwidgets.example.org widgets.example.org]" || len(b.Copies) != 2 {
		t.Errorf("team-b: %+v", b)
	}
	if c.Status != "revoked" || c.ServiceAccount != "" || c.Objects == nil || *c.Objects != 2 || fmt.Sprint(c.Left) != "[namespace kbind-team-c 1 Lease 2 copies]" {
		t.Errorf("team-c: %+v", c)
	}
	if d.Status != "granted" || d.Heartbeat.LastRenewal != nil || len(d.Leases) != 0 || len(d.KonnectorVersions) != 0 {
		t.Errorf("team-d: %+v", d)
	}
	if y := mustPlugin(t, "--kubeconfig", provider, "consumers", "-o", "yaml"); !strings.Contains(y, "version: consumers.kbind.io/v1") || !strings.Contains(y, "status: revoked") {
		t.Errorf("consumers -o yaml:\n%s", y)
	}

	detail := mustPlugin(t, "--kubeconfig", provider, "consumers", "team-b")
	t.Logf("$ kubectl kbind consumers team-b\n%s", detail)
	for _, want := range []string{"Status:", "stale", "Prefixed, namespace tb, prefix tb", "clusterwidgets.example.org, widgets.example.org",
		"ValidatingAdmissionPolicy", "ClusterRole", "kbind-consumer-team-b", "tb/provider-bbbbbbbb-2", uidB, "0.3.2", "ServiceAccountToken", "renews",
		"clusterwidgets.example.org   -            1", "widgets.example.org          tb-default   2"} {
		if !strings.Contains(detail, want) {
			t.Errorf("consumers team-b lacks %q", want)
		}
	}
	if _, errOut, code := plugin(t, "--kubeconfig", provider, "consumers", "nobody"); code != 1 || !strings.Contains(errOut, `there is no consumer "nobody"`) {
		t.Errorf("consumers nobody: exit %d, %q", code, errOut)
	}

	// An operator who may read everything but Widgets: the counts that
	// failed say so, the rest is shown, and the exit code is 1.
	kubectl(t, provider, "apply", "-f", writeFile(t, "viewer.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: consumers-viewer}
rules:
- {apiGroups: [""], resources: [serviceaccounts, namespaces], verbs: [list]}
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [list]}
- {apiGroups: [rbac.authorization.k8s.io], resources: ["*"], verbs: [list]}
- {apiGroups: [admissionregistration.k8s.io], resources: ["*"], verbs: [list]}
- {apiGroups: [apiextensions.k8s.io], resources: [customresourcedefinitions], verbs: [list]}
- {apiGroups: [example.org], resources: [clusterwidgets], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: consumers-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: consumers-viewer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}]
`))
	out, _, code := plugin(t, "--kubeconfig", provider, "--as", "viewer", "consumers")
	t.Logf("$ kubectl kbind consumers --as viewer\n%s", out)
	if code != 1 || !strings.Contains(out, "problem: consumer team-a: counting its widgets.example.org copies:") || !strings.Contains(out, "forbidden") {
		t.Errorf("a forbidden count: exit %d\n%s", code, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 6 && f[0] == "team-a" && f[6] != "?" {
			t.Errorf("team-a's objects could not be counted, yet shows %q", f[6])
		}
	}
}
