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

package syncer

// This file counts the provider copies a binding's deletion protection
// kept (BIND-5, docs/bindings.md#deletion-protection) for the binding's
// status.keptCopies: from the route's provider cache while a Syncer runs
// for it, else by one LIST on the provider, at most once per interval.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// MaxKeptNamespaces is how many namespaces a KeptCount names (as
// status.keptCopies[].namespaces).
const MaxKeptNamespaces = 10

// KeptCount is how many provider copies of one route a binding's
// deletion protection kept, and the first provider namespaces (sorted, at
// most MaxKeptNamespaces) that hold them.
type KeptCount struct {
	Count      int32
	Namespaces []string
}

// keptSelector selects the copies kept by deletion protection that carry
// the consumer cluster's ownership label: the rest of the decision
// (ownership annotation, kept-by) is tallyKept's.
func keptSelector(clusterUID string) client.MatchingLabels {
	return client.MatchingLabels{
		kbindv1alpha1.KeptLabel:               kbindv1alpha1.KeptDeletionProtection,
		kbindv1alpha1.ConsumerClusterUIDLabel: clusterUID,
	}
}

// tallyKept counts the objects that are copies kept by deletion
// protection for the binding keptBy (KeptBy) of the consumer cluster
// clusterUID: the kept label, kbind's ownership markers of that cluster
// (label and annotation) and the kept-by annotation must all say so.
// Copies of another binding, or of another consumer cluster sharing the
// provider, are not counted.
func tallyKept(objs []metav1.Object, clusterUID, keptBy string) KeptCount {
	var n int32
	seen := map[string]bool{}
	for _, o := range objs {
		l, a := o.GetLabels(), o.GetAnnotations()
		if clusterUID == "" || l[kbindv1alpha1.KeptLabel] != kbindv1alpha1.KeptDeletionProtection ||
			l[kbindv1alpha1.ConsumerClusterUIDLabel] != clusterUID || a[kbindv1alpha1.ConsumerClusterUIDAnnotation] != clusterUID ||
			a[kbindv1alpha1.KeptByAnnotation] != keptBy {
			continue
		}
		n++
		if ns := o.GetNamespace(); ns != "" {
			seen[ns] = true
		}
	}
	namespaces := make([]string, 0, len(seen))
	for ns := range seen {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	if len(namespaces) > MaxKeptNamespaces {
		namespaces = namespaces[:MaxKeptNamespaces]
	}
	if len(namespaces) == 0 {
		namespaces = nil
	}
	return KeptCount{Count: n, Namespaces: namespaces}
}

// keptFromCache counts the kept copies of rt from the provider cache of
// the Syncer running for it (the informer it syncs from: no request);
// running is false when no Syncer runs and syncs for the route.
func (r *Registry) keptFromCache(ctx context.Context, rt Route, keptBy string) (KeptCount, bool, error) {
	r.mu.Lock()
	s, ok := r.syncers[rt]
	r.mu.Unlock()
	if !ok || !s.Ready() {
		return KeptCount{}, false, nil
	}
	list := listOf(s.target.ProviderGVK)
	if err := s.session.Cache().List(ctx, list, client.UnsafeDisableDeepCopy, keptSelector(s.target.ClusterUID)); err != nil {
		return KeptCount{}, true, fmt.Errorf("listing the kept copies of %s from the provider cache: %w", rt.CRD, err)
	}
	objs := make([]metav1.Object, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return tallyKept(objs, s.target.ClusterUID, keptBy), true, nil
}

// keptListPage is the page size of the LIST that counts kept copies.
const keptListPage = 500

// listKept counts the kept copies of rt by a LIST on the provider
// (metadata only, by label selector, in pages; under Namespace isolation
// in the Connection's one namespace).
func (r *Registry) listKept(ctx context.Context, rt Route, keptBy string) (KeptCount, error) {
	api, ok, err := r.resolve(ctx, rt, false)
	if err != nil {
		return KeptCount{}, err
	}
	if !ok {
		return KeptCount{}, errNotReadable(rt, api.crd == nil)
	}
	gvk := api.Target.ProviderGVK
	var objs []metav1.Object
	opts := []client.ListOption{keptSelector(api.Target.ClusterUID), client.Limit(keptListPage)}
	if ns := api.Target.Isolation.ConfinedTo(); ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	for cont := ""; ; {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := api.Session.Client.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
			return KeptCount{}, fmt.Errorf("listing the kept copies of %s on the provider: %w", rt.CRD, err)
		}
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
		if cont = list.GetContinue(); cont == "" {
			break
		}
	}
	return tallyKept(objs, api.Target.ClusterUID, keptBy), nil
}

// errNotReadable is why the kept copies of a route cannot be listed: its
// consumer CRD is gone (deleted by hand: the provider API it names is not
// known any more), or it, the Connection or the provider session is not
// usable now.
func errNotReadable(rt Route, crdGone bool) error {
	if crdGone {
		return errors.New("its consumer CRD is gone, so its provider copies cannot be counted: list " + rt.CRD +
			" in a binding through Connection " + rt.Connection + " again to count them")
	}
	return fmt.Errorf("the provider of %s cannot be read now: %w", rt, ErrKeptNotReadable)
}

// ErrKeptNotReadable is why a count failed when the route's consumer CRD
// is not established, or its Connection or provider session not usable,
// yet: nothing was read (a binding just created waits for it).
var ErrKeptNotReadable = errors.New("consumer CRD, Connection or provider session not usable")

// keptKey is a route's kept copies of one binding.
type keptKey struct {
	rt     Route
	keptBy string
}

// keptMemo is the outcome of the last LIST of a keptKey: when it ran,
// the last count it read and whether it failed.
type keptMemo struct {
	at    time.Time
	count KeptCount
	err   error
}

// KeptCounter counts the provider copies a binding's deletion protection
// kept (BIND-5), per route and binding: from the route's provider cache
// while a Syncer runs for it, else by one LIST on the provider, made at
// most once per interval per route and binding (the last outcome is
// remembered in memory). Safe for concurrent use; Registry must be set.
type KeptCounter struct {
	Registry *Registry
	// now is the clock, cached and listed read the cache and LIST the
	// provider (tests set them); nil: time.Now, Registry.keptFromCache and
	// Registry.listKept.
	now    func() time.Time
	cached func(ctx context.Context, rt Route, keptBy string) (KeptCount, bool, error)
	listed func(ctx context.Context, rt Route, keptBy string) (KeptCount, error)

	mu   sync.Mutex
	last map[keptKey]keptMemo
}

// KeptCopies counts the copies of crdName through connection kept by the
// binding keptBy (KeptBy). Without a running Syncer it LISTs the
// provider, unless a LIST of the same route and binding ran less than
// every ago: then it answers what that LIST answered. A failed read
// returns its error and never a count: the caller keeps the last count
// it knows (status.keptCopies) and reports the failure.
func (k *KeptCounter) KeptCopies(ctx context.Context, crdName, connection, keptBy string, every time.Duration) (KeptCount, error) {
	rt := Route{CRD: crdName, Connection: connection}
	now, cached, listed := time.Now, k.Registry.keptFromCache, k.Registry.listKept
	if k.now != nil {
		now, cached, listed = k.now, k.cached, k.listed
	}
	if c, running, err := cached(ctx, rt, keptBy); running {
		return c, err
	}
	key := keptKey{rt: rt, keptBy: keptBy}
	k.mu.Lock()
	m, ok := k.last[key]
	k.mu.Unlock()
	if ok && now().Sub(m.at) < every {
		return m.count, m.err
	}
	c, err := listed(ctx, rt, keptBy)
	m = keptMemo{at: now(), count: c, err: err}
	k.mu.Lock()
	if k.last == nil {
		k.last = map[keptKey]keptMemo{}
	}
	k.last[key] = m
	k.mu.Unlock()
	return c, err
}

// ForgetKept drops what the counter remembers of the binding keptBy
// (it is gone).
func (k *KeptCounter) ForgetKept(keptBy string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.last {
		if key.keptBy == keptBy {
			delete(k.last, key)
		}
	}
}
