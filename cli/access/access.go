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

// Package access owns what a provider grants one kbind consumer
// (docs/isolation.md#permissions): the ServiceAccount its kubeconfig uses,
// the consumer's own provider namespace (its heartbeat Lease lives there),
// exactly the RBAC its Connection needs for the APIs it may bind, and, for
// Prefixed and None isolation, the admission policy that keeps its writes
// out of every other tenant's namespaces (for Namespace isolation with
// related Secrets, the one that refuses it service-account token
// Secrets). Objects is a pure function of a Request; the consumer-access
// chart renders the same objects (a test in e2e/chart holds them equal).
// Check (placement.go) refuses a request that would overlap another
// consumer or the provider's own namespaces.
package access

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ConsumerLabel marks every object granted to a consumer, and the
// consumer's own provider namespace, with its name: revoke finds the
// objects by it, and the admission policy of a None consumer keeps out of
// namespaces labelled for another consumer.
const ConsumerLabel = "kbind.io/consumer"

// Annotations on the consumer's ServiceAccount recording what was granted,
// so that a later grant can tell a renewal from a change of isolation.
const (
	IsolationModeAnnotation = "kbind.io/isolation-mode"
	// NamespaceAnnotation is the consumer's own provider namespace: the
	// isolation namespace, the Prefixed prefix, or the None Lease
	// namespace.
	NamespaceAnnotation = "kbind.io/namespace"
	PrefixAnnotation    = "kbind.io/prefix"
)

// DefaultServiceAccountNamespace holds the consumers' ServiceAccounts.
const DefaultServiceAccountNamespace = "kbind"

// API is one exported API the consumer may bind.
type API struct {
	Group, Resource string
	Namespaced      bool
}

// Request is what is granted.
type Request struct {
	// Consumer names the consumer: objects are kbind-consumer-<Consumer>.
	Consumer string
	// ServiceAccountNamespace holds the ServiceAccount: a namespace where
	// the consumer may create nothing, so that it can never mint a
	// credential of its own (a legacy service-account token Secret).
	ServiceAccountNamespace string
	Isolation               kbindv1alpha1.Isolation
	// LeaseNamespace is the consumer's own namespace under None isolation,
	// where its heartbeat Lease lives (default kbind-<consumer>); under
	// Namespace it is the isolation namespace, under Prefixed the prefix.
	LeaseNamespace string
	APIs           []API
	// Related are the kinds relatedResources copy: secrets, configmaps.
	Related []string
	// CRDReads grants the CRD reads schema sources Auto and CRD need.
	CRDReads bool
	// ClusterWideEvents grants, under Prefixed and None isolation, reading
	// every Event of the provider, which forwarding the provider's Events
	// needs there: RBAC cannot confine a read to a prefix, so it is the
	// provider admin's explicit choice. Namespace isolation always reads
	// the Events of its own namespace, and nothing else.
	ClusterWideEvents bool
	// TokenRenewal, when set, lets the consumer mint tokens for its own
	// ServiceAccount (the konnector renews its token before it expires),
	// bounded by an admission policy: RBAC cannot limit a token's audiences
	// or lifetime. grant always sets it; the chart's tokenRenewal.enabled.
	TokenRenewal *TokenRenewal
}

// TokenRenewal bounds the tokens a consumer may mint for itself.
type TokenRenewal struct {
	// Audiences are the API server's own (its --api-audiences), which it
	// fills into a TokenRequest without audiences before admission: grant
	// reads them from the aud claim of the token it mints.
	Audiences []string
	// MaxLifetimeSeconds is the longest lifetime a self-minted token may
	// ask for: the lifetime grant gave (--duration).
	MaxLifetimeSeconds int64
}

// MinTokenLifetime is the shortest token lifetime the API server issues
// (TokenRequest's expirationSeconds minimum).
const MinTokenLifetime = 10 * time.Minute

// Name is the name of the consumer's ServiceAccount, roles, bindings and
// admission policy (the writes policy under Prefixed and None, the Secrets
// policy under Namespace). Consumer names are DNS labels (no "."), so no
// two consumers ever share one.
func Name(consumer string) string { return "kbind-consumer-" + consumer }

// TokenName names the Role (in the ServiceAccounts' namespace), its
// binding and the admission policy that let the consumer mint tokens for
// itself. The "." keeps it apart from every consumer's Name: consumer
// "a-token" is kbind-consumer-a-token, consumer "a"'s token Role
// kbind-consumer-a.token.
func TokenName(consumer string) string { return Name(consumer) + ".token" }

// DefaultNamespace is the consumer's own provider namespace unless one is
// given: the isolation namespace (Namespace), the Lease namespace (None).
func DefaultNamespace(consumer string) string { return "kbind-" + consumer }

// HasSecretsPolicy reports whether the grant holds the Secrets policy: a
// Namespace-isolated consumer granted related Secrets may write every
// Secret of its namespace (its Role), and the policy refuses it the one
// kind of Secret that would be a credential outliving its grant — a
// service-account token Secret, which the cluster's token controller
// fills. The Prefixed and None writes policies refuse those Secrets too.
func (r Request) HasSecretsPolicy() bool {
	return r.Isolation.Mode == kbindv1alpha1.IsolationNamespace && slices.Contains(r.Related, "secrets")
}

// Username is the ServiceAccount's user name.
func (r Request) Username() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", r.ServiceAccountNamespace, Name(r.Consumer))
}

// Namespace is the consumer's own provider namespace: the isolation
// namespace (Namespace), the prefix (Prefixed) or the Lease namespace
// (None). Its heartbeat Lease lives there, and the printed kubeconfig
// names it as the context namespace.
func (r Request) Namespace() string {
	switch r.Isolation.Mode {
	case kbindv1alpha1.IsolationNamespace:
		return r.Isolation.Namespace
	case kbindv1alpha1.IsolationPrefixed:
		return r.Isolation.Prefix
	}
	return r.LeaseNamespace
}

// Validate refuses a request that would grant something outside the
// consumer's tenant, or that cannot work, saying why. Check refuses what
// only the provider's current state makes wrong.
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
		for _, a := range r.APIs {
			if !a.Namespaced {
				errs = append(errs, fmt.Errorf("%s.%s is cluster-scoped: Namespace isolation cannot confine it to a namespace; use --isolation Prefixed", a.Resource, a.Group))
			}
		}
	case kbindv1alpha1.IsolationPrefixed:
		if msgs := validation.IsDNS1123Label(r.Isolation.Prefix); len(msgs) > 0 || len(r.Isolation.Prefix) > 30 {
			errs = append(errs, fmt.Errorf("--prefix %q must be a DNS label of at most 30 characters", r.Isolation.Prefix))
		} else if reserved := ReservedPrefix(r.Isolation.Prefix); reserved != "" {
			errs = append(errs, fmt.Errorf("--prefix %q is reserved: its namespaces %s and %s-* are the provider's own (%s); choose another prefix", r.Isolation.Prefix, r.Isolation.Prefix, r.Isolation.Prefix, reserved))
		} else if Covers(r.Isolation.Prefix, r.ServiceAccountNamespace) {
			errs = append(errs, fmt.Errorf("--prefix %q covers namespace %s, which holds the consumers' ServiceAccounts (--service-account-namespace): the consumer could write there; choose another prefix", r.Isolation.Prefix, r.ServiceAccountNamespace))
		}
	case kbindv1alpha1.IsolationNone:
	default:
		errs = append(errs, fmt.Errorf("--isolation %q: want None, Namespace or Prefixed", r.Isolation.Mode))
	}
	if r.Isolation.Mode != kbindv1alpha1.IsolationPrefixed {
		if msgs := validation.IsDNS1123Label(r.Namespace()); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("-n %q must be a DNS label: the consumer's own provider namespace", r.Namespace()))
		} else if why := ReservedNamespace(r.Namespace(), r.ServiceAccountNamespace); why != "" {
			errs = append(errs, fmt.Errorf("-n %q cannot be a consumer's own namespace: %s", r.Namespace(), why))
		}
	}
	for _, k := range r.Related {
		if k != "secrets" && k != "configmaps" {
			errs = append(errs, fmt.Errorf("--related %q: only secrets and configmaps are copied", k))
		}
	}
	if len(r.Related) > 0 && r.Isolation.Mode != kbindv1alpha1.IsolationNamespace {
		errs = append(errs, fmt.Errorf("--related needs --isolation Namespace: with %s isolation, copying related objects needs cluster-wide read of %v, which would let this consumer read those of every namespace of the provider, kube-system's included", r.Isolation.Mode, r.Related))
	}
	if t := r.TokenRenewal; t != nil {
		if len(t.Audiences) == 0 {
			errs = append(errs, errors.New("token renewal needs at least one audience: the API server's own (--api-audiences)"))
		}
		if t.MaxLifetimeSeconds < int64(MinTokenLifetime.Seconds()) {
			errs = append(errs, fmt.Errorf("--duration %s: a token lives at least %s (the API server's minimum)", time.Duration(t.MaxLifetimeSeconds)*time.Second, MinTokenLifetime))
		}
	}
	return errors.Join(errs...)
}

// Objects are the objects granted, in apply order: the consumer's
// namespace, then the admission policies (before any right they confine:
// the writes' under Prefixed and None, the Secrets policy under Namespace
// with related Secrets, the token policy), the ServiceAccount, the roles,
// and the bindings last.
func (r Request) Objects() []client.Object {
	name := Name(r.Consumer)
	meta := func(ns, n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: n, Labels: r.labels()}
	}
	out := []client.Object{r.namespaceObject()}
	switch {
	case r.Isolation.Mode != kbindv1alpha1.IsolationNamespace:
		out = append(out, r.policy(meta("", name))...)
	case r.HasSecretsPolicy():
		out = append(out, r.secretsPolicy(meta("", name))...)
	}
	if r.TokenRenewal != nil {
		out = append(out, r.tokenPolicy(meta("", TokenName(r.Consumer)))...)
	}
	sa := &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(r.ServiceAccountNamespace, name)}
	sa.Annotations = r.recorded()
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: r.ServiceAccountNamespace}}
	own := r.Namespace()
	out = append(out, sa,
		&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta("", name), Rules: r.clusterRules()},
		&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(own, name), Rules: r.namespaceRules()},
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: meta("", name), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
		&rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(own, name), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	if r.TokenRenewal != nil {
		// Minting tokens for its own ServiceAccount, and no other: the
		// token policy above bounds their audiences and lifetime.
		tokenName := TokenName(r.Consumer)
		out = append(out,
			&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(r.ServiceAccountNamespace, tokenName),
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{name}, Verbs: []string{"create"}}}},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(r.ServiceAccountNamespace, tokenName), Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tokenName}})
	}
	return out
}

func (r Request) labels() map[string]string {
	return map[string]string{ConsumerLabel: r.Consumer, "app.kubernetes.io/name": "kbind-consumer-access", "app.kubernetes.io/managed-by": "kubectl-kbind"}
}

// namespaceObject is the consumer's own namespace, labelled for it (and,
// under Prefixed, with its prefix: the admission policy lets it write
// only into namespaces that carry it).
func (r Request) namespaceObject() *corev1.Namespace {
	labels := r.labels()
	if r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed {
		labels[kbindv1alpha1.PrefixLabel] = r.Isolation.Prefix
	}
	return &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: r.Namespace(), Labels: labels}}
}

// recorded is what the ServiceAccount remembers of the grant.
func (r Request) recorded() map[string]string {
	out := map[string]string{IsolationModeAnnotation: string(r.Isolation.Mode), NamespaceAnnotation: r.Namespace()}
	if r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed {
		out[PrefixAnnotation] = r.Isolation.Prefix
	}
	return out
}

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// clusterRules: the two reads every consumer needs cluster-wide (the
// provider identity and the exported CRDs); under Prefixed and None also
// namespaces, the bound APIs (RBAC cannot say "namespaces starting with":
// the admission policy confines the writes) and, when asked, Events.
func (r Request) clusterRules() []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}}}
	if r.CRDReads {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}})
	}
	if r.Isolation.Mode == kbindv1alpha1.IsolationNamespace {
		return rules
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}})
	rules = append(rules, r.apiRules()...)
	if r.ClusterWideEvents {
		rules = append(rules, eventsRule())
	}
	return rules
}

// namespaceRules are the rules in the consumer's own namespace: the
// heartbeat Lease, and under Namespace isolation everything else too —
// the bound APIs, reading Events (forwarded to the consumer objects) and
// the related kinds.
func (r Request) namespaceRules() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	if r.Isolation.Mode == kbindv1alpha1.IsolationNamespace {
		rules = append(rules, r.apiRules()...)
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}})
	if r.Isolation.Mode == kbindv1alpha1.IsolationNamespace {
		rules = append(rules, eventsRule())
		if len(r.Related) > 0 {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: slices.Clone(r.Related), Verbs: allVerbs})
		}
	}
	return rules
}

// eventsRule reads the provider's Events on the copies, forwarded to the
// consumer objects (docs/sync.md#provider-events).
func eventsRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}
}

// apiRules: every verb on the bound APIs, one rule per group.
func (r Request) apiRules() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, g := range r.groups() {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: r.resources(g), Verbs: allVerbs})
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

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// Kinds are the kinds of Objects that revoke deletes (found by
// ConsumerLabel; namespaced ones across namespaces), in revoke's order:
// the ServiceAccount first — which invalidates every token — then the
// bindings and roles, and the admission policy last, so that no moment
// leaves a right without its confinement. The consumer's namespace stays:
// its provider copies live there.
var Kinds = []metav1.TypeMeta{
	typeMeta("v1", "ServiceAccount"),
	typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
	typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
	typeMeta("rbac.authorization.k8s.io/v1", "Role"),
	typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
	typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
	typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
}

// Key identifies an object as "Kind namespace/name".
func Key(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + " " + client.ObjectKeyFromObject(o).String()
}

// SortedNames lists objects as "Kind namespace/name", sorted, for output.
func SortedNames(objs []client.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, Key(o))
	}
	sort.Strings(out)
	return out
}
