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

// request is consumer a's request with the defaults grant fills in.
func request(iso kbindv1alpha1.Isolation, apis ...API) Request {
	r := Request{Consumer: "a", ServiceAccountNamespace: "kbind", Isolation: iso, APIs: apis}
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
			"Role tenant-a/kbind-consumer-a", "RoleBinding tenant-a/kbind-consumer-a", "ServiceAccount kbind/kbind-consumer-a",
		}},
		{"Prefixed: the Lease in namespace <prefix>, writes confined by the policy", request(prefixed, widgets, clusterThings), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /a",
			"Role a/kbind-consumer-a", "RoleBinding a/kbind-consumer-a", "ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a", "ValidatingAdmissionPolicyBinding /kbind-consumer-a",
		}},
		{"None: the Lease in its own namespace, writes kept out of other tenants' by the policy", request(none, widgets), []string{
			"ClusterRole /kbind-consumer-a", "ClusterRoleBinding /kbind-consumer-a", "Namespace /kbind-a",
			"Role kbind-a/kbind-consumer-a", "RoleBinding kbind-a/kbind-consumer-a", "ServiceAccount kbind/kbind-consumer-a",
			"ValidatingAdmissionPolicy /kbind-consumer-a", "ValidatingAdmissionPolicyBinding /kbind-consumer-a",
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
		if r, ok := o.(*rbacv1.Role); ok {
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
		pos[o.GetObjectKind().GroupVersionKind().Kind] = i
	}
	if ordered := pos["Namespace"] < pos["ValidatingAdmissionPolicyBinding"] && pos["ValidatingAdmissionPolicyBinding"] < pos["ClusterRole"] &&
		pos["ClusterRole"] < pos["ClusterRoleBinding"] && pos["Role"] < pos["RoleBinding"]; !ordered {
		t.Errorf("apply order %v", SortedNames(objs))
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
	for _, pair := range [][2]string{{"nd", "nd-discovery"}, {"a", "a-a"}, {"team", "team-a"}, {"a-discovery", "a"}, {"consumer-a", "a"}} {
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
		req := Request{Consumer: consumer, ServiceAccountNamespace: "kbind", APIs: []API{widgets}, Isolation: kbindv1alpha1.Isolation{Mode: mode}}
		switch mode {
		case kbindv1alpha1.IsolationNamespace:
			req.Isolation.Namespace = DefaultNamespace(consumer)
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
		return strings.Join([]string{a.Namespace, a.Verb, a.Group, a.Resource, a.Name}, "|")
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
				"tenant-a|delete||secrets|", "tenant-a|watch||events|", "|get||namespaces|kube-system", "|list|apiextensions.k8s.io|customresourcedefinitions|"},
			[]string{"|create||namespaces|", "|list|example.org|widgets|", "tenant-a|list||configmaps|", "|watch||events|"}},
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
