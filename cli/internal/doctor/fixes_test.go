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
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestHelmInstallCommand(t *testing.T) {
	cases := []struct {
		name string
		k    KonnectorInstall
		want string
	}{
		{"groups, CRDs Helm will install", KonnectorInstall{Groups: []string{"acme.io", "example.org"}},
			"helm install konnector charts/konnector -n kbind --create-namespace --set 'rbac.boundResourceGroups={acme.io,example.org}'"},
		{"kbind's CRDs exist without Helm: installCRDs=false", KonnectorInstall{Groups: []string{"example.org"}, UnmanagedCRDs: []string{"connections.core.kbind.io"}},
			"helm install konnector charts/konnector -n kbind --create-namespace --set 'rbac.boundResourceGroups={example.org}' --set installCRDs=false"},
		{"a named consumer context", KonnectorInstall{Groups: []string{"example.org"}, Context: "kind-consumer"},
			"helm install konnector charts/konnector -n kbind --create-namespace --set 'rbac.boundResourceGroups={example.org}' --kube-context=kind-consumer"},
		{"no group known: a placeholder, never an empty list the chart refuses", KonnectorInstall{},
			"helm install konnector charts/konnector -n kbind --create-namespace --set 'rbac.boundResourceGroups={<the API groups you bind, e.g. example.org>}'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.k.HelmInstallCommand(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// The konnector finding prints it.
	f := checkKonnectors(nil, Commands{Konnector: cases[1].k})
	if len(f) != 1 || !strings.HasPrefix(f[0].Fix, cases[1].want+"   #") {
		t.Errorf("konnector.outside: %+v", f)
	}
}

func TestBoundGroups(t *testing.T) {
	binding := func(apis ...kbindv1alpha1.APIReference) BindingState {
		return BindingState{Kind: "ClusterBinding", Spec: kbindv1alpha1.BindingSpec{APIs: apis}}
	}
	exporting := connection(func(c *kbindv1alpha1.Connection) {
		c.Status.ExportedAPIs = []kbindv1alpha1.ExportedAPI{widgets, {Name: "dbs.data.io", Group: "data.io"}}
	})
	cases := []struct {
		name     string
		bindings []BindingState
		conns    []kbindv1alpha1.Connection
		want     []string
	}{
		{"the bound APIs' groups, sorted, once", []BindingState{
			binding(kbindv1alpha1.APIReference{Name: "widgets.example.org"}, kbindv1alpha1.APIReference{Name: "gadgets.example.org"}),
			binding(kbindv1alpha1.APIReference{Name: "certs.acme.io"})}, []kbindv1alpha1.Connection{exporting}, []string{"acme.io", "example.org"}},
		{"a projected API: its consumer group", []BindingState{binding(kbindv1alpha1.APIReference{Name: "widgets.example.org",
			Projection: &kbindv1alpha1.Projection{Group: "acme.io", Kind: "AcmeWidget"}})}, nil, []string{"acme.io"}},
		{"no binding: the exported APIs' groups", nil, []kbindv1alpha1.Connection{exporting}, []string{"data.io", "example.org"}},
		{"a Kind instead of an API name is skipped", []BindingState{binding(kbindv1alpha1.APIReference{Name: "Widget"})}, nil, nil},
		{"groups the chart refuses are left out", []BindingState{binding(kbindv1alpha1.APIReference{Name: "deployments.apps"},
			kbindv1alpha1.APIReference{Name: "connections.core.kbind.io"}, kbindv1alpha1.APIReference{Name: "gateways.gateway.networking.k8s.io"})}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := BoundGroups(tc.bindings, tc.conns); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHelmOwned(t *testing.T) {
	helm := map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	release := map[string]string{"meta.helm.sh/release-name": "konnector", "meta.helm.sh/release-namespace": "kbind"}
	cases := []struct {
		name                string
		labels, annotations map[string]string
		want                bool
	}{
		{"the release's", helm, release, true},
		{"installed by kubectl (testenv, quickstart)", nil, nil, false},
		{"Helm's label only", helm, nil, false},
		{"another release", helm, map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "kbind"}, false},
		{"another namespace", helm, map[string]string{"meta.helm.sh/release-name": "konnector", "meta.helm.sh/release-namespace": "default"}, false},
	}
	for _, tc := range cases {
		if got := HelmOwned(tc.labels, tc.annotations); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSecretNamespace(t *testing.T) {
	// The message as engine/connection writes it.
	refused := func(p *ConnectionProbe) {
		p.Connection.Spec.KubeconfigSecretRef.Namespace = "team-a"
		p.Connection.Status.Conditions = []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SecretNotFound"},
			{Type: "SecretValid", Status: metav1.ConditionFalse, Reason: "SecretNotFound",
				Message: `Secret team-a/provider-kubeconfig: namespace "team-a" is not one of the konnector's allowed Secret namespaces ([kbind]); move the Secret or add the namespace to --secret-namespaces`}}
	}
	cases := []struct {
		name    string
		probe   ConnectionProbe
		release *HelmRelease
		fixHas  []string
	}{
		{"doctor reads the Secret", healthyProbe(refused), nil, []string{"--secret-namespaces=kbind,team-a", "# helm upgrade konnector"}},
		{"doctor finds no Secret either: the namespace is said first", healthyProbe(refused, func(p *ConnectionProbe) { p.Secret, p.Reached = SecretMissing, false }), nil,
			[]string{"--secret-namespaces=kbind,team-a"}},
		{"the konnector's Helm release", healthyProbe(refused), &HelmRelease{Name: "kn", Namespace: "kbind-system"},
			[]string{"\nhelm upgrade kn charts/konnector -n kbind-system --reuse-values --set 'secretNamespaces={kbind,team-a}'", "create a new Connection whose Secret is in namespace kbind"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkConnection(tc.probe, now, 5*time.Minute, Commands{Consumer: "kubectl", KonnectorRelease: tc.release})
			if !reflect.DeepEqual(checks(got), []string{"connection.secret"}) {
				t.Fatalf("checks %v: %+v", checks(got), got)
			}
			f := got[0]
			if !strings.Contains(f.Problem, "namespace team-a is not one of its allowed Secret namespaces (kbind)") || strings.Contains(f.Problem, "does not exist") {
				t.Errorf("problem %q", f.Problem)
			}
			if !strings.Contains(f.Evidence, "reason SecretNotFound") {
				t.Errorf("evidence %q: the condition's reason stays SecretNotFound", f.Evidence)
			}
			for _, s := range tc.fixHas {
				if !strings.Contains(f.Fix, s) {
					t.Errorf("fix %q lacks %q", f.Fix, s)
				}
			}
		})
	}
	// A Secret that is missing in an allowed namespace is still "does not exist".
	missing := healthyProbe(func(p *ConnectionProbe) {
		p.Secret, p.Reached = SecretMissing, false
		p.Connection.Status.Conditions = []metav1.Condition{{Type: "SecretValid", Status: metav1.ConditionFalse, Reason: "SecretNotFound", Message: "Secret kbind/provider-kubeconfig not found"}}
	})
	if got := checkConnection(missing, now, 5*time.Minute, cmd); len(got) != 1 || !strings.Contains(got[0].Problem, "does not exist") {
		t.Errorf("missing Secret: %+v", got)
	}
}

func TestDeletionProtected(t *testing.T) {
	protected := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonDeletionProtected), Message: "deletion protected"}}
	deleting := &metav1.Time{Time: now.Add(-time.Hour)}
	conn := healthyProbe(func(p *ConnectionProbe) {
		p.Connection.DeletionTimestamp, p.Connection.Finalizers = deleting, []string{kbindv1alpha1.CleanupFinalizer}
		p.Connection.Status.Conditions = protected
	})
	got := checkConnection(conn, now, 5*time.Minute, cmd)
	if !reflect.DeepEqual(checks(got), []string{"connection.deletionProtected"}) ||
		!strings.HasPrefix(got[0].Fix, `kubectl --context=consumer patch connection provider --type=merge -p '{"spec":{"deletionProtection":false}}'`) {
		t.Errorf("Connection: %+v", got)
	}
	c := connection()
	for _, tc := range []struct {
		kind, ns, fix, unbind string
	}{
		{"ClusterBinding", "", `kubectl --context=consumer patch clusterbinding w --type=merge -p '{"spec":{"deletionProtection":false}}'`, "kubectl kbind unbind w\n"},
		{"Binding", "team-a", `kubectl --context=consumer patch bindings.core.kbind.io -n team-a w --type=merge -p '{"spec":{"deletionProtection":false}}'`, "kubectl kbind unbind w -n team-a\n"},
	} {
		b := BindingState{Kind: tc.kind, Meta: metav1.ObjectMeta{Name: "w", Namespace: tc.ns, DeletionTimestamp: deleting, Finalizers: []string{kbindv1alpha1.CleanupFinalizer}},
			Spec:   kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}},
			Status: kbindv1alpha1.BindingStatus{Conditions: protected}}
		got := checkBinding(b, bindingContext{Conn: &c}, now, 5*time.Minute, cmd)
		want := "binding.deletionProtected"
		if tc.kind == "ClusterBinding" {
			want = "clusterBinding.deletionProtected"
		}
		if !reflect.DeepEqual(checks(got), []string{want}) || !strings.HasPrefix(got[0].Fix, tc.fix) || !strings.Contains(got[0].Fix, tc.unbind) {
			t.Errorf("%s: %+v", tc.kind, got)
		}
	}
}

func TestStuckBindingOfAGoneProvider(t *testing.T) {
	c := connection()
	deleting := BindingState{Kind: "ClusterBinding", Meta: metav1.ObjectMeta{Name: "w", DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Hour)}, Finalizers: []string{kbindv1alpha1.CleanupFinalizer}},
		Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}}}
	orphan := `kubectl --context=consumer patch clusterbinding w --type=merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`
	cases := []struct {
		name   string
		probe  *ConnectionProbe
		fixHas string
	}{
		{"revoked: Orphan, saying what stays", ptr(healthyProbe(func(p *ConnectionProbe) { p.Reached, p.ReachErr = false, apierrors.NewUnauthorized("revoked") })), orphan + "\n# releases"},
		{"unreachable: Orphan", ptr(healthyProbe(func(p *ConnectionProbe) { p.Reached, p.ReachErr = false, errors.New("dial tcp: connection refused") })), orphan},
		{"forbidden (a missing verb, fixable): wait for the Connection", ptr(healthyProbe(func(p *ConnectionProbe) {
			p.Reached, p.ReachErr = false, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New("no"))
		})), "keep the konnector running"},
		{"a working provider: it drains", ptr(healthyProbe()), "keep the konnector running"},
		{"not probed", nil, "keep the konnector running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkBinding(deleting, bindingContext{Conn: &c, ConnBroken: tc.probe != nil && tc.probe.Broken(), Probe: tc.probe}, now, 5*time.Minute, cmd)
			if len(got) == 0 || got[0].Check != "clusterBinding.stuckDeleting" || !strings.Contains(got[0].Fix, tc.fixHas) {
				t.Fatalf("%+v", got)
			}
			if strings.HasPrefix(got[0].Fix, "kubectl") && !strings.Contains(got[0].Fix, "provider copies STAY on the provider") {
				t.Errorf("the Orphan fix does not say what stays on the provider: %s", got[0].Fix)
			}
		})
	}
}

func TestWrongClusterProblem(t *testing.T) {
	if p := wrongClusterProblem(0, 0); p != "" {
		t.Errorf("an empty cluster: %q", p)
	}
	for _, n := range [][2]int{{1, 0}, {0, 2}, {3, 4}} {
		if p := wrongClusterProblem(n[0], n[1]); !strings.Contains(p, "looks like a provider") || !strings.Contains(p, "consumer's kubeconfig") {
			t.Errorf("%v: %q", n, p)
		}
	}
}

// TestNoFixEditsWhatItMustNot: across the scenarios of every check, no fix
// tells to change an immutable field (connectionRef, kubeconfigSecretRef,
// isolation) other than to say it is immutable, and no fix writes an
// object of another Connection ("other": its CRD, its bindings, itself).
func TestNoFixEditsWhatItMustNot(t *testing.T) {
	c := connection()
	otherCRD := map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Managed: true, Connection: "other"}}
	unannotated := map[string]ConsumerCRD{"widgets.example.org": {Found: true, Established: true, Connection: "other"}}
	pending := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "installing"}}
	b := func(name string, mut ...func(*BindingState)) BindingState {
		s := BindingState{Kind: "ClusterBinding", Meta: metav1.ObjectMeta{Name: name},
			Spec:   kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}, {Name: "gadgets.example.org"}}},
			Status: kbindv1alpha1.BindingStatus{Conditions: pending}}
		for _, m := range mut {
			m(&s)
		}
		return s
	}
	var fixes []Finding
	for _, bc := range []struct {
		b    BindingState
		ctx  bindingContext
		crds map[string]ConsumerCRD
	}{
		{b("w"), bindingContext{Conn: &c}, otherCRD},
		{b("w"), bindingContext{Conn: &c}, unannotated},
		{b("w", func(s *BindingState) { s.Spec.APIs = s.Spec.APIs[:1] }), bindingContext{Conn: &c}, otherCRD},
		{b("w", func(s *BindingState) { s.Spec.ConnectionRef.Name = "gone" }), bindingContext{}, nil},
		{b("w", func(s *BindingState) {
			s.Kind, s.Meta.Namespace = "Binding", "team-a"
			s.Spec.ConnectionRef.Name = "gone"
		}), bindingContext{}, nil},
		{b("w", func(s *BindingState) { s.Spec.APIs[0].Name = "Widget" }), bindingContext{Conn: &c}, nil},
		{b("w", func(s *BindingState) { s.Spec.APIs[0].Name = "clusterthings.example.org" }), bindingContext{Conn: ptr(connection(func(c *kbindv1alpha1.Connection) {
			c.Spec.Isolation = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "kbind-a"}
		}))}, nil},
	} {
		bc.ctx.ConsumerCRDs = bc.crds
		fixes = append(fixes, checkBinding(bc.b, bc.ctx, now, 5*time.Minute, cmd)...)
	}
	for _, p := range []ConnectionProbe{
		healthyProbe(func(p *ConnectionProbe) { p.Secret, p.Reached = SecretKeyMissing, false }),
		healthyProbe(func(p *ConnectionProbe) { p.Secret, p.Reached = SecretMissing, false }),
		healthyProbe(func(p *ConnectionProbe) { p.Secret, p.Reached, p.SecretProblem = SecretInvalid, false, "bad" }),
		healthyProbe(func(p *ConnectionProbe) { p.RemoteUID = "another" }),
		healthyProbe(func(p *ConnectionProbe) { p.Reached, p.ReachErr = false, errors.New("refused") }),
	} {
		fixes = append(fixes, checkConnection(p, now, 5*time.Minute, cmd)...)
	}
	if len(fixes) < 10 {
		t.Fatalf("only %d findings: the scenarios do not run", len(fixes))
	}
	immutable := regexp.MustCompile(`connectionRef|kubeconfigSecretRef|/spec/isolation|"isolation"|spec\.isolation`)
	otherWrite := regexp.MustCompile(`\b(patch|annotate|label|edit|delete|apply|replace)\b.*\bother\b|core\.kbind\.io/connection=other`)
	for _, f := range fixes {
		for _, line := range strings.Split(f.Fix, "\n") {
			if immutable.MatchString(line) && !strings.Contains(line, "immutable") {
				t.Errorf("%s fix changes an immutable field: %q", f.Check, line)
			}
			command, _, _ := strings.Cut(line, "#")
			if otherWrite.MatchString(command) {
				t.Errorf("%s fix writes Connection other's objects: %q", f.Check, line)
			}
			// A CRD annotated for another Connection is never labelled or annotated.
			if strings.Contains(command, "crd widgets.example.org") && (strings.Contains(command, " label ") || strings.Contains(command, " annotate ")) {
				t.Errorf("%s fix takes over another Connection's CRD: %q", f.Check, line)
			}
		}
	}
}

func TestKonnectorCommands(t *testing.T) {
	outside := Commands{Consumer: "kubectl --context=consumer"}
	inside := Commands{Consumer: "kubectl --context=consumer", Konnector: KonnectorInstall{Context: "consumer"},
		KonnectorDeployment: &Konnector{Namespace: "kbind-system", Name: "kn"}, KonnectorRelease: &HelmRelease{Name: "kn", Namespace: "kbind-system"}}
	for _, tc := range []struct {
		name          string
		cmd           Commands
		logs, upgrade string
	}{
		{"a Deployment of a Helm release", inside, "kubectl --context=consumer -n kbind-system logs deployment/kn -c konnector --tail=200",
			"helm upgrade kn charts/konnector -n kbind-system --reuse-values --kube-context=consumer"},
		{"outside the cluster: no command to guess", outside, "# no konnector Deployment on this cluster: read the log of the konnector process where it runs",
			"# no konnector Helm release on this cluster: upgrade the konnector the way it was installed"},
	} {
		if got := tc.cmd.konnectorLogs(); got != tc.logs {
			t.Errorf("%s: logs %q, want %q", tc.name, got, tc.logs)
		}
		if got := tc.cmd.helmUpgrade(); got != tc.upgrade {
			t.Errorf("%s: upgrade %q, want %q", tc.name, got, tc.upgrade)
		}
	}
}
