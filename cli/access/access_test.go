package access

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

var (
	widgets       = API{Group: "example.org", Resource: "widgets", Namespaced: true}
	clusterThings = API{Group: "example.org", Resource: "clusterthings"}
	confined      = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: "tenant-a"}
	prefixed      = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"}
	none          = kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNone}
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		want string // "" when valid
	}{
		{"Namespace", Request{Consumer: "a", Isolation: confined, APIs: []API{widgets}, Related: []string{"secrets"}}, ""},
		{"Prefixed with a cluster-scoped API", Request{Consumer: "a", Isolation: prefixed, APIs: []API{widgets, clusterThings}}, ""},
		{"None", Request{Consumer: "a", Isolation: none, APIs: []API{widgets}}, ""},
		{"no APIs", Request{Consumer: "a", Isolation: confined}, "at least one API"},
		{"bad consumer name", Request{Consumer: "Team_A", Isolation: confined, APIs: []API{widgets}}, "DNS label"},
		{"cluster-scoped under Namespace", Request{Consumer: "a", Isolation: confined, APIs: []API{clusterThings}}, "cannot confine it"},
		{"bad prefix", Request{Consumer: "a", Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "A."}, APIs: []API{widgets}}, "--prefix"},
		{"unknown mode", Request{Consumer: "a", Isolation: kbindv1alpha1.Isolation{Mode: "Shared"}, APIs: []API{widgets}}, "want None, Namespace or Prefixed"},
		{"related pods", Request{Consumer: "a", Isolation: confined, APIs: []API{widgets}, Related: []string{"pods"}}, "only secrets and configmaps"},
		{"related outside Namespace", Request{Consumer: "a", Isolation: prefixed, APIs: []API{widgets}, Related: []string{"secrets"}}, "--related needs --isolation Namespace"},
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
		{"Namespace", Request{Consumer: "a", Namespace: "tenant-a", Isolation: confined, APIs: []API{widgets}, CRDReads: true}, []string{
			"ClusterRole /kbind-consumer-a-discovery", "ClusterRoleBinding /kbind-consumer-a-discovery",
			"Role tenant-a/kbind-consumer-a", "RoleBinding tenant-a/kbind-consumer-a", "ServiceAccount tenant-a/kbind-consumer-a",
		}},
		{"Prefixed", Request{Consumer: "a", Namespace: "kbind", Isolation: prefixed, APIs: []API{widgets, clusterThings}}, []string{
			"ClusterRole /kbind-consumer-a", "ClusterRole /kbind-consumer-a-discovery", "ClusterRoleBinding /kbind-consumer-a",
			"ClusterRoleBinding /kbind-consumer-a-discovery", "ServiceAccount kbind/kbind-consumer-a",
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
			}
		})
	}
	// The Role holds exactly the APIs, the Lease, Events (read) and the related kinds.
	objs := Request{Consumer: "a", Namespace: "tenant-a", Isolation: confined, APIs: []API{widgets}, Related: []string{"secrets"}}.Objects()
	var role *rbacv1.Role
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok {
			role = r
		}
	}
	if role == nil || len(role.Rules) != 4 || role.Rules[0].Resources[0] != "widgets" || role.Rules[1].Resources[0] != "leases" ||
		role.Rules[2].Resources[0] != "events" || strings.Join(role.Rules[2].Verbs, ",") != "get,list,watch" || role.Rules[3].Resources[0] != "secrets" {
		t.Errorf("Role rules %+v", role)
	}
	// Without CRD reads (schema source OpenAPI) the discovery role reads the identity only.
	for _, o := range (Request{Consumer: "a", Namespace: "tenant-a", Isolation: confined, APIs: []API{widgets}}).Objects() {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && len(cr.Rules) != 1 {
			t.Errorf("discovery rules without CRD reads: %+v", cr.Rules)
		}
	}
}

func TestReviews(t *testing.T) {
	key := func(a authorizationv1.ResourceAttributes) string {
		return strings.Join([]string{a.Namespace, a.Verb, a.Group, a.Resource, a.Name}, "|")
	}
	cases := []struct {
		name      string
		req       Request
		want, not []string
	}{
		{"Namespace: objects and the Lease in the isolation namespace, identity and CRDs cluster-wide",
			Request{Consumer: "a", Namespace: "tenant-a", Isolation: confined, APIs: []API{widgets}, Related: []string{"secrets"}, CRDReads: true},
			[]string{"tenant-a|create|example.org|widgets|", "tenant-a|watch|example.org|widgets|", "tenant-a|update|coordination.k8s.io|leases|",
				"tenant-a|delete||secrets|", "|get||namespaces|kube-system", "|list|apiextensions.k8s.io|customresourcedefinitions|"},
			[]string{"|create||namespaces|", "|list|example.org|widgets|", "tenant-a|list||configmaps|"}},
		{"Prefixed: cluster-wide, with namespace creation, no CRD reads for OpenAPI",
			Request{Consumer: "a", Namespace: "kbind", Isolation: prefixed, APIs: []API{widgets, clusterThings}},
			[]string{"|create||namespaces|", "|patch|example.org|clusterthings|", "|get|coordination.k8s.io|leases|"},
			[]string{"|list|apiextensions.k8s.io|customresourcedefinitions|", "|get||secrets|"}},
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
