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

package consumers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

// Gather reads the provider c is a client of and returns every consumer
// (only the one named only, when not ""), sorted by name. It reads what
// grant labelled (kbind.io/consumer), the heartbeat Leases
// (core.kbind.io/managed=true) and, metadata only, the provider copies of
// the granted APIs labelled with the consumers' cluster UIDs: one list per
// API, whatever the number of consumers. It fails only when the
// ServiceAccounts, namespaces or Leases cannot be read (no status can be
// told without them); every other failed read is a problem in the result.
func Gather(ctx context.Context, c client.Client, now time.Time, only string) (List, error) {
	l := List{Version: ListVersion, Consumers: []Consumer{}}
	sas, err := listMeta(ctx, c, corev1.SchemeGroupVersion.WithKind("ServiceAccountList"), client.HasLabels{access.ConsumerLabel})
	if err != nil {
		return l, fmt.Errorf("listing the consumers' ServiceAccounts (label %s): %w", access.ConsumerLabel, err)
	}
	nss, err := listMeta(ctx, c, corev1.SchemeGroupVersion.WithKind("NamespaceList"), client.HasLabels{access.ConsumerLabel})
	if err != nil {
		return l, fmt.Errorf("listing the consumers' namespaces (label %s): %w", access.ConsumerLabel, err)
	}
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		return l, fmt.Errorf("listing the heartbeat Leases (label %s=%s): %w", kbindv1alpha1.ManagedLabel, kbindv1alpha1.ManagedLabelValue, err)
	}

	set := newConsumerSet()
	set.addServiceAccounts(sas)
	set.addNamespaces(nss)
	rules := map[string][]rbacv1.PolicyRule{}
	l.Problems = append(l.Problems, readGranted(ctx, c, set.get, rules)...)

	set.addLeases(leases.Items, now)

	names := set.names(only)
	if only != "" && len(names) == 0 {
		return l, fmt.Errorf("there is no consumer %q on this cluster (no object labelled %s=%s, no heartbeat Lease of a consumer cluster of that UID)", only, access.ConsumerLabel, only)
	}

	selected := make([]*Consumer, 0, len(names))
	for _, name := range names {
		cons := set.byName[name]
		cons.APIs, cons.Related = apisOf(rules[name])
		cons.Heartbeat = heartbeatOf(cons.Leases)
		cons.Status = statusOf(set.hasSA[name] || cons.NeverGranted, cons.Leases)
		cons.KonnectorVersions = versionsOf(cons.Leases)
		cons.Token = tokenOf(cons.Leases)
		selected = append(selected, cons)
	}
	l.Problems = append(l.Problems, countCopies(ctx, c, selected, rules)...)
	for _, cons := range selected {
		if cons.Status == StatusRevoked {
			ns := slices.Clone(set.own[cons.Name])
			sort.Strings(ns)
			cons.Left = leftOf(*cons, ns)
		}
		l.Consumers = append(l.Consumers, *cons)
	}
	return l, nil
}

// consumerSet is the consumers Gather finds, by name, as it reads the
// objects labelled with their names.
type consumerSet struct {
	byName map[string]*Consumer
	// hasSA is whether the consumer's ServiceAccount exists.
	hasSA map[string]bool
	// own is the consumer's namespaces (labelled with its name).
	own map[string][]string
}

// newConsumerSet returns an empty set.
func newConsumerSet() *consumerSet {
	return &consumerSet{byName: map[string]*Consumer{}, hasSA: map[string]bool{}, own: map[string][]string{}}
}

// get returns the consumer named name, adding it empty the first time.
func (s *consumerSet) get(name string) *Consumer {
	if s.byName[name] == nil {
		s.byName[name] = &Consumer{Name: name, APIs: []string{}, Copies: []CopyCount{}, Leases: []Lease{}, Granted: []ObjectRef{}, KonnectorVersions: []string{}}
	}
	return s.byName[name]
}

// addServiceAccounts records each consumer's ServiceAccount and what grant
// annotated on it (isolation mode, namespace, prefix).
func (s *consumerSet) addServiceAccounts(sas []metav1.PartialObjectMetadata) {
	for _, sa := range sas {
		name := sa.Labels[access.ConsumerLabel]
		cons := s.get(name)
		s.hasSA[name] = true
		cons.ServiceAccount = sa.Namespace + "/" + sa.Name
		cons.Mode = sa.Annotations[access.IsolationModeAnnotation]
		cons.Namespace = sa.Annotations[access.NamespaceAnnotation]
		cons.Prefix = sa.Annotations[access.PrefixAnnotation]
		cons.Granted = append(cons.Granted, ObjectRef{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name})
	}
}

// addNamespaces records each consumer's namespaces; they tell the mode,
// prefix and namespace of a consumer whose ServiceAccount does not (one
// that was revoked).
func (s *consumerSet) addNamespaces(nss []metav1.PartialObjectMetadata) {
	for _, ns := range nss {
		name := ns.Labels[access.ConsumerLabel]
		cons := s.get(name)
		s.own[name] = append(s.own[name], ns.Name)
		if p := ns.Labels[kbindv1alpha1.PrefixLabel]; p != "" && cons.Mode == "" {
			cons.Mode, cons.Prefix = string(kbindv1alpha1.IsolationPrefixed), p
		}
		if cons.Namespace == "" {
			cons.Namespace = ns.Name
		}
	}
}

// names returns the names of the consumers, sorted; only the one named
// only when it is not "".
func (s *consumerSet) names(only string) []string {
	names := make([]string, 0, len(s.byName))
	for name := range s.byName {
		if only == "" || name == only {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// addLeases gives each consumer the heartbeat Leases in its own
// namespaces (where they live, whatever the mode). A Lease in no
// consumer's namespace is a consumer cluster's that connected without a
// grant (with credentials grant did not make: the quickstart's, an
// administrator's): one never-granted consumer per consumer cluster UID,
// named by it.
func (s *consumerSet) addLeases(leases []coordinationv1.Lease, now time.Time) {
	leaseNS := map[string]string{} // namespace → consumer
	for _, name := range slices.Sorted(maps.Keys(s.byName)) {
		for _, ns := range append([]string{s.byName[name].Namespace}, s.own[name]...) {
			if ns != "" {
				leaseNS[ns] = name
			}
		}
	}
	for i := range leases {
		lease := leaseOf(&leases[i], now)
		name, ok := leaseNS[leases[i].Namespace]
		if !ok {
			name = ungrantedName(lease)
			if c := s.byName[name]; c != nil && !c.NeverGranted {
				// A UID that spells a granted consumer's name: never
				// lend that consumer a heartbeat.
				name = lease.Namespace + "/" + lease.Name
			}
			if s.byName[name] == nil {
				cons := s.get(name)
				cons.NeverGranted = true
				cons.Namespace = lease.Namespace
			}
		}
		cons := s.byName[name]
		cons.Leases = append(cons.Leases, lease)
	}
}

// ungrantedName names the never-granted consumer a Lease is of: its
// consumer cluster UID (the label, else the holder), else the Lease.
func ungrantedName(l Lease) string {
	switch {
	case l.ConsumerClusterUID != "":
		return l.ConsumerClusterUID
	case l.Holder != "":
		return l.Holder
	}
	return l.Namespace + "/" + l.Name
}

func listMeta(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk)
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// readGranted lists what grant made besides the ServiceAccount (the kinds
// revoke deletes, in its order), records each object on its consumer and the rules of
// its roles in rules; a failed list is a problem.
func readGranted(ctx context.Context, c client.Client, get func(string) *Consumer, rules map[string][]rbacv1.PolicyRule) []string {
	var problems []string
	for _, kind := range access.Kinds {
		switch kind.Kind {
		case "ServiceAccount":
			continue // read by Gather
		case "Role":
			roles := &rbacv1.RoleList{}
			if err := c.List(ctx, roles, client.HasLabels{access.ConsumerLabel}); err != nil {
				problems = append(problems, fmt.Sprintf("listing the consumers' Roles: %v (their granted APIs are unknown)", err))
				continue
			}
			for _, r := range roles.Items {
				name := r.Labels[access.ConsumerLabel]
				rules[name] = append(rules[name], r.Rules...)
				get(name).Granted = append(get(name).Granted, ObjectRef{Kind: kind.Kind, Namespace: r.Namespace, Name: r.Name})
			}
			continue
		case "ClusterRole":
			roles := &rbacv1.ClusterRoleList{}
			if err := c.List(ctx, roles, client.HasLabels{access.ConsumerLabel}); err != nil {
				problems = append(problems, fmt.Sprintf("listing the consumers' ClusterRoles: %v (their granted APIs are unknown)", err))
				continue
			}
			for _, r := range roles.Items {
				name := r.Labels[access.ConsumerLabel]
				rules[name] = append(rules[name], r.Rules...)
				get(name).Granted = append(get(name).Granted, ObjectRef{Kind: kind.Kind, Name: r.Name})
			}
			continue
		}
		gv, err := schema.ParseGroupVersion(kind.APIVersion)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		items, err := listMeta(ctx, c, gv.WithKind(kind.Kind+"List"), client.HasLabels{access.ConsumerLabel})
		if err != nil {
			problems = append(problems, fmt.Sprintf("listing the consumers' %ss: %v", kind.Kind, err))
			continue
		}
		for _, o := range items {
			cons := get(o.Labels[access.ConsumerLabel])
			cons.Granted = append(cons.Granted, ObjectRef{Kind: kind.Kind, Namespace: o.Namespace, Name: o.Name})
		}
	}
	return problems
}

// leaseOf reads a heartbeat Lease and what its konnector wrote on it.
func leaseOf(l *coordinationv1.Lease, now time.Time) Lease {
	ann := l.Annotations
	out := Lease{Namespace: l.Namespace, Name: l.Name, ConsumerClusterUID: l.Labels[kbindv1alpha1.ConsumerClusterUIDLabel],
		Connection: ann[kbindv1alpha1.ConnectionAnnotation], StaleSince: ann[kbindv1alpha1.StaleSinceAnnotation],
		KonnectorVersion: ann[kbindv1alpha1.KonnectorVersionAnnotation], APIVersion: ann[kbindv1alpha1.APIVersionAnnotation],
		ProviderUser: ann[kbindv1alpha1.ProviderUserAnnotation], CredentialKind: ann[kbindv1alpha1.CredentialKindAnnotation],
		CredentialRenews: ann[kbindv1alpha1.CredentialRenewsAnnotation] == "true"}
	if l.Spec.HolderIdentity != nil {
		out.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		t := l.Spec.RenewTime.UTC()
		out.RenewTime = &t
	}
	if l.Spec.LeaseDurationSeconds != nil {
		out.DurationSeconds = *l.Spec.LeaseDurationSeconds
	}
	if v := ann[kbindv1alpha1.CredentialExpiryAnnotation]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			t = t.UTC()
			out.CredentialExpiry = &t
		}
	}
	out.Stale = leaseStale(out, now)
	return out
}

// countCopies counts, metadata only, the provider copies of each consumer:
// one list per API over the consumer cluster UIDs of every consumer it
// concerns (label core.kbind.io/consumer-cluster-uid in (...)). A revoked
// consumer's roles are gone: its copies are looked for among every API
// granted to anyone and every exported CRD. A failed count leaves the
// consumer's Objects unknown and says why.
func countCopies(ctx context.Context, c client.Client, selected []*Consumer, rules map[string][]rbacv1.PolicyRule) []string {
	universe, problems := copyUniverse(ctx, c, selected, rules)
	byAPI := holdersByAPI(selected, universe)
	counts := map[*Consumer]map[copyPlace]int{}
	for _, api := range sortedKeys(byAPI) {
		countAPI(ctx, c, api, byAPI[api], counts)
	}
	for _, cons := range selected {
		setCopies(cons, counts[cons])
	}
	return problems
}

// searchesEverywhere is whether cons's copies are looked for among every
// API: a revoked consumer, whose roles no longer say which it had, and a
// never-granted one, which has none.
func searchesEverywhere(cons *Consumer) bool {
	return len(cons.APIs) == 0 && (cons.Status == StatusRevoked || cons.NeverGranted)
}

// copyUniverse returns every API granted to any consumer and, when a
// selected consumer searches everywhere, every exported CRD; a failed list
// of the CRDs is a problem.
func copyUniverse(ctx context.Context, c client.Client, selected []*Consumer, rules map[string][]rbacv1.PolicyRule) (map[string]bool, []string) {
	universe := map[string]bool{}
	for _, rs := range rules {
		apis, _ := apisOf(rs)
		for _, a := range apis {
			universe[a] = true
		}
	}
	if !slices.ContainsFunc(selected, searchesEverywhere) {
		return universe, nil
	}
	var problems []string
	crds, err := listMeta(ctx, c, apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"),
		client.MatchingLabels{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue})
	if err != nil {
		problems = append(problems, fmt.Sprintf("listing the exported CRDs (where a revoked consumer's copies are looked for): %v", err))
	}
	for _, crd := range crds {
		universe[crd.Name] = true
	}
	return universe, problems
}

// holdersByAPI returns, per API, the consumers that may hold copies of it
// by the consumer cluster UID of their Leases (API → UID → consumers). It
// sets each consumer's Objects to 0, the count before any copy is found.
func holdersByAPI(selected []*Consumer, universe map[string]bool) map[string]map[string][]*Consumer {
	byAPI := map[string]map[string][]*Consumer{}
	for _, cons := range selected {
		n := 0
		cons.Objects = &n
		apis := cons.APIs
		if searchesEverywhere(cons) {
			apis = sortedKeys(universe)
		}
		for _, api := range apis {
			for _, lease := range cons.Leases {
				uid := lease.ConsumerClusterUID
				if uid == "" {
					continue
				}
				if byAPI[api] == nil {
					byAPI[api] = map[string][]*Consumer{}
				}
				if !slices.Contains(byAPI[api][uid], cons) {
					byAPI[api][uid] = append(byAPI[api][uid], cons)
				}
			}
		}
	}
	return byAPI
}

// copyPlace is where copies are counted: an API in a namespace.
type copyPlace struct {
	api, ns string
}

// countAPI lists the copies of api labelled with the UIDs of holders (UID
// → consumers) and adds each to the counts of the consumers that own it.
// A failed list makes those consumers' Objects unknown, with the reason
// among their problems (once).
func countAPI(ctx context.Context, c client.Client, api string, holders map[string][]*Consumer, counts map[*Consumer]map[copyPlace]int) {
	uids := sortedKeys(holders)
	items, err := listCopies(ctx, c, api, uids)
	if err != nil {
		msg := fmt.Sprintf("counting its %s copies: %v", api, err)
		for _, uid := range uids {
			for _, cons := range holders[uid] {
				cons.Objects = nil
				if !slices.Contains(cons.Problems, msg) {
					cons.Problems = append(cons.Problems, msg)
				}
			}
		}
		return
	}
	for _, item := range items {
		for _, cons := range ownersOf(holders[item.Labels[kbindv1alpha1.ConsumerClusterUIDLabel]], item.Namespace) {
			if counts[cons] == nil {
				counts[cons] = map[copyPlace]int{}
			}
			counts[cons][copyPlace{api, item.Namespace}]++
		}
	}
}

// setCopies writes counts into cons's Copies, sorted by API and namespace,
// and their total into its Objects unless a count failed (Objects nil).
func setCopies(cons *Consumer, counts map[copyPlace]int) {
	total := 0
	for k, n := range counts {
		cons.Copies = append(cons.Copies, CopyCount{API: k.api, Namespace: k.ns, Count: n})
		total += n
	}
	sort.Slice(cons.Copies, func(i, j int) bool {
		a, b := cons.Copies[i], cons.Copies[j]
		return a.API < b.API || a.API == b.API && a.Namespace < b.Namespace
	})
	if cons.Objects != nil {
		cons.Objects = &total
	}
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// listCopies lists, metadata only, the objects of api (<plural>.<group>)
// labelled with one of uids.
func listCopies(ctx context.Context, c client.Client, api string, uids []string) ([]metav1.PartialObjectMetadata, error) {
	resource, group, _ := strings.Cut(api, ".")
	gvk, err := c.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: resource})
	if err != nil {
		return nil, fmt.Errorf("the provider does not serve it: %w", err)
	}
	req, err := labels.NewRequirement(kbindv1alpha1.ConsumerClusterUIDLabel, selection.In, uids)
	if err != nil {
		return nil, err
	}
	return listMeta(ctx, c, gvk.GroupVersion().WithKind(gvk.Kind+"List"), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)})
}
