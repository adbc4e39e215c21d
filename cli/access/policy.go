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
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// SystemNamespaces are never written by a None consumer: they are the
// provider's (its node heartbeats, its controllers' leader Leases).
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// policy is the ValidatingAdmissionPolicy (and its binding) that confines
// the writes of a Prefixed or None consumer, which RBAC can only grant
// cluster-wide. It matches every write of the consumer's user to the bound
// APIs (and their subresources), namespaces, the related kinds and
// Leases, and reads ownership from labels only the consumer's own grant
// or konnector set:
//
//   - Prefixed: it writes only in namespace <prefix> and in namespaces and
//     names <prefix>-*, and only into namespaces — and only cluster-scoped
//     objects — labelled core.kbind.io/prefix=<prefix>; a namespace it
//     creates must carry that label. A consumer whose prefix extends
//     another's ("team" and "team-a") therefore never writes into the
//     other's objects, whatever their names.
//   - None: it never writes in the provider's system namespaces, nor into
//     a namespace or cluster-scoped object labelled for another consumer
//     (kbind.io/consumer) or for a Prefixed consumer (core.kbind.io/prefix).
//
// Neither may create a service-account token Secret (a credential that
// would outlive the grant: tokenSecretValidation).
func (r Request) policy(meta metav1.ObjectMeta) []client.Object {
	writes := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: writes,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources},
		}}
	}
	var rules []admissionregistrationv1.NamedRuleWithOperations
	for _, g := range r.groups() {
		var resources []string
		for _, res := range r.resources(g) {
			resources = append(resources, res, res+"/*")
		}
		rules = append(rules, rule(g, resources...))
	}
	rules = append(rules, rule("", append([]string{"namespaces"}, r.Related...)...), rule("coordination.k8s.io", "leases"))
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules},
			MatchConditions:  r.thisConsumer(),
			Variables:        r.policyVariables(),
			Validations:      r.validations(),
		},
	}
	return []client.Object{policy, denyBinding(meta)}
}

// Policy variables: where the request writes, and the ownership labels of
// the namespace written in and of the cluster-scoped object written (its
// new and its old state), "" when absent. A Namespace is cluster-scoped
// even though the API server reports its own name as its namespace. The
// request's namespace and name are absent (not empty) when unset.
var (
	varPlace     = "has(request.namespace) && request.namespace != '' ? request.namespace : (has(request.name) ? request.name : '')"
	varNamespace = "has(request.namespace) && request.namespace != '' && !(request.resource.group == '' && request.resource.resource == 'namespaces')"
)

// labelVariable reads label key of obj into a string variable, "" when
// absent; guard says when obj exists.
func labelVariable(name, guard, obj, key string) admissionregistrationv1.Variable {
	return admissionregistrationv1.Variable{Name: name, Expression: fmt.Sprintf(
		"%s && %s != null && has(%s.metadata.labels) && %q in %s.metadata.labels ? %s.metadata.labels[%q] : ''", guard, obj, obj, key, obj, obj, key)}
}

func (r Request) policyVariables() []admissionregistrationv1.Variable {
	vars := []admissionregistrationv1.Variable{{Name: "place", Expression: varPlace}, {Name: "namespaced", Expression: varNamespace}}
	keys := []struct{ suffix, key string }{{"Prefix", kbindv1alpha1.PrefixLabel}}
	if r.Isolation.Mode == kbindv1alpha1.IsolationNone {
		keys = append(keys, struct{ suffix, key string }{"Consumer", ConsumerLabel})
	}
	for _, k := range keys {
		vars = append(vars,
			labelVariable("namespace"+k.suffix, "variables.namespaced", "namespaceObject", k.key),
			labelVariable("new"+k.suffix, "request.operation != 'DELETE'", "object", k.key),
			labelVariable("old"+k.suffix, "request.operation != 'CREATE'", "oldObject", k.key))
	}
	return vars
}

// validations are the policy's rules, each with a message that names what
// the consumer may do instead.
func (r Request) validations() []admissionregistrationv1.Validation {
	forbidden := metav1.StatusReasonForbidden
	v := func(expression, message string) admissionregistrationv1.Validation {
		return admissionregistrationv1.Validation{Expression: expression, Message: message, Reason: &forbidden}
	}
	c := r.Consumer
	var out []admissionregistrationv1.Validation
	if r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed {
		p := r.Isolation.Prefix
		out = append(out,
			v(fmt.Sprintf("variables.place == %q || variables.place.startsWith(%q)", p, p+"-"),
				fmt.Sprintf("kbind consumer %s may only write in namespace %s and in namespaces and names starting with %s- (Prefixed isolation)", c, p, p)),
			v(fmt.Sprintf("!variables.namespaced || variables.namespacePrefix == %q", p),
				fmt.Sprintf("kbind consumer %s may only write in namespaces labelled %s=%s (Prefixed isolation): this one belongs to another consumer or to the provider", c, kbindv1alpha1.PrefixLabel, p)),
			v(fmt.Sprintf("variables.namespaced || ((request.operation == 'DELETE' || variables.newPrefix == %q) && (request.operation == 'CREATE' || variables.oldPrefix == %q))", p, p),
				fmt.Sprintf("kbind consumer %s may only create and change namespaces and cluster-scoped objects labelled %s=%s (Prefixed isolation)", c, kbindv1alpha1.PrefixLabel, p)))
	} else {
		mine := fmt.Sprintf("['', %q]", c)
		out = append(out,
			v(fmt.Sprintf("!has(request.namespace) || !(request.namespace in [%s])", quoted(SystemNamespaces)),
				fmt.Sprintf("kbind consumer %s may not write in the provider's system namespaces %s", c, strings.Join(SystemNamespaces, ", "))),
			v(fmt.Sprintf("!variables.namespaced || (variables.namespacePrefix == '' && variables.namespaceConsumer in %s)", mine),
				fmt.Sprintf("kbind consumer %s may not write in another consumer's namespace (labelled %s or %s)", c, ConsumerLabel, kbindv1alpha1.PrefixLabel)),
			v(fmt.Sprintf("variables.namespaced || ((request.operation == 'DELETE' || (variables.newPrefix == '' && variables.newConsumer in %s)) && (request.operation == 'CREATE' || (variables.oldPrefix == '' && variables.oldConsumer in %s)))", mine, mine),
				fmt.Sprintf("kbind consumer %s may not create or change namespaces and cluster-scoped objects labelled for another consumer (%s or %s)", c, ConsumerLabel, kbindv1alpha1.PrefixLabel)))
	}
	return append(out, r.tokenSecretValidation())
}

// thisConsumer matches the consumer's own requests only: an admin's are
// never bounded by its policies.
func (r Request) thisConsumer() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{Name: "this-consumer", Expression: fmt.Sprintf("request.userInfo.username == %q", r.Username())}}
}

// tokenSecretRule is the rule of every consumer policy that matches
// Secrets: never a service-account token Secret. The cluster's token
// controller fills one with a token of the ServiceAccount it names (any
// in its namespace), which authenticates until the Secret is deleted —
// after revoke too. The Secret's type is immutable, so checking the new
// object covers an UPDATE.
const tokenSecretRule = "request.resource.resource != 'secrets' || request.operation == 'DELETE' || !has(object.type) || object.type != 'kubernetes.io/service-account-token'"

// tokenSecretValidation refuses tokenSecretRule's Secrets, saying what
// the consumer may do instead.
func (r Request) tokenSecretValidation() admissionregistrationv1.Validation {
	forbidden := metav1.StatusReasonForbidden
	return admissionregistrationv1.Validation{Expression: tokenSecretRule, Reason: &forbidden, Message: fmt.Sprintf(
		"kbind consumer %s may not create or change service-account token Secrets: the token the cluster fills in would outlive its grant "+
			"(kbind never copies such Secrets: a related Secret of that type is skipped); keep a credential in a Secret of another type, such as Opaque", r.Consumer)}
}

// secretsPolicy is the ValidatingAdmissionPolicy (and its binding) of a
// Namespace-isolated consumer granted related Secrets (HasSecretsPolicy):
// its Role lets it write every Secret of its namespace, and RBAC cannot
// look at a Secret's type. It refuses the consumer's user creating or
// changing a service-account token Secret, anywhere.
func (r Request) secretsPolicy(meta metav1.ObjectMeta) []client.Object {
	return r.denyingPolicy(meta, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, "secrets",
		r.tokenSecretValidation())
}

// tokenPolicy is the ValidatingAdmissionPolicy (and its binding) that
// bounds the tokens the consumer mints for itself (its token Role allows
// create on serviceaccounts/token of its own ServiceAccount; RBAC cannot
// look into the TokenRequest): only for the API server's audiences — the
// API server fills them in before admission when a request names none —
// for at most the granted lifetime, and bound to no object (a token bound
// to a Pod may be extended to a year). An admin minting tokens for the
// ServiceAccount is not matched.
func (r Request) tokenPolicy(meta metav1.ObjectMeta) []client.Object {
	forbidden := metav1.StatusReasonForbidden
	t, c := r.TokenRenewal, r.Consumer
	return r.denyingPolicy(meta, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, "serviceaccounts/token",
		admissionregistrationv1.Validation{Expression: fmt.Sprintf("has(object.spec.audiences) && object.spec.audiences.all(a, a in [%s])", quoted(t.Audiences)), Reason: &forbidden,
			Message: fmt.Sprintf("kbind consumer %s may mint tokens only for the API server's audiences (%s): request a token without spec.audiences", c, strings.Join(t.Audiences, ", "))},
		admissionregistrationv1.Validation{Expression: fmt.Sprintf("has(object.spec.expirationSeconds) && object.spec.expirationSeconds <= %d", t.MaxLifetimeSeconds), Reason: &forbidden,
			Message: fmt.Sprintf("kbind consumer %s may mint tokens valid for at most %d s, the lifetime its grant gave (kubectl kbind grant --duration, the consumer-access chart's tokenRenewal.maxLifetimeSeconds)", c, t.MaxLifetimeSeconds)},
		admissionregistrationv1.Validation{Expression: "!has(object.spec.boundObjectRef) || object.spec.boundObjectRef == null", Reason: &forbidden,
			Message: fmt.Sprintf("kbind consumer %s may mint only tokens bound to no object", c)},
	)
}

// denyingPolicy is a ValidatingAdmissionPolicy named by meta that matches
// the consumer's own requests of ops on core resource, refuses what
// validations refuse (failure policy Fail), and its binding.
func (r Request) denyingPolicy(meta metav1.ObjectMeta, ops []admissionregistrationv1.OperationType, resource string, validations ...admissionregistrationv1.Validation) []client.Object {
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: ops,
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{resource}},
				}}}},
			MatchConditions: r.thisConsumer(),
			Validations:     validations,
		},
	}
	return []client.Object{policy, denyBinding(meta)}
}

func quoted(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(out, ", ")
}

// denyBinding binds the policy of meta's name, denying what it refuses.
func denyBinding(meta metav1.ObjectMeta) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: meta.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}
