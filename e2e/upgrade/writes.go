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

package upgrade

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// write is one change an upgrade made to an object: which cluster and
// resource, which object, and what changed in it.
type write struct {
	cluster, resource, object string
	changes                   []string
}

func (w write) String() string {
	return fmt.Sprintf("%s %s %s: %s", w.cluster, w.resource, w.object, strings.Join(w.changes, ", "))
}

// recorder watches resources and keeps every write after its start, with
// what each changed against the object as it was before.
type recorder struct {
	mu     sync.Mutex
	last   time.Time
	writes []write
	errs   []error
}

// watch lists gvr in namespace ("" for all) on cluster and records every
// write after the list until ctx ends.
func (r *recorder) watch(ctx context.Context, cluster string, c dynamic.Interface, gvr schema.GroupVersionResource, namespace string) error {
	list, err := c.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing %s on the %s: %w", gvr.Resource, cluster, err)
	}
	seen := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		seen[key(&list.Items[i])] = &list.Items[i]
	}
	w, err := c.Resource(gvr).Namespace(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return fmt.Errorf("watching %s on the %s: %w", gvr.Resource, cluster, err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						r.fail(fmt.Errorf("the watch of %s on the %s ended early", gvr.Resource, cluster))
					}
					return
				}
				u, isObject := ev.Object.(*unstructured.Unstructured)
				if !isObject {
					r.fail(fmt.Errorf("%s on the %s: a %s event of %T", gvr.Resource, cluster, ev.Type, ev.Object))
					continue
				}
				k := key(u)
				var changed []string
				switch ev.Type {
				case watch.Added:
					changed = []string{"created"}
				case watch.Deleted:
					changed = []string{"deleted"}
				case watch.Modified:
					changed = changes(seen[k], u)
				default:
					continue
				}
				seen[k] = u
				r.record(write{cluster: cluster, resource: gvr.Resource, object: k, changes: changed})
			}
		}
	}()
	return nil
}

func (r *recorder) record(w write) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, w)
	r.last = time.Now()
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// quietFor says whether no write was recorded for d (since start when
// there was none).
func (r *recorder) quietFor(start time.Time, d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.last
	if last.IsZero() {
		last = start
	}
	return time.Since(last) >= d
}

func (r *recorder) result() ([]write, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]write(nil), r.writes...), append([]error(nil), r.errs...)
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// changes names what differs between two versions of an object: each
// label and annotation by key, the finalizers, owner references, spec,
// status and anything else of metadata but its bookkeeping
// (resourceVersion, managedFields, generation); "re-created" when the UID
// differs, "nothing but managedFields" for a write that changed nothing
// else.
func changes(before, after *unstructured.Unstructured) []string {
	if before == nil {
		return []string{"created (unseen before)"}
	}
	if before.GetUID() != after.GetUID() {
		return []string{"re-created"}
	}
	var out []string
	for _, m := range []struct {
		field         string
		before, after map[string]string
	}{
		{"labels", before.GetLabels(), after.GetLabels()},
		{"annotations", before.GetAnnotations(), after.GetAnnotations()},
	} {
		for k := range union(m.before, m.after) {
			if m.before[k] != m.after[k] {
				out = append(out, fmt.Sprintf("metadata.%s[%s]", m.field, k))
			}
		}
	}
	if !reflect.DeepEqual(before.GetFinalizers(), after.GetFinalizers()) {
		out = append(out, "metadata.finalizers")
	}
	if !reflect.DeepEqual(before.GetOwnerReferences(), after.GetOwnerReferences()) {
		out = append(out, "metadata.ownerReferences")
	}
	for _, f := range []string{"spec", "status", "data", "stringData", "type"} {
		if !reflect.DeepEqual(before.Object[f], after.Object[f]) {
			out = append(out, f)
		}
	}
	if before.GetDeletionTimestamp() == nil && after.GetDeletionTimestamp() != nil {
		out = append(out, "metadata.deletionTimestamp")
	}
	if len(out) == 0 {
		out = []string{"nothing but managedFields"}
	}
	sort.Strings(out)
	return out
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
