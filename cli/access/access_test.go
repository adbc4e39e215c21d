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

package access

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

var (
	widgets       = API{Group: "example.org", Resource: "widgets", Namespaced: true}
	clusterThings = API{Group: "example.org", Resource: "clusterthings"}
	confined      = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"}
	prefixed      = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}
	none          = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}
)

// renewal is what grant fills in: the API server's audiences (those of
// the token grant minted) and --duration's default.
var renewal = &TokenRenewal{Audiences: []string{"https://kubernetes.default.svc.cluster.local", "k3s"}, MaxLifetimeSeconds: 2592000}

// withRelated is r granting the related kinds.
func withRelated(r Request, kinds ...string) Request {
	r.Related = kinds
	return r
}

// request is consumer a's request with the defaults grant fills in.
func request(iso kbindv1alpha1.Isolation, apis ...API) Request {
	r := Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: iso, APIs: apis, TokenRenewal: renewal}
	if iso.Mode == kbindv1alpha1.IsolationNone {
		r.LeaseNamespace = "kbind-a"
	}
	return r
}

func TestValidate(t *testing.T) {
	with := func(r Request, f func(*Request)) Request { f(&r); return r }
	cases := []struct {
		name string
		req  Request
		want string // "" when valid
	}{
		{"Namespace", with(request(confined, widgets), func(r *Request) { r.Related = []string{"secrets"} }), ""},
		{"Prefixed with a cluster-scoped API", request(prefixed, widgets, clusterThings), ""},
		{"None", request(none, widgets), ""},
		{"no APIs", request(confined), "at least one API"},
		{"bad consumer name", with(request(confined, widgets), func(r *Request) { r.Consumer = "Team_A" }), "DNS label"},
		{"cluster-scoped under Namespace", request(confined, clusterThings), "cannot confine it"},
		{"bad prefix", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "A."}, widgets), "--prefix"},
		{"reserved prefix kube", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "kube"}, widgets), `--prefix "kube" is reserved`},
		{"reserved prefix kbind", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "kbind"}, widgets), `is reserved`},
		{"prefix extending a reserved one", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "kube-team"}, widgets), "(kube)"},
		{"reserved prefix default", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "default"}, widgets), "reserved"},
		{"prefix merely starting like a reserved one", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "kubernetes"}, widgets), ""},
		{"isolation namespace kube-system", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "kube-system"}, widgets), "a namespace of the provider's system"},
		{"isolation namespace of the ServiceAccounts", request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "kbind"}, widgets), "holds the consumers' ServiceAccounts"},
		{"Lease namespace default", with(request(none, widgets), func(r *Request) { r.LeaseNamespace = "default" }), "default namespace"},
		{"Lease namespace kube-node-lease", with(request(none, widgets), func(r *Request) { r.LeaseNamespace = "kube-node-lease" }), "system"},
		{"unknown mode", request(kbindv1alpha1.Isolation{Mode: "Shared"}, widgets), "want None, Namespace or Prefixed"},
		{"related pods", with(request(confined, widgets), func(r *Request) { r.Related = []string{"pods"} }), "only secrets and configmaps"},
		{"related outside Namespace", with(request(prefixed, widgets), func(r *Request) { r.Related = []string{"secrets"} }), "kube-system's included"},
		{"a prefix that is the ServiceAccounts' namespace", with(request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "team"}, widgets),
			func(r *Request) { r.ServiceAccountNamespace = "team" }), "covers namespace team, which holds the consumers' ServiceAccounts"},
		{"a prefix covering the ServiceAccounts' namespace", with(request(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "team"}, widgets),
			func(r *Request) { r.ServiceAccountNamespace = "team-sas" }), "covers namespace team-sas"},
		{"no token renewal", with(request(confined, widgets), func(r *Request) { r.TokenRenewal = nil }), ""},
		{"token renewal without audiences", with(request(confined, widgets), func(r *Request) { r.TokenRenewal = &TokenRenewal{MaxLifetimeSeconds: 3600} }), "at least one audience"},
		{"token lifetime under the API server's minimum", with(request(confined, widgets), func(r *Request) {
			r.TokenRenewal = &TokenRenewal{Audiences: []string{"x"}, MaxLifetimeSeconds: 599}
		}), "at least 10m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected refusal: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
}

func TestObjects(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		want []string
	}{
		{"Namespace: everything in a Role of its namespace", request(confined, widgets), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /tenant-a",
			"Role kbind/kbind-consumer-a.token", "Role tenant-a/kbind-consumer-a", "RoleBinding kbind/kbind-consumer-a.token", "RoleBinding tenant-a/kbind-consumer-a",
			"ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a.token", "ValidatingAdmissionPolicyBinding /kbind-consumer-a.token",
		}},
		{"Namespace with related Secrets: the Secrets policy refuses service-account token Secrets", withRelated(request(confined, widgets), "secrets", "configmaps"), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /tenant-a",
			"Role kbind/kbind-consumer-a.token", "Role tenant-a/kbind-consumer-a", "RoleBinding kbind/kbind-consumer-a.token", "RoleBinding tenant-a/kbind-consumer-a",
			"ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a", "ValidatingAdmissionPolicy /kbind-consumer-a.token",
			"ValidatingAdmissionPolicyBinding /kbind-consumer-a", "ValidatingAdmissionPolicyBinding /kbind-consumer-a.token",
		}},
		{"Namespace with related ConfigMaps only: no Secrets policy", withRelated(request(confined, widgets), "configmaps"), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /tenant-a",
			"Role kbind/kbind-consumer-a.token", "Role tenant-a/kbind-consumer-a", "RoleBinding kbind/kbind-consumer-a.token", "RoleBinding tenant-a/kbind-consumer-a",
			"ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a.token", "ValidatingAdmissionPolicyBinding /kbind-consumer-a.token",
		}},
		{"Prefixed: the Lease in namespace <prefix>, writes confined by the policy", request(prefixed, widgets, clusterThings), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /a",
			"Role a/kbind-consumer-a", "Role kbind/kbind-consumer-a.token", "RoleBinding a/kbind-consumer-a", "RoleBinding kbind/kbind-consumer-a.token",
			"ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a", "ValidatingAdmissionPolicy /kbind-consumer-a.token",
			"ValidatingAdmissionPolicyBinding /kbind-consumer-a", "ValidatingAdmissionPolicyBinding /kbind-consumer-a.token",
		}},
		{"None: the Lease in its own namespace, writes kept out of other tenants' by the policy", request(none, widgets), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /kbind-a",
			"Role kbind-a/kbind-consumer-a", "Role kbind/kbind-consumer-a.token", "RoleBinding kbind-a/kbind-consumer-a", "RoleBinding kbind/kbind-consumer-a.token",
			"ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a", "ValidatingAdmissionPolicy /kbind-consumer-a.token",
			"ValidatingAdmissionPolicyBinding /kbind-consumer-a", "ValidatingAdmissionPolicyBinding /kbind-consumer-a.token",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.req.Objects()
			if got := strings.Join(SortedNames(objs), "\n"); got != strings.Join(tc.want, "\n") {
				t.Errorf("objects:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
			for _, o := range objs {
				if o.GetLabels()[ConsumerLabel] != "a" {
					t.Errorf("%s lacks the consumer label revoke finds it by", o.GetName())
				}
				if _, ok := o.(*corev1.Namespace); ok && tc.req.Isolation.Mode == kbindv1alpha1.IsolationPrefixed && o.GetLabels()[kbindv1alpha1.PrefixLabel] != "a" {
					t.Errorf("the Prefixed namespace lacks %s=a: the policy would refuse the consumer's Lease there", kbindv1alpha1.PrefixLabel)
				}
				if sa, ok := o.(*corev1.ServiceAccount); ok {
					if g := GrantOf(sa.Namespace, sa.Labels, sa.Annotations); g.Mode != tc.req.Isolation.Mode || g.Namespace != tc.req.Namespace() || g.Prefix != tc.req.Isolation.Prefix {
						t.Errorf("the ServiceAccount records %+v", g)
					}
				}
			}
			// Lease rights only in the consumer's own namespace, never cluster-wide.
			for _, o := range objs {
				switch role := o.(type) {
				case *rbacv1.ClusterRole:
					if grants(role.Rules, "leases") {
						t.Errorf("the ClusterRole grants Leases cluster-wide: %+v", role.Rules)
					}
					if grants(role.Rules, "events") {
						t.Errorf("the ClusterRole reads Events cluster-wide without ClusterWideEvents: %+v", role.Rules)
					}
				case *rbacv1.Role:
					if role.Name == TokenName("a") {
						continue // TestTokenRenewal
					}
					if role.Namespace != tc.req.Namespace() || !grants(role.Rules, "leases") {
						t.Errorf("the Role in %s does not hold the Lease rights: %+v", role.Namespace, role.Rules)
					}
				}
			}
		})
	}
	// The Namespace-mode Role holds exactly the APIs, the Lease, Events (read) and the related kinds.
	req := request(confined, widgets)
	req.Related = []string{"secrets"}
	var role *rbacv1.Role
	for _, o := range req.Objects() {
		if r, ok := o.(*rbacv1.Role); ok && r.Name == Name("a") {
			role = r
		}
	}
	if role == nil || len(role.Rules) != 4 || role.Rules[0].Resources[0] != "widgets" || role.Rules[1].Resources[0] != "leases" ||
		role.Rules[2].Resources[0] != "events" || strings.Join(role.Rules[2].Verbs, ",") != "get,list,watch" || role.Rules[3].Resources[0] != "secrets" {
		t.Errorf("Role rules %+v", role)
	}
	// Without CRD reads (schema source OpenAPI) the Namespace-mode ClusterRole reads the identity only.
	for _, o := range request(confined, widgets).Objects() {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && len(cr.Rules) != 1 {
			t.Errorf("cluster rules without CRD reads: %+v", cr.Rules)
		}
	}
	// Events cluster-wide only when asked.
	events := request(prefixed, widgets)
	events.ClusterWideEvents = true
	for _, o := range events.Objects() {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && !grants(cr.Rules, "events") {
			t.Errorf("ClusterWideEvents grants no Events read: %+v", cr.Rules)
		}
	}
}

func grants(rules []rbacv1.PolicyRule, resource string) bool {
	for _, r := range rules {
		for _, res := range r.Resources {
			if res == resource {
				return true
			}
		}
	}
	return false
}

// TestObjectsApplyOrder: the admission policy is applied before the roles
// it confines, the bindings last; revoke goes the other way, the policy
// last.
func TestObjectsApplyOrder(t *testing.T) {
	objs := request(prefixed, widgets).Objects()
	pos := map[string]int{}
	for i, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if o.GetName() == TokenName("a") {
			kind = "token " + kind
		}
		pos[kind] = i
	}
	// The token policy is in force before the Role that lets the consumer mint.
	if ordered := pos["token ValidatingAdmissionPolicy"] < pos["token ValidatingAdmissionPolicyBinding"] &&
		pos["token ValidatingAdmissionPolicyBinding"] < pos["token Role"] && pos["token Role"] < pos["token RoleBinding"]; !ordered {
		t.Errorf("token objects in apply order %v", SortedNames(objs))
	}
	if ordered := pos["Namespace"] < pos["ValidatingAdmissionPolicyBinding"] && pos["ValidatingAdmissionPolicyBinding"] < pos["ClusterRole"] &&
		pos["ClusterRole"] < pos["ClusterRoleBinding"] && pos["Role"] < pos["RoleBinding"]; !ordered {
		t.Errorf("apply order %v", SortedNames(objs))
	}
	// Under Namespace with related Secrets, the Secrets policy is in force
	// before the Role that lets the consumer write Secrets.
	objs = withRelated(request(confined, widgets), "secrets").Objects()
	pos = map[string]int{}
	for i, o := range objs {
		pos[Key(o)] = i
	}
	policy, binding := pos["ValidatingAdmissionPolicy /kbind-consumer-a"], pos["ValidatingAdmissionPolicyBinding /kbind-consumer-a"]
	if ordered := pos["Namespace /tenant-a"] < policy && policy < binding && binding < pos["ServiceAccount kbind/kbind-consumer-a"] &&
		binding < pos["Role tenant-a/kbind-consumer-a"] && pos["Role tenant-a/kbind-consumer-a"] < pos["RoleBinding tenant-a/kbind-consumer-a"] && policy > 0; !ordered {
		t.Errorf("Namespace with related Secrets, apply order %v", SortedNames(objs))
	}
	if Kinds[0].Kind != "ServiceAccount" || Kinds[len(Kinds)-1].Kind != "ValidatingAdmissionPolicy" {
		t.Errorf("revoke order %v: the ServiceAccount first, the policy last", Kinds)
	}
}

func TestCheck(t *testing.T) {
	pfx := func(p string) kbindv1alpha1.Isolation {
		return kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: p}
	}
	granted := func(consumer string, mode kbindv1alpha1.IsolationMode, ns, prefix string) Grant {
		return Grant{Consumer: consumer, ServiceAccountNamespace: "kbind", Recorded: true, Mode: mode, Namespace: ns, Prefix: prefix}
	}
	nsOf := func(name string, labels ...string) Namespace {
		l := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		return Namespace{Name: name, Labels: l}
	}
	teamA := granted("team-a", kbindv1alpha1.IsolationPrefixed, "team-a", "team-a")
	named := func(r Request, consumer string) Request { r.Consumer = consumer; return r }
	cases := []struct {
		name     string
		req      Request
		provider Provider
		want     string // "" when allowed
	}{
		{"first consumer", request(prefixed, widgets), Provider{Namespaces: []Namespace{nsOf("default"), nsOf("kube-system")}}, ""},
		{"a prefix another consumer's extends", named(request(pfx("team"), widgets), "team"), Provider{Grants: []Grant{teamA}},
			`prefix "team" overlaps consumer team-a's prefix "team-a"`},
		{"a prefix extending another consumer's", named(request(pfx("team-a-x"), widgets), "x"), Provider{Grants: []Grant{teamA}}, "overlaps consumer team-a's"},
		{"the same prefix", named(request(pfx("team-a"), widgets), "other"), Provider{Grants: []Grant{teamA}}, "overlaps"},
		{"prefixes sharing only letters", named(request(pfx("team-ab"), widgets), "ab"), Provider{Grants: []Grant{teamA}}, ""},
		{"a prefix covering an existing namespace", named(request(pfx("team"), widgets), "team"), Provider{Namespaces: []Namespace{nsOf("team-x"), nsOf("team-y", ConsumerLabel, "y")}},
			"covers namespaces that exist and are not this consumer's (team-x, team-y)"},
		{"a prefix covering the consumer's own namespaces", named(request(pfx("team"), widgets), "team"),
			Provider{Grants: []Grant{granted("team", kbindv1alpha1.IsolationPrefixed, "team", "team")},
				Namespaces: []Namespace{nsOf("team", ConsumerLabel, "team", kbindv1alpha1.PrefixLabel, "team"), nsOf("team-x", kbindv1alpha1.PrefixLabel, "team")}}, ""},
		{"a namespace labelled for another consumer with the same prefix label", named(request(pfx("team"), widgets), "team"),
			Provider{Namespaces: []Namespace{nsOf("team", ConsumerLabel, "other", kbindv1alpha1.PrefixLabel, "team")}}, "not this consumer's (team)"},
		{"own namespace of another consumer", named(request(confined, widgets), "b"), Provider{Grants: []Grant{granted("a", kbindv1alpha1.IsolationNamespace, "tenant-a", "")},
			Namespaces: []Namespace{nsOf("tenant-a", ConsumerLabel, "a")}}, "namespace tenant-a is consumer a's own namespace"},
		{"own namespace exists, unlabelled", request(confined, widgets), Provider{Namespaces: []Namespace{nsOf("tenant-a")}},
			"namespace tenant-a exists and was not granted to consumer a"},
		{"own namespace labelled for it", request(confined, widgets), Provider{Namespaces: []Namespace{nsOf("tenant-a", ConsumerLabel, "a")}}, ""},
		{"own namespace under another consumer's prefix", request(none, widgets), Provider{Grants: []Grant{granted("k", kbindv1alpha1.IsolationPrefixed, "kbind", "kbind")}},
			`falls under consumer k's prefix "kbind"`},
		{"renewal", request(confined, widgets), Provider{Grants: []Grant{granted("a", kbindv1alpha1.IsolationNamespace, "tenant-a", "")},
			Namespaces: []Namespace{nsOf("tenant-a", ConsumerLabel, "a")}}, ""},
		{"a change of mode", request(confined, widgets), Provider{Grants: []Grant{granted("a", kbindv1alpha1.IsolationNone, "kbind-a", "")}},
			"is granted with isolation None with Lease namespace kbind-a; a grant never changes a consumer's isolation (isolation Namespace in namespace tenant-a requested)"},
		{"a change of prefix", request(prefixed, widgets), Provider{Grants: []Grant{granted("a", kbindv1alpha1.IsolationPrefixed, "b", "b")}}, "kubectl kbind revoke a"},
		{"a change of namespace", request(confined, widgets), Provider{Grants: []Grant{granted("a", kbindv1alpha1.IsolationNamespace, "tenant-x", "")}}, "revoke"},
		{"a grant of an earlier version", request(confined, widgets), Provider{Grants: []Grant{{Consumer: "a", ServiceAccountNamespace: "tenant-a"}}}, "granted by an earlier kubectl-kbind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Check(tc.provider)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected refusal: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"team", "team", true}, {"team", "team-a", true}, {"team-a", "team", true}, {"team-a-b", "team", true},
		{"team", "teams", false}, {"team-a", "team-b", false}, {"a", "ab", false}, {"kube", "kubernetes", false},
	} {
		if got := Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlap(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// TestDerivedNamesNeverCollide: two consumers never share a derived
// object ("nd" and "nd-discovery" once shared a discovery ClusterRole).
func TestDerivedNamesNeverCollide(t *testing.T) {
	for _, pair := range [][2]string{{"nd", "nd-discovery"}, {"a", "a-a"}, {"team", "team-a"}, {"a-discovery", "a"}, {"consumer-a", "a"}, {"a", "a-token"}, {"a-token", "a"}} {
		for _, mode := range []kbindv1alpha1.IsolationMode{kbindv1alpha1.IsolationNamespace, kbindv1alpha1.IsolationPrefixed, kbindv1alpha1.IsolationNone} {
			if shared := sharedObjects(pair[0], pair[1], mode); shared != "" {
				t.Errorf("%s and %s (%s) share %s", pair[0], pair[1], mode, shared)
			}
		}
	}
}

// FuzzDerivedNames: for any two different consumer names, in any mode
// with the default names grant gives, no derived object is shared.
func FuzzDerivedNames(f *testing.F) {
	f.Add("nd", "nd-discovery", uint8(0))
	f.Add("a", "a-a", uint8(1))
	f.Add("team", "team-a", uint8(2))
	f.Add("a", "a-token", uint8(1))
	f.Fuzz(func(t *testing.T, a, b string, m uint8) {
		if a == b || len(a) > 30 || len(b) > 30 || len(validation.IsDNS1123Label(a)) > 0 || len(validation.IsDNS1123Label(b)) > 0 {
			return
		}
		mode := []kbindv1alpha1.IsolationMode{kbindv1alpha1.IsolationNamespace, kbindv1alpha1.IsolationPrefixed, kbindv1alpha1.IsolationNone}[int(m)%3]
		if shared := sharedObjects(a, b, mode); shared != "" {
			t.Errorf("%q and %q (%s) share %s", a, b, mode, shared)
		}
	})
}

// sharedObjects returns an object both consumers' default grants in mode
// make, "" when none (the ServiceAccounts' namespace is no grant's).
func sharedObjects(a, b string, mode kbindv1alpha1.IsolationMode) string {
	keys := map[string]bool{}
	for i, consumer := range []string{a, b} {
		req := Request{Consumer: consumer, ServiceAccountNamespace: "kbind", APIs: []API{widgets}, Isolation: kbindv1alpha1.Isolation{Mode: mode}, TokenRenewal: renewal}
		switch mode {
		case kbindv1alpha1.IsolationNamespace:
			// With the Secrets policy: every object a Namespace grant can make.
			req.Isolation.Namespace, req.Related = DefaultNamespace(consumer), []string{"secrets"}
		case kbindv1alpha1.IsolationPrefixed:
			req.Isolation.Prefix = consumer
		default:
			req.LeaseNamespace = DefaultNamespace(consumer)
		}
		for _, o := range req.Objects() {
			k := Key(o)
			if i == 1 && keys[k] {
				return k
			}
			keys[k] = true
		}
	}
	return ""
}

func TestReviews(t *testing.T) {
	key := func(a authorizationv1.ResourceAttributes) string {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		return strings.Join([]string{a.Namespace, a.Verb, a.Group, res, a.Name}, "|")
	}
	withRelated := request(confined, widgets)
	withRelated.Related, withRelated.CRDReads = []string{"secrets"}, true
	withEvents := request(none, widgets)
	withEvents.ClusterWideEvents = true
	cases := []struct {
		name      string
		req       Request
		want, not []string
	}{
		{"Namespace: objects and the Lease in the isolation namespace, identity and CRDs cluster-wide", withRelated,
			[]string{"tenant-a|create|example.org|widgets|", "tenant-a|watch|example.org|widgets|", "tenant-a|update|coordination.k8s.io|leases|",
				"tenant-a|delete||secrets|", "tenant-a|watch||events|", "|get||namespaces|kube-system", "|list|apiextensions.k8s.io|customresourcedefinitions|",
				"kbind|create||serviceaccounts/token|kbind-consumer-a"},
			[]string{"|create||namespaces|", "|list|example.org|widgets|", "tenant-a|list||configmaps|", "|watch||events|",
				"kbind|get||serviceaccounts/token|kbind-consumer-a", "kbind|create||serviceaccounts/token|"}},
		{"Prefixed: cluster-wide, with namespace creation, the Lease in the prefix, no CRD reads for OpenAPI",
			request(prefixed, widgets, clusterThings),
			[]string{"|create||namespaces|", "|patch|example.org|clusterthings|", "a|get|coordination.k8s.io|leases|"},
			[]string{"|list|apiextensions.k8s.io|customresourcedefinitions|", "|get||secrets|", "|get|coordination.k8s.io|leases|", "|watch||events|"}},
		{"None with provider Events", withEvents,
			[]string{"|watch||events|", "kbind-a|update|coordination.k8s.io|leases|"},
			[]string{"|update|coordination.k8s.io|leases|"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]bool{}
			for _, a := range tc.req.Reviews() {
				got[key(a)] = true
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("no review %q", w)
				}
			}
			for _, n := range tc.not {
				if got[n] {
					t.Errorf("review %q is more than the grant", n)
				}
			}
		})
	}
}

// TestPolicy pins what the admission policy checks per mode; e2e/attack
// proves each rule against a real API server.
func TestPolicy(t *testing.T) {
	expressions := func(req Request) string {
		var out []string
		for _, o := range req.Objects() {
			vap, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			if !ok {
				continue
			}
			for _, m := range vap.Spec.MatchConditions {
				out = append(out, m.Expression)
			}
			for _, r := range vap.Spec.MatchConstraints.ResourceRules {
				out = append(out, strings.Join(r.APIGroups, ",")+"|"+strings.Join(r.Resources, ","))
			}
			for _, v := range vap.Spec.Variables {
				out = append(out, v.Name+": "+v.Expression)
			}
			for _, v := range vap.Spec.Validations {
				out = append(out, v.Expression)
			}
		}
		return strings.Join(out, "\n")
	}
	prefixedRules := expressions(request(prefixed, widgets))
	for _, want := range []string{
		`variables.place == "a" || variables.place.startsWith("a-")`,
		`!variables.namespaced || variables.namespacePrefix == "a"`,
		`variables.newPrefix == "a"`, `variables.oldPrefix == "a"`,
		`kubernetes.io/service-account-token`,
		`request.userInfo.username == "system:serviceaccount:kbind:kbind-consumer-a"`,
		`example.org|widgets,widgets/*`,
	} {
		if !strings.Contains(prefixedRules, want) {
			t.Errorf("the Prefixed policy lacks %s:\n%s", want, prefixedRules)
		}
	}
	noneRules := expressions(request(none, widgets))
	for _, want := range []string{
		`!has(request.namespace) || !(request.namespace in ["kube-system", "kube-public", "kube-node-lease"])`,
		`variables.namespaceConsumer in ['', "a"]`, `variables.oldConsumer in ['', "a"]`,
	} {
		if !strings.Contains(noneRules, want) {
			t.Errorf("the None policy lacks %s:\n%s", want, noneRules)
		}
	}
}

// TestSecretsPolicy pins the admission policy of a Namespace-isolated
// consumer granted related Secrets: its user may not create or change a
// service-account token Secret (RBAC cannot look at a Secret's type).
// e2e/attack's TestGrantAttacks proves it against a real API server.
func TestSecretsPolicy(t *testing.T) {
	var vap *admissionregistrationv1.ValidatingAdmissionPolicy
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range withRelated(request(confined, widgets), "secrets").Objects() {
		switch obj := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if obj.Name == Name("a") {
				vap = obj
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if obj.Name == Name("a") {
				binding = obj
			}
		}
	}
	if vap == nil || binding == nil {
		t.Fatal("no Secrets policy under Namespace isolation with related Secrets")
	}
	if vap.Labels[ConsumerLabel] != "a" || binding.Labels[ConsumerLabel] != "a" {
		t.Errorf("the Secrets policy lacks the consumer label revoke finds it by: %v, %v", vap.Labels, binding.Labels)
	}
	if binding.Spec.PolicyName != vap.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("binding %+v", binding.Spec)
	}
	if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", vap.Spec.FailurePolicy)
	}
	rules := vap.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || strings.Join(rules[0].APIGroups, ",") != "" || strings.Join(rules[0].APIVersions, ",") != "*" ||
		strings.Join(rules[0].Resources, ",") != "secrets" || len(rules[0].Operations) != 2 ||
		rules[0].Operations[0] != admissionregistrationv1.Create || rules[0].Operations[1] != admissionregistrationv1.Update {
		t.Errorf("match constraints %+v: CREATE and UPDATE of Secrets", rules)
	}
	if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != `request.userInfo.username == "system:serviceaccount:kbind:kbind-consumer-a"` {
		t.Errorf("match conditions %+v: the consumer's own requests only", vap.Spec.MatchConditions)
	}
	if len(vap.Spec.Variables) != 0 || len(vap.Spec.Validations) != 1 {
		t.Fatalf("variables %+v, validations %+v: want one validation", vap.Spec.Variables, vap.Spec.Validations)
	}
	v := vap.Spec.Validations[0]
	if want := `request.resource.resource != 'secrets' || request.operation == 'DELETE' || !has(object.type) || object.type != 'kubernetes.io/service-account-token'`; v.Expression != want {
		t.Errorf("validation:\n%s\nwant:\n%s", v.Expression, want)
	}
	if v.Reason == nil || *v.Reason != "Forbidden" {
		t.Errorf("reason %v, want Forbidden", v.Reason)
	}
	// The message says what is refused, why, and what to do instead.
	for _, m := range []string{"kbind consumer a may not create or change service-account token Secrets", "would outlive its grant", "such as Opaque"} {
		if !strings.Contains(v.Message, m) {
			t.Errorf("the message %q does not say %q", v.Message, m)
		}
	}
	// The same rule as the Prefixed and None writes policies.
	for _, iso := range []kbindv1alpha1.Isolation{prefixed, none} {
		var same bool
		for _, o := range request(iso, widgets).Objects() {
			if p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && p.Name == Name("a") {
				for _, w := range p.Spec.Validations {
					same = same || (w.Expression == v.Expression && w.Message == v.Message)
				}
			}
		}
		if !same {
			t.Errorf("the %s writes policy does not refuse service-account token Secrets as the Secrets policy does", iso.Mode)
		}
	}
}

// TestTokenRenewal: a consumer may mint tokens for its own ServiceAccount
// only — one Role in the ServiceAccounts' namespace, create on
// serviceaccounts/token of that one name — and nothing else gains; without
// TokenRenewal nothing of it is granted.
func TestTokenRenewal(t *testing.T) {
	for _, iso := range []kbindv1alpha1.Isolation{confined, prefixed, none} {
		req := request(iso, widgets)
		var tokenRoles, tokenBindings int
		for _, o := range req.Objects() {
			switch obj := o.(type) {
			case *rbacv1.Role:
				if obj.Name != TokenName("a") {
					if grants(obj.Rules, "serviceaccounts/token") || grants(obj.Rules, "serviceaccounts") {
						t.Errorf("%s: Role %s grants ServiceAccounts: %+v", iso.Mode, obj.Name, obj.Rules)
					}
					continue
				}
				tokenRoles++
				want := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"kbind-consumer-a"}, Verbs: []string{"create"}}
				if obj.Namespace != "kbind" || len(obj.Rules) != 1 || !equalRule(obj.Rules[0], want) {
					t.Errorf("%s: the token Role %s/%s: %+v, want only %+v", iso.Mode, obj.Namespace, obj.Name, obj.Rules, want)
				}
			case *rbacv1.ClusterRole:
				if grants(obj.Rules, "serviceaccounts/token") || grants(obj.Rules, "serviceaccounts") {
					t.Errorf("%s: the ClusterRole grants ServiceAccounts: %+v", iso.Mode, obj.Rules)
				}
			case *rbacv1.RoleBinding:
				if obj.Name != TokenName("a") {
					continue
				}
				tokenBindings++
				if obj.Namespace != "kbind" || obj.RoleRef.Kind != "Role" || obj.RoleRef.Name != TokenName("a") || len(obj.Subjects) != 1 ||
					obj.Subjects[0] != (rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "kbind-consumer-a", Namespace: "kbind"}) {
					t.Errorf("%s: the token RoleBinding %+v", iso.Mode, obj)
				}
			}
		}
		if tokenRoles != 1 || tokenBindings != 1 {
			t.Errorf("%s: %d token Roles and %d RoleBindings, want one each", iso.Mode, tokenRoles, tokenBindings)
		}
		req.TokenRenewal = nil
		for _, o := range req.Objects() {
			if strings.HasSuffix(o.GetName(), ".token") {
				t.Errorf("%s without TokenRenewal grants %s", iso.Mode, Key(o))
			}
		}
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	j := func(s []string) string { return strings.Join(s, ",") }
	return j(a.APIGroups) == j(b.APIGroups) && j(a.Resources) == j(b.Resources) && j(a.ResourceNames) == j(b.ResourceNames) &&
		j(a.Verbs) == j(b.Verbs) && len(a.NonResourceURLs) == 0
}

// TestTokenPolicy pins the admission policy that bounds the tokens a
// consumer mints itself; e2e/attack's TestGrantAttacks proves it against a
// real API server.
func TestTokenPolicy(t *testing.T) {
	var vap *admissionregistrationv1.ValidatingAdmissionPolicy
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range request(confined, widgets).Objects() {
		switch obj := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if obj.Name == TokenName("a") {
				vap = obj
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if obj.Name == TokenName("a") {
				binding = obj
			}
		}
	}
	if vap == nil || binding == nil {
		t.Fatal("no token policy under Namespace isolation")
	}
	if binding.Spec.PolicyName != vap.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("binding %+v", binding.Spec)
	}
	if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", vap.Spec.FailurePolicy)
	}
	rules := vap.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || strings.Join(rules[0].Resources, ",") != "serviceaccounts/token" || strings.Join(rules[0].APIGroups, ",") != "" ||
		len(rules[0].Operations) != 1 || rules[0].Operations[0] != admissionregistrationv1.Create {
		t.Errorf("match constraints %+v", rules)
	}
	if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != `request.userInfo.username == "system:serviceaccount:kbind:kbind-consumer-a"` {
		t.Errorf("match conditions %+v: the consumer's own requests only", vap.Spec.MatchConditions)
	}
	var exprs, messages []string
	for _, v := range vap.Spec.Validations {
		exprs, messages = append(exprs, v.Expression), append(messages, v.Message)
	}
	want := []string{
		`has(object.spec.audiences) && object.spec.audiences.all(a, a in ["https://kubernetes.default.svc.cluster.local", "k3s"])`,
		`has(object.spec.expirationSeconds) && object.spec.expirationSeconds <= 2592000`,
		`!has(object.spec.boundObjectRef) || object.spec.boundObjectRef == null`, // serialized as null when unset
	}
	if strings.Join(exprs, "\n") != strings.Join(want, "\n") {
		t.Errorf("validations:\n%s\nwant:\n%s", strings.Join(exprs, "\n"), strings.Join(want, "\n"))
	}
	for _, m := range []string{"may mint tokens only for the API server's audiences (https://kubernetes.default.svc.cluster.local, k3s)", "at most 2592000 s", "kubectl kbind grant --duration", "bound to no object"} {
		if !strings.Contains(strings.Join(messages, "\n"), m) {
			t.Errorf("no message says %q:\n%s", m, strings.Join(messages, "\n"))
		}
	}
}
