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

package connection

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/kubeconfig"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

func TestDesiredConditions(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New("no RBAC"))
	discovered := &kbindschema.Result{Source: kbindv1alpha1.ActiveSchemaSourceCRD, Exports: make([]kbindv1alpha1.ExportedAPI, 2)}
	heldByAnother := &heartbeat.Error{Verb: "renew", Resource: "leases.coordination.k8s.io kbind/x",
		Err: &heartbeat.HeldByAnother{Namespace: "kbind", Name: "x", Holder: "intruder", Consumer: "0123"}}
	cases := []struct {
		name string
		obs  observation
		want string // "Type=Status/Reason" joined by spaces, in decision order
	}{
		{"secret missing", observation{secretErr: errors.New("Secret kbind/x not found")},
			"SecretValid=False/SecretNotFound Connected=False/Pending Ready=False/SecretNotFound"},
		{"not probed yet", observation{},
			"SecretValid=True/AsExpected Ready=False/Pending"},
		{"unreachable", observation{probed: true, identityErr: errors.New("dial tcp: connection refused")},
			"SecretValid=True/AsExpected Connected=False/Pending Ready=False/Pending"},
		{"identity forbidden", observation{probed: true, identityErr: forbidden},
			"SecretValid=True/AsExpected Connected=False/Pending PermissionDenied=True/Forbidden Ready=False/Forbidden"},
		{"identity changed", observation{probed: true, identityChanged: "moved"},
			"SecretValid=True/AsExpected Connected=False/ClusterIdentityChanged Ready=False/ClusterIdentityChanged"},
		{"discovery forbidden", observation{probed: true, discoveryErr: forbidden},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=True/Forbidden Ready=False/Forbidden"},
		{"discovery failed", observation{probed: true, discoveryErr: errors.New("timeout")},
			"SecretValid=True/AsExpected Connected=True/AsExpected Ready=False/Pending"},
		{"ready", observation{probed: true, discovery: discovered},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected"},
		{"ready, heartbeat forbidden", observation{probed: true, discovery: discovered, heartbeatKnown: true, heartbeat: forbidden},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected Heartbeat=False/Forbidden"},
		{"ready, heartbeat failing", observation{probed: true, discovery: discovered, heartbeatKnown: true, heartbeat: errors.New("timeout")},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected Heartbeat=False/Pending"},
		{"ready, heartbeat Lease held by another", observation{probed: true, discovery: discovered, heartbeatKnown: true, heartbeat: heldByAnother},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected Heartbeat=False/OwnedByAnother"},
		{"ready, heartbeat renewed", observation{probed: true, discovery: discovered, heartbeatKnown: true, leaseRef: "kbind/x"},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected Heartbeat=True/AsExpected"},
		{"duplicate consumer: sync paused", observation{probed: true, verified: true, discovery: discovered, heartbeatKnown: true, leaseRef: "kbind/x", duplicate: true},
			"SecretValid=True/AsExpected Connected=True/AsExpected Ready=False/DuplicateConsumer Heartbeat=False/DuplicateConsumer"},
		{"duplicate consumer, deleting: draining wins Ready", observation{probed: true, verified: true, discovery: discovered, heartbeatKnown: true, duplicate: true, draining: []string{"ClusterBinding a"}},
			"SecretValid=True/AsExpected Connected=True/AsExpected Ready=False/DrainingBindings Heartbeat=False/DuplicateConsumer"},
		{"ready, schema in sync", observation{probed: true, discovery: discovered, schemaKnown: true},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected SchemaInSync=True/AsExpected"},
		{"ready, schema lagging", observation{probed: true, discovery: discovered, schemaKnown: true, lagging: []string{"a.x", "b.x"}},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected SchemaInSync=False/Pending"},
		{"ready, a storage-version switch refused", observation{probed: true, discovery: discovered, schemaKnown: true, lagging: []string{"a.x", "b.x"},
			refusedSwitches: []string{"a.x keeps storage version v1 (the provider stores v2)"}},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected SchemaInSync=False/StorageVersionChange"},
		{"ready, a group unreadable (503)", observation{probed: true, discovery: discovered, unreadable: []kbindschema.GroupError{{Group: "a", Err: apierrors.NewServiceUnavailable("down")}}},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected"},
		{"ready, a group refused (403)", observation{probed: true, discovery: discovered, unreadable: []kbindschema.GroupError{{Group: "a", Err: forbidden}}},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=True/Forbidden Ready=True/AsExpected"},
		{"ready, an insecure feature allowed", observation{probed: true, discovery: discovered, insecure: []kubeconfig.Finding{{Feature: kbindv1alpha1.InsecureSkipTLSVerify, Where: "clusters[p].insecure-skip-tls-verify"}}},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=True/AsExpected"},
		{"deleting, draining, connected", observation{probed: true, verified: true, discovery: discovered, draining: []string{"ClusterBinding a"}},
			"SecretValid=True/AsExpected Connected=True/AsExpected PermissionDenied=False/AsExpected Ready=False/DrainingBindings"},
		{"deleting, draining, unreachable", observation{probed: true, identityErr: errors.New("dial tcp: connection refused"), draining: []string{"ClusterBinding a"}},
			"SecretValid=True/AsExpected Connected=False/Pending Ready=False/DrainingBindings"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			decided := desiredConditions(tc.obs)
			for _, c := range decided {
				got = append(got, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
				if c.Message == "" {
					t.Errorf("%s has no message", c.Type)
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("conditions\n got %s\nwant %s", strings.Join(got, " "), tc.want)
			}
			if isReady(decided) != strings.Contains(tc.want, "Ready=True") {
				t.Errorf("isReady = %v", isReady(decided))
			}
		})
	}
}

func TestDesiredConditionMessages(t *testing.T) {
	discovered := &kbindschema.Result{Source: kbindv1alpha1.ActiveSchemaSourceOpenAPI}
	obs := observation{probed: true, discovery: discovered, exports: make([]kbindv1alpha1.ExportedAPI, 3),
		unreadable: []kbindschema.GroupError{{Group: "example.org", Err: &kbindschema.ListError{Verb: "get", Resource: "/openapi/v3/apis/example.org/v1", Err: errors.New("503")}}},
		insecure:   []kubeconfig.Finding{{Feature: kbindv1alpha1.InsecureProxyURL, Where: "clusters[p].proxy-url"}}}
	want := map[kbindv1alpha1.ConditionType]string{
		kbindv1alpha1.ConditionReady:       "connected; 3 API(s) exported through the OpenAPI source; 1 API group(s) could not be read, their last known exports are kept until a read succeeds: get /openapi/v3/apis/example.org/v1: 503",
		kbindv1alpha1.ConditionSecretValid: "the kubeconfig Secret is usable; insecure features allowed by spec.allowInsecure: ProxyURL (clusters[p].proxy-url)",
	}
	for _, c := range desiredConditions(obs) {
		if w, ok := want[c.Type]; ok && c.Message != w {
			t.Errorf("%s message\n got %q\nwant %q", c.Type, c.Message, w)
		}
	}
}

// TestHeartbeatHeldByAnotherMessage: the condition names the Lease, the
// holder found and what to do about it.
func TestHeartbeatHeldByAnotherMessage(t *testing.T) {
	err := &heartbeat.Error{Verb: "renew", Resource: "leases.coordination.k8s.io a/p-0123",
		Err: &heartbeat.HeldByAnother{Namespace: "a", Name: "p-0123", Holder: "intruder", Consumer: "0123456789"}}
	obs := observation{probed: true, discovery: &kbindschema.Result{}, heartbeatKnown: true, heartbeat: fmt.Errorf("wrapped: %w", err)}
	for _, c := range desiredConditions(obs) {
		if c.Type != kbindv1alpha1.ConditionHeartbeat {
			continue
		}
		want := `the heartbeat Lease a/p-0123 on the provider is held by "intruder", not by this consumer cluster (0123456789): kbind leaves it untouched and cannot renew it, so the provider cannot tell this consumer is live; a provider admin should find out who changed its spec.holderIdentity and delete it (kbind then creates it again)`
		if c.Reason != kbindv1alpha1.ReasonOwnedByAnother || c.Message != want {
			t.Errorf("Heartbeat %s\n got %q\nwant %q", c.Reason, c.Message, want)
		}
		return
	}
	t.Fatal("no Heartbeat condition")
}

func TestDrainingReady(t *testing.T) {
	c := drainingReady([]string{"ClusterBinding a", "Binding ns/b"})
	if c.Status != metav1.ConditionFalse || c.Reason != kbindv1alpha1.ReasonDrainingBindings ||
		c.Message != "waiting for 2 binding(s) referencing this Connection to be deleted: ClusterBinding a, Binding ns/b" {
		t.Errorf("%+v", c)
	}
}

func TestDesiredAutoBinding(t *testing.T) {
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	conn.Status.ExportedAPIs = []kbindv1alpha1.ExportedAPI{{Name: "a.x"}, {Name: "b.x"}}
	cb := desiredAutoBinding(conn, nil)
	if cb.Name != "p" || cb.Labels[kbindv1alpha1.ManagedLabel] != "true" || cb.Spec.ConflictPolicy != kbindv1alpha1.ConflictPolicyFail ||
		fmt.Sprint(cb.Spec.ConsumerNames()) != "[a.x b.x]" || cb.Spec.ConnectionRef.Name != "p" {
		t.Errorf("%+v", cb)
	}
}

// TestAutoBindAPIs: autoBind only ever adds APIs (CONN-6).
func TestAutoBindAPIs(t *testing.T) {
	ref := func(names ...string) []kbindv1alpha1.APIReference {
		var out []kbindv1alpha1.APIReference
		for _, n := range names {
			out = append(out, kbindv1alpha1.APIReference{Name: n})
		}
		return out
	}
	exp := func(names ...string) []kbindv1alpha1.ExportedAPI {
		var out []kbindv1alpha1.ExportedAPI
		for _, n := range names {
			out = append(out, kbindv1alpha1.ExportedAPI{Name: n})
		}
		return out
	}
	cases := []struct {
		name     string
		listed   []kbindv1alpha1.APIReference
		exported []kbindv1alpha1.ExportedAPI
		want     string
	}{
		{"new: every export", nil, exp("a.x", "b.x"), "[a.x b.x]"},
		{"an export added", ref("a.x"), exp("a.x", "b.x"), "[a.x b.x]"},
		{"an export gone stays listed", ref("a.x", "b.x"), exp("b.x"), "[a.x b.x]"},
		{"nothing exported: everything stays listed", ref("a.x", "b.x"), nil, "[a.x b.x]"},
		{"listed order kept, new ones after", ref("c.x"), exp("a.x", "c.x"), "[c.x a.x]"},
		{"nothing listed, nothing exported", nil, nil, "[]"},
	}
	for _, tc := range cases {
		var names []string
		for _, a := range autoBindAPIs(tc.listed, tc.exported) {
			names = append(names, a.Name)
		}
		if got := fmt.Sprint(names); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	listed := []kbindv1alpha1.APIReference{{Name: "a.x", Projection: &kbindv1alpha1.Projection{}}}
	if got := autoBindAPIs(listed, nil); got[0].Projection == nil {
		t.Errorf("a listed API is not kept as it is: %+v", got)
	}
}

func TestLoopbackHint(t *testing.T) {
	cases := []struct {
		host      string
		inCluster bool
		want      bool
	}{
		{"https://127.0.0.1:6443", true, true},
		{"https://localhost:6443", true, true},
		{"https://[::1]:6443", true, true},
		{"https://127.0.0.1:6443", false, false},
		{"https://10.0.0.1:6443", true, false},
		{"https://provider.example:6443", true, false},
	}
	for _, tc := range cases {
		r := &Reconciler{InCluster: tc.inCluster}
		hint := r.loopbackHint(&kubeconfig.Parsed{Config: &rest.Config{Host: tc.host}})
		if (hint != "") != tc.want {
			t.Errorf("%s inCluster=%v: hint %q", tc.host, tc.inCluster, hint)
		}
		if hint != "" && !strings.Contains(hint, "points at the Pod itself") {
			t.Errorf("hint %q does not say the address is the Pod itself", hint)
		}
	}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name  string
		obs   observation
		ready bool
		want  decision
	}{
		{"ready", observation{verified: true, published: true}, true,
			decision{ready: true, useSession: true, heartbeat: heartbeatRun, requeue: requeueDiscovery}},
		{"ready on a new, verified session", observation{verified: true}, true,
			decision{ready: true, useSession: true, heartbeat: heartbeatRun, requeue: requeueDiscovery}},
		{"discovery refused: no session, the heartbeat goes on", observation{verified: true, published: true}, false,
			decision{heartbeat: heartbeatRun, requeue: requeueBackoff}},
		{"broken Secret: the heartbeat keeps its last session", observation{secretErr: errors.New("garbage")}, false,
			decision{heartbeat: heartbeatKeep, requeue: requeueSecret}},
		{"unreachable", observation{identityErr: errors.New("refused")}, false,
			decision{heartbeat: heartbeatKeep, requeue: requeueBackoff}},
		{"new kubeconfig reaches another cluster: the verified session keeps the heartbeat", observation{identityChanged: "moved"}, false,
			decision{heartbeat: heartbeatKeep, requeue: requeueBackoff}},
		{"the same kubeconfig now reaches another cluster: stop the heartbeat", observation{identityChanged: "moved", published: true}, false,
			decision{heartbeat: heartbeatStop, requeue: requeueBackoff}},
		{"deleting, draining through a verified provider", observation{deleting: true, verified: true, published: true}, false,
			decision{useSession: true, heartbeat: heartbeatRun, requeue: requeueDiscovery}},
		{"duplicate consumer: no session, the heartbeat goes on (it tells when the other stops)", observation{verified: true, published: true, duplicate: true}, false,
			decision{heartbeat: heartbeatRun, requeue: requeueBackoff}},
		{"deleting a duplicate consumer: no session, the drain waits (Orphan releases)", observation{deleting: true, verified: true, published: true, duplicate: true}, false,
			decision{heartbeat: heartbeatRun, requeue: requeueBackoff}},
		{"deleting, provider unreachable: bindings wait", observation{deleting: true, identityErr: errors.New("refused")}, false,
			decision{heartbeat: heartbeatKeep, requeue: requeueBackoff}},
	}
	for _, tc := range cases {
		if got := decide(tc.obs, tc.ready); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestHeartbeatUnanswered: a renewal that got no answer after the last
// identity read reports the provider unreachable without another read; an
// answer (even a refusal) or an older silence does not.
func TestHeartbeatUnanswered(t *testing.T) {
	read := time.Now()
	timeout := &url.Error{Op: "Put", URL: "https://p", Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		name string
		err  error
		at   time.Time
		want bool
	}{
		{"renewed", nil, read.Add(time.Second), false},
		{"timed out after the read", timeout, read.Add(time.Second), true},
		{"timed out before the read", timeout, read.Add(-time.Second), false},
		{"refused after the read", apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, "x", errors.New("no")), read.Add(time.Second), false},
	} {
		if got := heartbeatUnanswered(tc.err, tc.at, read); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// The message says so, not that an identity read failed.
	for _, c := range desiredConditions(observation{probed: true, unanswered: true, identityErr: errors.New("its heartbeat Lease renewal got no answer: timeout")}) {
		if c.Type == kbindv1alpha1.ConditionConnected && (c.Status != metav1.ConditionFalse || c.Message != "the provider does not answer: its heartbeat Lease renewal got no answer: timeout") {
			t.Errorf("Connected %s %q", c.Status, c.Message)
		}
	}
}

// TestProbeBackoff: a Connection whose provider is gone is retried soon
// after it comes back, however long the outage: 1 s doubling, capped at
// MaxProbeBackoff; a success starts over.
func TestProbeBackoff(t *testing.T) {
	b := probeBackoff()
	var got []time.Duration
	for range 8 {
		got = append(got, b.When("c"))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("retries after %v, want %v", got, want)
	}
	if other := b.When("d"); other != time.Second {
		t.Errorf("another Connection starts at %v", other)
	}
	b.Forget("c")
	if again := b.When("c"); again != time.Second {
		t.Errorf("after a success: %v", again)
	}
}

// The time to Ready is observed once in a Connection's life: when it turns
// Ready and its status never said Ready before — not after a konnector
// restart, not when it comes back after losing Ready.
func TestFirstReady(t *testing.T) {
	ready := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: string(kbindv1alpha1.ConditionReady), Status: s, Reason: "x"}}
	}
	cases := []struct {
		name     string
		before   kbindv1alpha1.ConnectionStatus
		readyNow bool
		observe  bool
	}{
		{"new, not Ready yet", kbindv1alpha1.ConnectionStatus{}, false, false},
		{"new, Ready at the first reconcile (no Ready condition before)", kbindv1alpha1.ConnectionStatus{}, true, true},
		{"never Ready before (Ready=False), Ready now", kbindv1alpha1.ConnectionStatus{Conditions: ready(metav1.ConditionFalse)}, true, true},
		{"Ready=Unknown before, Ready now", kbindv1alpha1.ConnectionStatus{Conditions: ready(metav1.ConditionUnknown)}, true, true},
		{"Ready before and still", kbindv1alpha1.ConnectionStatus{Conditions: ready(metav1.ConditionTrue), ActiveSchemaSource: kbindv1alpha1.ActiveSchemaSourceCRD}, true, false},
		{"a restarted konnector finds it Ready=True", kbindv1alpha1.ConnectionStatus{Conditions: ready(metav1.ConditionTrue)}, true, false},
		{"Ready once, lost it, Ready again (activeSchemaSource stayed)", kbindv1alpha1.ConnectionStatus{Conditions: ready(metav1.ConditionFalse), ActiveSchemaSource: kbindv1alpha1.ActiveSchemaSourceOpenAPI}, true, false},
		{"Ready before, not now", kbindv1alpha1.ConnectionStatus{Conditions: ready(metav1.ConditionTrue)}, false, false},
	}
	for _, tc := range cases {
		if got := firstReady(tc.before, tc.readyNow); got != tc.observe {
			t.Errorf("%s: firstReady = %v, want %v", tc.name, got, tc.observe)
		}
	}
}
