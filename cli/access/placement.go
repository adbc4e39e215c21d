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
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ReservedPrefixes can be no consumer's prefix, nor the first segment of
// one: their namespaces are the provider's own (kube-system, the kbind
// namespace of the ServiceAccounts and the backend, default, OpenShift's,
// system-*), or a consumer's (kbind-<name>).
var ReservedPrefixes = []string{"kube", "kbind", "default", "openshift", "system"}

// ReservedPrefix returns the reserved prefix that prefix equals, extends or
// is extended by across a "-" ("" when none): its namespaces would cover
// the provider's own.
func ReservedPrefix(prefix string) string {
	for _, r := range ReservedPrefixes {
		if Overlap(prefix, r) {
			return r
		}
	}
	return ""
}

// Overlap reports whether two prefixes claim a common namespace: they are
// equal, or one extends the other across a "-" ("team" and "team-a" both
// claim "team-a-x").
func Overlap(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"-") || strings.HasPrefix(b, a+"-")
}

// Covers reports whether namespace ns is one of prefix's: the prefix
// itself (its Lease namespace) or "<prefix>-*".
func Covers(prefix, ns string) bool {
	return ns == prefix || strings.HasPrefix(ns, prefix+"-")
}

// ReservedNamespace says why ns cannot be a consumer's own namespace (""
// when it can): a namespace of the provider's system, default, or the
// ServiceAccounts' namespace.
func ReservedNamespace(ns, serviceAccountNamespace string) string {
	switch {
	case ns == serviceAccountNamespace || ns == DefaultServiceAccountNamespace:
		return "it holds the consumers' ServiceAccounts (and the backend's Lease)"
	case ns == "default":
		return "it is the provider's default namespace"
	case slices.Contains(SystemNamespaces, ns) || strings.HasPrefix(ns, "kube-") || strings.HasPrefix(ns, "openshift-"):
		return "it is a namespace of the provider's system"
	}
	return ""
}

// Grant is an existing grant, as its ServiceAccount records it.
type Grant struct {
	Consumer                string
	ServiceAccountNamespace string
	// Recorded is false for a ServiceAccount made by an earlier
	// kubectl-kbind, which did not record the isolation.
	Recorded  bool
	Mode      kbindv1alpha1.IsolationMode
	Namespace string // the consumer's own namespace
	Prefix    string
}

// Namespace is an existing provider namespace and its labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Provider is what Check reads of the provider: every grant and every
// namespace.
type Provider struct {
	Grants     []Grant
	Namespaces []Namespace
}

// Check refuses a request that the provider's current state makes unsafe,
// saying why and what to do instead:
//
//   - the consumer is granted already with another isolation, another
//     namespace or prefix, or ServiceAccount namespace (revoke first:
//     a grant never moves a consumer, and re-granting must not leave the
//     earlier rights in place);
//   - its own namespace exists and is not labelled for it (another
//     consumer's, the provider's, or a Prefixed consumer's);
//   - Prefixed: its prefix overlaps another consumer's prefix, or covers a
//     namespace that exists and is not its own (another consumer's own
//     namespace, one of the provider's).
//
// The default prefix (the consumer's name) gets no special treatment: an
// overlapping default is refused, never silently adjusted.
func (r Request) Check(p Provider) error {
	var errs []error
	for _, g := range p.Grants {
		if g.Consumer == r.Consumer {
			if err := r.sameGrant(g); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed && g.Mode == kbindv1alpha1.IsolationPrefixed && Overlap(r.Isolation.Prefix, g.Prefix) {
			errs = append(errs, fmt.Errorf("prefix %q overlaps consumer %s's prefix %q: both would claim namespaces like %s-x; choose a prefix that neither equals nor extends another across a '-' (--prefix)",
				r.Isolation.Prefix, g.Consumer, g.Prefix, longer(r.Isolation.Prefix, g.Prefix)))
		}
		if g.Namespace == r.Namespace() {
			errs = append(errs, fmt.Errorf("namespace %s is consumer %s's own namespace; choose another (-n)", g.Namespace, g.Consumer))
		} else if r.Isolation.Mode != kbindv1alpha1.IsolationPrefixed && g.Mode == kbindv1alpha1.IsolationPrefixed && Covers(g.Prefix, r.Namespace()) {
			errs = append(errs, fmt.Errorf("namespace %s falls under consumer %s's prefix %q; choose another (-n)", r.Namespace(), g.Consumer, g.Prefix))
		}
	}
	var foreign []string
	for _, ns := range p.Namespaces {
		if r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed {
			if Covers(r.Isolation.Prefix, ns.Name) && !r.owns(ns) {
				foreign = append(foreign, ns.Name)
			}
			continue
		}
		if ns.Name == r.Namespace() && !r.owns(ns) {
			errs = append(errs, fmt.Errorf("namespace %s exists and was not granted to consumer %s (it is not labelled %s=%s): it may be another tenant's or the provider's; choose another (-n), or, if it is meant for %s, label it first: kubectl label namespace %s %s=%s",
				ns.Name, r.Consumer, ConsumerLabel, r.Consumer, r.Consumer, ns.Name, ConsumerLabel, r.Consumer))
		}
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		errs = append(errs, fmt.Errorf("prefix %q covers namespaces that exist and are not this consumer's (%s): its writes there would be refused and its objects could meet theirs; choose another prefix (--prefix)",
			r.Isolation.Prefix, summary(foreign, 5)))
	}
	return errors.Join(errs...)
}

// owns reports whether an existing namespace is this consumer's: labelled
// for it by a grant, and — under Prefixed — carrying its prefix (one its
// konnector created). A namespace labelled for another consumer never is.
func (r Request) owns(ns Namespace) bool {
	owner, labelled := ns.Labels[ConsumerLabel]
	if labelled {
		if owner != r.Consumer {
			return false
		}
		return r.Isolation.Mode != kbindv1alpha1.IsolationPrefixed || ns.Labels[kbindv1alpha1.PrefixLabel] == r.Isolation.Prefix
	}
	return r.Isolation.Mode == kbindv1alpha1.IsolationPrefixed && ns.Labels[kbindv1alpha1.PrefixLabel] == r.Isolation.Prefix
}

// sameGrant refuses a grant that would change what an existing grant of
// the consumer gave it.
func (r Request) sameGrant(g Grant) error {
	revoke := fmt.Sprintf("run `kubectl kbind revoke %s` first (its provider copies stay where they are; its konnector needs the new bundle)", r.Consumer)
	switch {
	case !g.Recorded:
		return fmt.Errorf("consumer %s was granted by an earlier kubectl-kbind, which did not record its isolation; to grant it again, %s", r.Consumer, revoke)
	case g.Mode != r.Isolation.Mode || g.Namespace != r.Namespace() || g.Prefix != r.Isolation.Prefix:
		return fmt.Errorf("consumer %s is granted with %s; a grant never changes a consumer's isolation (%s requested), which would leave the earlier rights in place: %s",
			r.Consumer, describe(g.Mode, g.Namespace, g.Prefix), describe(r.Isolation.Mode, r.Namespace(), r.Isolation.Prefix), revoke)
	case g.ServiceAccountNamespace != r.ServiceAccountNamespace:
		return fmt.Errorf("consumer %s's ServiceAccount lives in namespace %s, not %s; %s", r.Consumer, g.ServiceAccountNamespace, r.ServiceAccountNamespace, revoke)
	}
	return nil
}

func describe(mode kbindv1alpha1.IsolationMode, ns, prefix string) string {
	switch mode {
	case kbindv1alpha1.IsolationNamespace:
		return fmt.Sprintf("isolation Namespace in namespace %s", ns)
	case kbindv1alpha1.IsolationPrefixed:
		return fmt.Sprintf("isolation Prefixed with prefix %s", prefix)
	}
	return fmt.Sprintf("isolation None with Lease namespace %s", ns)
}

func longer(a, b string) string {
	if len(a) > len(b) {
		return a
	}
	return b
}

func summary(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// GrantOf reads what a ServiceAccount of a grant records.
func GrantOf(namespace string, labels, annotations map[string]string) Grant {
	mode, recorded := annotations[IsolationModeAnnotation]
	return Grant{Consumer: labels[ConsumerLabel], ServiceAccountNamespace: namespace, Recorded: recorded,
		Mode: kbindv1alpha1.IsolationMode(mode), Namespace: annotations[NamespaceAnnotation], Prefix: annotations[PrefixAnnotation]}
}
