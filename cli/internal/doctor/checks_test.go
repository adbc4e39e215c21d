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

package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/admission"
)

var (
	now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cmd = Commands{Consumer: "kubectl --context=consumer", Provider: "kubectl --context=provider", ProviderContext: "provider"}

	widgets = kbindv1alpha1.ExportedAPI{Name: "widgets.example.org", Group: "example.org", Resource: "widgets", Scope: kbindv1alpha1.APIScopeNamespaced}
	things  = kbindv1alpha1.ExportedAPI{Name: "clusterthings.example.org", Group: "example.org", Resource: "clusterthings", Scope: kbindv1alpha1.APIScopeCluster}
)

func connection(mut ...func(*kbindv1alpha1.Connection)) kbindv1alpha1.Connection {
	c := kbindv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Name: "provider"},
		Spec:       kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: "kbind", Name: "provider-kubeconfig"}},
		Status: kbindv1alpha1.ConnectionStatus{RemoteClusterUID: "remote", LocalClusterUID: "local", ActiveSchemaSource: kbindv1alpha1.ActiveSchemaSourceCRD,
			ExportedAPIs: []kbindv1alpha1.ExportedAPI{widgets, things},
			Conditions:   []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AsExpected"}}},
	}
	for _, m := range mut {
		m(&c)
	}
	return c
}

func healthyProbe(mut ...func(*ConnectionProbe)) ConnectionProbe {
	p := ConnectionProbe{Connection: connection(), Reached: true, RemoteUID: "remote", Username: "system:serviceaccount:kbind-a:kbind-consumer-a",
		Lease: &LeaseState{Namespace: "kbind-a", Name: "provider-local", Found: true, RenewedAgo: 5 * time.Second, LeaseDuration: time.Minute}}
	for _, m := range mut {
		m(&p)
	}
	return p
}

func checks(fs []Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Check)
	}
	return out
}

func TestCheckConnection(t *testing.T) {
	unauthorized := apierrors.NewUnauthorized("token expired")
	cases := []struct {
		name       string
		probe      ConnectionProbe
		want       []string
		fixHas     string
		problemHas string
	}{
		{"healthy", healthyProbe(), []string{}, "", ""},
		{"missing Secret", healthyProbe(func(p *ConnectionProbe) { p.Secret, p.Reached = SecretMissing, false }),
			[]string{"connection.secret"}, "-n kbind create secret generic provider-kubeconfig --from-file=kubeconfig=", "does not exist"},
		{"empty key", healthyProbe(func(p *ConnectionProbe) { p.Secret, p.Reached = SecretKeyMissing, false }),
			[]string{"connection.secret"}, "spec.kubeconfigSecretRef is immutable", `no non-empty key "kubeconfig"`},
		{"malformed kubeconfig", healthyProbe(func(p *ConnectionProbe) {
			p.Secret, p.SecretProblem, p.Reached = SecretInvalid, "the kubeconfig is not valid YAML or JSON kubeconfig", false
		}), []string{"connection.kubeconfig"}, "no exec plugins", "not valid YAML"},
		{"unreachable", healthyProbe(func(p *ConnectionProbe) { p.Reached, p.ReachErr = false, errors.New("dial tcp: connection refused") }),
			[]string{"connection.unreachable"}, "not 127.0.0.1 from a Pod", "cannot be reached"},
		{"revoked, granted identity: the grant renews", healthyProbe(func(p *ConnectionProbe) {
			p.Reached, p.ReachErr, p.GrantCommand = false, unauthorized, "kubectl kbind grant a --context=provider"
		}), []string{"connection.credentials"}, "kubectl kbind grant a --context=provider > bundle.yaml", "Unauthorized"},
		{"identity read forbidden", healthyProbe(func(p *ConnectionProbe) {
			p.Reached, p.ReachErr = false, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New("no"))
		}), []string{"connection.permissions"}, "kubectl kbind grant NAME", "forbids reading its identity"},
		{"identity changed", healthyProbe(func(p *ConnectionProbe) { p.RemoteUID = "other" }),
			[]string{"connection.identity"}, "create a new Connection", "ClusterIdentityChanged"},
		{"duplicate consumer (a restored clone)", healthyProbe(func(p *ConnectionProbe) {
			p.Connection.Status.Conditions = append([]metav1.Condition(nil),
				metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "DuplicateConsumer", Message: "sync paused"},
				metav1.Condition{Type: "Heartbeat", Status: metav1.ConditionFalse, Reason: "DuplicateConsumer", Message: "another konnector"})
		}), []string{"connection.duplicate"}, "on the CLONE only", "DuplicateConsumer"},
		{"stale heartbeat", healthyProbe(func(p *ConnectionProbe) { p.Lease.RenewedAgo = 5 * time.Minute }),
			[]string{"connection.heartbeat"}, "read the log of the konnector process where it runs", "last renewed 5m0s ago"},
		{"no Lease", healthyProbe(func(p *ConnectionProbe) { p.Lease.Found = false }),
			[]string{"connection.heartbeat"}, "", "no konnector serves"},
		{"Lease not yet known", healthyProbe(func(p *ConnectionProbe) { p.Lease = nil }), []string{}, "", ""},
		{"missing verbs, grouped per resource", healthyProbe(func(p *ConnectionProbe) {
			p.Denied = []authorizationv1.ResourceAttributes{
				{Namespace: "kbind-a", Verb: "delete", Group: "example.org", Resource: "widgets"},
				{Namespace: "kbind-a", Verb: "patch", Group: "example.org", Resource: "widgets"},
				{Namespace: "kbind-a", Verb: "update", Group: "coordination.k8s.io", Resource: "leases"},
			}
		}), []string{"connection.rbac", "connection.rbac"}, "auth can-i delete widgets.example.org -n kbind-a --as=system:serviceaccount:kbind-a:kbind-consumer-a",
			"does not allow system:serviceaccount:kbind-a:kbind-consumer-a to delete, patch widgets.example.org in namespace kbind-a"},
		{"nothing exported", healthyProbe(func(p *ConnectionProbe) { p.Connection.Status.ExportedAPIs = nil }),
			[]string{"connection.exportedAPIs"}, "kubectl kbind export <plural>.<group> --context=provider", "exports no API"},
		{"not Ready for another reason", healthyProbe(func(p *ConnectionProbe) {
			p.Connection.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting"}}
		}), []string{"connection.notReady"}, "get connection provider -o yaml", ""},
		{"schema lagging", healthyProbe(func(p *ConnectionProbe) {
			p.Connection.Status.Conditions = append(p.Connection.Status.Conditions, metav1.Condition{Type: "SchemaInSync", Status: metav1.ConditionFalse, Reason: "Pending", Message: "widgets.example.org"})
		}), []string{"connection.schema"}, "updatePolicy Once pins a schema", "do not carry the schema"},
		{"stuck deleting", healthyProbe(func(p *ConnectionProbe) {
			p.Connection.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Hour)}
			p.Connection.Finalizers = []string{kbindv1alpha1.CleanupFinalizer}
		}), []string{"connection.stuckDeleting"}, "delete the bindings of Connection provider first", "finalizer core.kbind.io/cleanup"},
		{"deleting, not yet stuck", healthyProbe(func(p *ConnectionProbe) {
			p.Connection.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
		}), []string{}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkConnection(tc.probe, now, 5*time.Minute, cmd)
			if !reflect.DeepEqual(checks(got), tc.want) {
				t.Fatalf("checks %v, want %v: %+v", checks(got), tc.want, got)
			}
			if len(got) > 0 {
				if !strings.Contains(got[0].Fix, tc.fixHas) || !strings.Contains(got[0].Problem, tc.problemHas) {
					t.Errorf("problem %q, fix %q; want them to contain %q, %q", got[0].Problem, got[0].Fix, tc.problemHas, tc.fixHas)
				}
				if got[0].Doc == "" || !strings.HasPrefix(got[0].Doc, "docs/troubleshooting.md#") {
					t.Errorf("doc %q", got[0].Doc)
				}
			}
		})
	}
}

func TestCheckBinding(t *testing.T) {
	cb := func(name string, apis ...string) BindingState {
		b := BindingState{Kind: "ClusterBinding", Meta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}},
			Status: kbindv1alpha1.BindingStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}}
		for _, a := range apis {
			b.Spec.APIs = append(b.Spec.APIs, kbindv1alpha1.APIReference{Name: a})
		}
		return b
	}
	namespaced := func(b BindingState) BindingState {
		b.Kind, b.Meta.Namespace = "Binding", "team-a"
		return b
	}
	conn := connection()
	open := connection(func(c *kbindv1alpha1.Connection) {
		c.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesAll}
	})
	confined := connection(func(c *kbindv1alpha1.Connection) {
		c.Spec.Isolation = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "kbind-a"}
	})
	notReady := cb("w", "widgets.example.org")
	notReady.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "x"}}
	fewerVersions := cb("w", "widgets.example.org")
	fewerVersions.Status.Conditions = []metav1.Condition{{Type: "AllVersionsServed", Status: metav1.ConditionFalse, Reason: "ConversionWebhook",
		Message: "widgets.example.org is served at v1 only, not at v1alpha1"}}
	failed := cb("w", "widgets.example.org")
	failed.Status.BoundAPIs = []kbindv1alpha1.BoundAPI{{Name: "widgets.example.org", Instances: &kbindv1alpha1.InstanceCounts{Total: 3, Synced: 1, Failed: 2}}}
	pendingCB := cb("w", "widgets.example.org")
	pendingCB.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "installing"}}
	refused := func(b BindingState) BindingState {
		b.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonSchemaIncompatible), Message: "version v1: ..."}}
		return b
	}
	incompatible := refused(cb("w", "widgets.example.org"))
	stopped := func(b BindingState, reason kbindv1alpha1.Reason) BindingState {
		b.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: string(reason), Message: "the objectSelector of widgets.example.org: ..."}}
		return b
	}
	selecting := func(b BindingState, ns string) BindingState {
		b.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		return b
	}
	through := func(b BindingState, conn string) BindingState {
		b.Spec.ConnectionRef.Name = conn
		return b
	}
	projectedCB := cb("w", "widgets.example.org")
	projectedCB.Spec.APIs[0].Projection = &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget"}
	cases := []struct {
		name   string
		b      BindingState
		conn   *kbindv1alpha1.Connection
		broken bool
		cbs    []BindingState
		want   []string
		fixHas string
		crds   map[string]ConsumerCRD
	}{
		{"healthy", cb("w", "widgets.example.org"), &conn, false, nil, []string{}, "", nil},
		{"a Kind: the fix names the exported API", cb("w", "Widget"), &conn, false, nil, []string{"binding.apiName"},
			`patch clusterbinding w --type=json -p '[{"op":"replace","path":"/spec/apis/0/name","value":"widgets.example.org"}]'`, nil},
		{"group/version", cb("w", "widgets.example.org", "example.org/v1"), &conn, false, nil, []string{"binding.apiName"}, "/spec/apis/1/name", nil},
		{"not exported", cb("w", "gadgets.example.org"), &conn, false, nil, []string{"binding.notExported"}, "kubectl kbind export gadgets.example.org --context=provider", nil},
		{"not exported, before discovery: unknown", cb("w", "gadgets.example.org"), ptr(connection(func(c *kbindv1alpha1.Connection) { c.Status.ActiveSchemaSource = "" })), false, nil, []string{}, "", nil},
		{"cluster-scoped in a Binding", namespaced(cb("w", "clusterthings.example.org")), &open, false, nil, []string{"binding.scope"}, "ClusterBinding", nil},
		{"cluster-scoped under Namespace isolation", cb("w", "clusterthings.example.org"), &confined, false, nil, []string{"binding.scope"}, "--isolation Prefixed", nil},
		{"no Connection", cb("w", "widgets.example.org"), nil, false, nil, []string{"binding.connection"}, "get connections", nil},
		{"overlap with a ClusterBinding", namespaced(cb("w", "widgets.example.org")), &open, false, []BindingState{cb("all", "widgets.example.org")}, []string{"binding.overlap"}, "delete bindings.core.kbind.io -n team-a w", nil},
		{"a namespace the Connection does not admit: said alone", namespaced(notReady), &conn, false, []BindingState{cb("all", "widgets.example.org")}, []string{"binding.notAdmitted"},
			`patch connection provider --type=merge -p '{"spec":{"namespacedBindings":{"from":"Selector","selector":{"matchLabels":{"kubernetes.io/metadata.name":"team-a"}}}}}'`, nil},
		{"a namespace a selector does not match: edit, never replace the selector", namespaced(notReady), ptr(connection(func(c *kbindv1alpha1.Connection) {
			c.Spec.NamespacedBindings = &kbindv1alpha1.NamespacedBindings{From: kbindv1alpha1.FromNamespacesSelector, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "yes"}}}
		})), false, nil, []string{"binding.notAdmitted"}, "edit connection provider", nil},
		{"an admitted namespace", namespaced(cb("w", "widgets.example.org")), &open, false, nil, []string{}, "", nil},
		{"not Ready", notReady, &conn, false, nil, []string{"binding.notReady"}, "", nil},
		{"not Ready because the Connection is broken: said once, on the Connection", notReady, &conn, true, nil, []string{}, "", nil},
		{"a selector that does not parse: an Error at the field", stopped(cb("w", "widgets.example.org"), kbindv1alpha1.ReasonInvalidFilter), &conn, false, nil,
			[]string{"binding.invalidFilter"}, "edit clusterbinding w   # fix the field the message names", nil},
		{"a mutation that does not compile, in a Binding", stopped(namespaced(cb("w", "widgets.example.org")), kbindv1alpha1.ReasonInvalidMutation), &open, false, nil,
			[]string{"binding.invalidMutation"}, "edit bindings.core.kbind.io -n team-a w", nil},
		{"failed instances", failed, &conn, false, nil, []string{"binding.failedInstances"}, "get events -A --field-selector type=Warning", nil},
		{"fewer versions served (webhook conversion): a note", fewerVersions, &conn, false, nil, []string{"binding.versions"}, "VERSIONS:.spec.versions[*].name", nil},
		{"no consumer CRD yet", cb("w", "widgets.example.org"), &conn, false, nil, []string{"binding.consumerCRD"}, "get clusterbinding w -o yaml",
			map[string]ConsumerCRD{"widgets.example.org": {}}},
		{"no consumer CRD with pullPolicy None: install it", cb("w", "widgets.example.org"),
			ptr(connection(func(c *kbindv1alpha1.Connection) { c.Spec.Schema.PullPolicy = kbindv1alpha1.PullPolicyNone })), false, nil,
			[]string{"binding.consumerCRD"}, "annotate crd widgets.example.org core.kbind.io/connection=provider", map[string]ConsumerCRD{"widgets.example.org": {}}},
		{"not Established", cb("w", "widgets.example.org"), &conn, false, nil, []string{"binding.consumerCRD"}, "jsonpath='{.status.conditions}'",
			map[string]ConsumerCRD{"widgets.example.org": {Found: true, Managed: true, Connection: "provider"}}},
		{"another Connection's CRD, and no route of it", pendingCB, &conn, false, nil, []string{"binding.consumerCRD"}, "delete clusterbinding w",
			map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Managed: true, Connection: "other"}}},
		{"another Connection's CRD, and a second route of it (Ready)", cb("w", "widgets.example.org"), &conn, false, nil, []string{}, "",
			map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Managed: true, Connection: "other"}}},
		{"another Connection's CRD, refused as a route: said by binding.notReady", incompatible, &conn, false, nil, []string{"binding.notReady"}, "",
			map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Managed: true, Connection: "other"}}},
		{"not Ready and not kbind's at all", pendingCB, &conn, false, nil, []string{"binding.consumerCRD"}, "replaces its schema with the provider's",
			map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Connection: "provider"}}},
		{"a Binding a ClusterBinding's namespaceSelector covers", namespaced(cb("w", "widgets.example.org")), &open, false,
			[]BindingState{selecting(cb("east", "widgets.example.org"), "team-a")}, []string{"binding.overlap"}, "delete bindings.core.kbind.io -n team-a w", nil},
		{"a Binding in a namespace no ClusterBinding selects", namespaced(cb("w", "widgets.example.org")), &open, false,
			[]BindingState{selecting(cb("east", "widgets.example.org"), "team-b")}, []string{}, "", nil},
		{"a Binding covered by another Connection's ClusterBinding", namespaced(cb("w", "widgets.example.org")), &open, false,
			[]BindingState{through(cb("east", "widgets.example.org"), "east")}, []string{"binding.overlap"}, "", nil},
		{"a refused ClusterBinding covers nothing", namespaced(cb("w", "widgets.example.org")), &open, false,
			[]BindingState{through(refused(cb("east", "widgets.example.org")), "east")}, []string{}, "", nil},
		{"the consumer API serves another provider API: projection refused", cb("w", "widgets.example.org"), &conn, false, nil, []string{"binding.projection"}, "edit clusterbinding w",
			map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Managed: true, Connection: "provider", ProviderAPI: "gadgets.example.org"}}},
		{"a projected entry is checked at its consumer CRD", projectedCB, &conn, false, nil, []string{"binding.consumerCRD"}, "jsonpath='{.status.conditions}'",
			map[string]ConsumerCRD{"acmewidgets.acme.io": {Found: true, Managed: true, Connection: "provider", ProviderAPI: "widgets.example.org"}}},
		{"a projected entry at its own CRD", projectedCB, &conn, false, nil, []string{}, "",
			map[string]ConsumerCRD{"acmewidgets.acme.io": {Found: true, Established: true, Managed: true, Connection: "provider", ProviderAPI: "widgets.example.org"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crds := tc.crds
			if crds == nil {
				crds = map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Managed: true, Connection: "provider"}}
			}
			bc := bindingContext{Conn: tc.conn, ConnBroken: tc.broken, ClusterBindings: tc.cbs, ConsumerCRDs: crds,
				NamespaceLabels: labels.Set{"kubernetes.io/metadata.name": "team-a"}}
			if tc.b.Kind == "Binding" && tc.conn != nil {
				d := admission.Decide(tc.conn.Spec.NamespacedBindingsOf(), admission.Namespace{Name: tc.b.Meta.Namespace, Found: true,
					Labels: map[string]string{"kubernetes.io/metadata.name": tc.b.Meta.Namespace}})
				bc.Admission = &d
			}
			got := checkBinding(tc.b, bc, now, 5*time.Minute, cmd)
			if !reflect.DeepEqual(checks(got), tc.want) {
				t.Fatalf("checks %v, want %v: %+v", checks(got), tc.want, got)
			}
			if len(got) > 0 && !strings.Contains(got[0].Fix, tc.fixHas) {
				t.Errorf("fix %q lacks %q", got[0].Fix, tc.fixHas)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCheckInstance(t *testing.T) {
	binding := &BindingState{Kind: "ClusterBinding", Meta: metav1.ObjectMeta{Name: "widgets"}}
	in := func(mut func(*Instance)) Instance {
		i := Instance{API: "widgets.example.org", Kind: "Widget", Connection: "provider", Binding: binding,
			Meta: metav1.ObjectMeta{Namespace: "default", Name: "w1"}, CopyNamespace: "kbind-a", CopyName: "default.w1"}
		mut(&i)
		return i
	}
	cases := []struct {
		name        string
		in          Instance
		connProblem string
		want        []string
		has         string
	}{
		{"foreign object: Adopt is offered", in(func(i *Instance) {
			i.Meta.Annotations = map[string]string{kbindv1alpha1.ConflictAnnotation: "ForeignObjectExists"}
			i.Owner = "it has no kbind markers"
		}), "", []string{"object.conflict"}, `patch clusterbinding widgets --type=merge -p '{"spec":{"conflictPolicy":"Adopt"}}'`},
		{"owned by another: never Adopt", in(func(i *Instance) {
			i.Meta.Annotations = map[string]string{kbindv1alpha1.ConflictAnnotation: "OwnedByAnother"}
		}), "", []string{"object.conflict"}, "Adopt never steals"},
		{"a user's object where the binding imports the provider's: rename, never Adopt", in(func(i *Instance) {
			i.Meta.Annotations = map[string]string{kbindv1alpha1.ConflictAnnotation: "ConsumerObjectExists"}
		}), "", []string{"object.conflict"}, "re-create it under another name"},
		{"stuck behind kbind's finalizer while the provider is down", in(func(i *Instance) {
			i.Meta.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Minute)}
			i.Meta.Finalizers = []string{kbindv1alpha1.SyncerFinalizer}
		}), "connection refused", []string{"object.stuckDeleting"}, "do not remove the finalizer"},
		{"stuck behind the provider copy's foreground deletion", in(func(i *Instance) {
			i.Meta.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Minute)}
			i.Meta.Finalizers = []string{kbindv1alpha1.SyncerFinalizer}
			i.Copy = &CopyState{Exists: true, Deleting: true, Finalizers: []string{metav1.FinalizerDeleteDependents}}
		}), "", []string{"object.stuckDeleting"}, "garbage collector removes it once the copy's dependents whose ownerReferences set blockOwnerDeletion are gone"},
		{"stuck behind a provider controller's finalizer on the copy", in(func(i *Instance) {
			i.Meta.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Minute)}
			i.Meta.Finalizers = []string{kbindv1alpha1.SyncerFinalizer}
			i.Copy = &CopyState{Exists: true, Deleting: true, Finalizers: []string{"db.example.org/backup"}}
		}), "", []string{"object.stuckDeleting"}, "get widgets.example.org default.w1 -o yaml   # the provider's controllers owning these finalizers must finish"},
		{"stuck behind another controller's finalizer", in(func(i *Instance) {
			i.Meta.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Minute)}
			i.Meta.Finalizers = []string{"example.org/protect"}
		}), "", []string{"object.stuckDeleting"}, "controller owning the finalizer"},
		{"deleting recently", in(func(i *Instance) {
			i.Meta.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
		}), "", []string{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkInstance(tc.in, tc.connProblem, now, 5*time.Minute, cmd)
			if !reflect.DeepEqual(checks(got), tc.want) {
				t.Fatalf("checks %v, want %v: %+v", checks(got), tc.want, got)
			}
			if len(got) > 0 && !strings.Contains(got[0].Fix, tc.has) {
				t.Errorf("fix %q lacks %q", got[0].Fix, tc.has)
			}
			if tc.in.Copy != nil && tc.in.Copy.Deleting && !strings.Contains(got[0].Problem, fmt.Sprint(tc.in.Copy.Finalizers)) {
				t.Errorf("problem %q does not name the provider copy's finalizers", got[0].Problem)
			}
			if tc.connProblem != "" && !strings.Contains(got[0].Problem, tc.connProblem) {
				t.Errorf("problem %q does not name the Connection's problem", got[0].Problem)
			}
		})
	}
}

func TestSuggestAPI(t *testing.T) {
	exported := []kbindv1alpha1.ExportedAPI{widgets, things}
	for name, want := range map[string]string{
		"Widget": "widgets.example.org", "widgets": "widgets.example.org", "ClusterThing": "clusterthings.example.org",
		"example.org/v1": "", "Gadget": "",
	} {
		if got := suggestAPI(name, exported); got != want {
			t.Errorf("suggestAPI(%q) = %q, want %q", name, got, want)
		}
	}
	if got := suggestAPI("example.org/v1", []kbindv1alpha1.ExportedAPI{widgets}); got != "widgets.example.org" {
		t.Errorf("the only API of a group: %q", got)
	}
	for name, want := range map[string]bool{"widgets.example.org": true, "Widget": false, "example.org/v1": false, "Widgets.example.org": false, ".x": false} {
		if wellFormedAPIName(name) != want {
			t.Errorf("wellFormedAPIName(%q) != %v", name, want)
		}
	}
}

// TestReportSchema holds the JSON schema documented in docs/cli.md#doctor.
func TestReportSchema(t *testing.T) {
	r := &Report{Checked: []string{"Connection provider"}, Findings: []Finding{{Check: "connection.secret", Severity: SeverityError,
		Object: Object{Cluster: "consumer", Kind: "Connection", Name: "provider"}, Field: "spec.kubeconfigSecretRef", Problem: "p", Evidence: "e", Fix: "f", Doc: docConnection}}}
	r.finish()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		out := []string{}
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if k := keys(got); !reflect.DeepEqual(k, []string{"checked", "findings", "healthy", "version"}) {
		t.Errorf("report keys %v", k)
	}
	f := got["findings"].([]any)[0].(map[string]any)
	if k := keys(f); !reflect.DeepEqual(k, []string{"check", "doc", "evidence", "field", "fix", "object", "problem", "severity"}) {
		t.Errorf("finding keys %v", k)
	}
	if k := keys(f["object"].(map[string]any)); !reflect.DeepEqual(k, []string{"cluster", "kind", "name"}) {
		t.Errorf("object keys %v", k)
	}
	if got["version"] != ReportVersion || got["healthy"] != false {
		t.Errorf("version %v healthy %v", got["version"], got["healthy"])
	}
}

func TestExit(t *testing.T) {
	note := Finding{Severity: SeverityNote}
	warn := Finding{Severity: SeverityWarning}
	cases := []struct {
		name      string
		findings  []Finding
		unchecked []string
		want      int
		healthy   bool
	}{
		{"nothing", nil, nil, ExitHealthy, true},
		{"a note only", []Finding{note}, nil, ExitHealthy, true},
		{"a warning", []Finding{note, warn}, nil, ExitFindings, false},
		{"could not check", nil, []string{"Connections: forbidden"}, ExitCouldNotCheck, false},
		{"findings and something unchecked: the findings count", []Finding{warn}, []string{"x"}, ExitFindings, false},
	}
	for _, tc := range cases {
		r := &Report{Findings: tc.findings, Unchecked: tc.unchecked}
		r.finish()
		if r.Exit() != tc.want || r.Healthy != tc.healthy {
			t.Errorf("%s: exit %d healthy %v, want %d %v", tc.name, r.Exit(), r.Healthy, tc.want, tc.healthy)
		}
	}
}
