// Package access owns what a provider grants one kbind consumer
// (docs/isolation.md#permissions): the ServiceAccount its kubeconfig uses
// and exactly the RBAC (and, for Prefixed isolation, the admission policy)
// its Connection needs, for the APIs it may bind. Objects is a pure
// function of a Request; the consumer-access chart renders the same objects
// (a test in e2e/chart holds them equal).
package access

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ConsumerLabel marks every object granted to a consumer, with its name:
// revoke finds them by it.
const ConsumerLabel = "kbind.io/consumer"

// API is one exported API the consumer may bind.
type API struct {
	Group, Resource string
	Namespaced      bool
}

// Request is what is granted.
type Request struct {
	// Consumer names the consumer: objects are kbind-consumer-<Consumer>.
	Consumer string
	// Namespace holds the ServiceAccount.
	Namespace string
	Isolation kbindv1alpha1.Isolation
	APIs      []API
	// Related are the kinds relatedResources copy: secrets, configmaps.
	Related []string
	// CRDReads grants the CRD reads schema sources Auto and CRD need.
	CRDReads bool
}

// Name is the name of the consumer's ServiceAccount and roles.
func Name(consumer string) string { return "kbind-consumer-" + consumer }

// Username is the ServiceAccount's user name.
func (r Request) Username() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", r.Namespace, Name(r.Consumer))
}

// Validate refuses a request that would grant something outside the
// consumer's tenant, or that cannot work, saying why.
func (r Request) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(r.Consumer); len(msgs) > 0 || len(r.Consumer) > 40 {
		errs = append(errs, fmt.Errorf("consumer name %q must be a DNS label of at most 40 characters", r.Consumer))
	}
	if len(r.APIs) == 0 {
		errs = append(errs, errors.New("at least one API is required (--apis)"))
	}
	switch r.Isolation.Mode {
	case kbindv1alpha1.IsolationNamespace:
		if msgs := validation.IsDNS1123Label(r.Isolation.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespace %q must be a DNS label: the provider namespace the consumer's copies live in", r.Isolation.Namespace))
		}
		for _, a := range r.APIs {
			if !a.Namespaced {
				errs = append(errs, fmt.Errorf("%s.%s is cluster-scoped: Namespace isolation cannot confine it to a namespace; use --isolation Prefixed", a.Resource, a.Group))
			}
		}
	case kbindv1alpha1.IsolationPrefixed:
		if msgs := validation.IsDNS1123Label(r.Isolation.Prefix); len(msgs) > 0 || len(r.Isolation.Prefix) > 30 {
			errs = append(errs, fmt.Errorf("--prefix %q must be a DNS label of at most 30 characters", r.Isolation.Prefix))
		}
	case kbindv1alpha1.IsolationNone:
	default:
		errs = append(errs, fmt.Errorf("--isolation %q: want None, Namespace or Prefixed", r.Isolation.Mode))
	}
	for _, k := range r.Related {
		if k != "secrets" && k != "configmaps" {
			errs = append(errs, fmt.Errorf("--related %q: only secrets and configmaps are copied", k))
		}
	}
	if len(r.Related) > 0 && r.Isolation.Mode != kbindv1alpha1.IsolationNamespace {
		errs = append(errs, fmt.Errorf("--related needs --isolation Namespace: with %s isolation, copying related objects needs cluster-wide read of %v, which would let this consumer read those of every tenant on the provider", r.Isolation.Mode, r.Related))
	}
	return errors.Join(errs...)
}

// Objects are the objects granted, in apply order.
func (r Request) Objects() []client.Object {
	name := Name(r.Consumer)
	labels := map[string]string{ConsumerLabel: r.Consumer, "app.kubernetes.io/name": "kbind-consumer-access", "app.kubernetes.io/managed-by": "kubectl-kbind"}
	meta := func(ns, n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: n, Labels: labels}
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: r.Namespace}}
	out := []client.Object{&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(r.Namespace, name)}}

	discovery := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}}}
	if r.CRDReads {
		discovery = append(discovery, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}})
	}
	out = append(out, clusterRole(meta("", name+"-discovery"), discovery), clusterRoleBinding(meta("", name+"-discovery"), subjects))

	if r.Isolation.Mode == kbindv1alpha1.IsolationNamespace {
		ns := r.Isolation.Namespace
		out = append(out,
			&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(ns, name), Rules: r.objectRules()},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(ns, name), Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
		return out
	}
	rules := append([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}}}, r.objectRules()...)
	out = append(out, clusterRole(meta("", name), rules), clusterRoleBinding(meta("", name), subjects))
	if r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed {
		out = append(out, r.prefixPolicy(meta("", name))...)
	}
	return out
}

// objectRules: every verb on the bound APIs, the heartbeat Lease, reading
// Events, and the related kinds when asked.
func (r Request) objectRules() []rbacv1.PolicyRule {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	var rules []rbacv1.PolicyRule
	for _, g := range r.groups() {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: r.resources(g), Verbs: all})
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
		// The provider's Events on the copies, forwarded to the consumer
		// objects (docs/sync.md#provider-events).
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}})
	if len(r.Related) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: slices.Clone(r.Related), Verbs: all})
	}
	return rules
}

// groups are the APIs' groups in order of first appearance.
func (r Request) groups() []string {
	var out []string
	for _, a := range r.APIs {
		if !slices.Contains(out, a.Group) {
			out = append(out, a.Group)
		}
	}
	return out
}

func (r Request) resources(group string) []string {
	var out []string
	for _, a := range r.APIs {
		if a.Group == group && !slices.Contains(out, a.Resource) {
			out = append(out, a.Resource)
		}
	}
	return out
}

// prefixPolicy confines the consumer's writes to namespace <prefix> (its
// Lease) and namespaces and names <prefix>-*.
func (r Request) prefixPolicy(meta metav1.ObjectMeta) []client.Object {
	prefix := r.Isolation.Prefix
	writes := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: writes,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources},
		}}
	}
	var rules []admissionregistrationv1.NamedRuleWithOperations
	for _, g := range r.groups() {
		rules = append(rules, rule(g, r.resources(g)...))
	}
	core := append([]string{"namespaces"}, r.Related...)
	rules = append(rules, rule("", core...), rule("coordination.k8s.io", "leases"))
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules},
			MatchConditions:  []admissionregistrationv1.MatchCondition{{Name: "this-consumer", Expression: fmt.Sprintf("request.userInfo.username == %q", r.Username())}},
			Variables:        []admissionregistrationv1.Variable{{Name: "place", Expression: "has(request.namespace) && request.namespace != '' ? request.namespace : request.name"}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("variables.place == %q || variables.place.startsWith(%q)", prefix, prefix+"-"),
				Message:    fmt.Sprintf("kbind consumer %s may only write in namespace %s and in namespaces and names starting with %s- (Prefixed isolation)", r.Consumer, prefix, prefix),
				Reason:     &forbidden,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: meta.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return []client.Object{policy, binding}
}

func clusterRole(meta metav1.ObjectMeta, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta, Rules: rules}
}

func clusterRoleBinding(meta metav1.ObjectMeta, subjects []rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: meta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: meta.Name}}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// Kinds are the kinds Objects returns, for revoke to find them by label;
// namespaced ones are listed across namespaces.
var Kinds = []metav1.TypeMeta{
	typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
	typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
	typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
	typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
	typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
	typeMeta("rbac.authorization.k8s.io/v1", "Role"),
	typeMeta("v1", "ServiceAccount"),
}

// SortedNames lists objects as "Kind namespace/name", sorted, for output.
func SortedNames(objs []client.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+" "+client.ObjectKeyFromObject(o).String())
	}
	sort.Strings(out)
	return out
}
