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

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// MetadataRules select the labels and annotations of a consumer object
// that its provider copy carries (binding spec.metadata): each entry is a
// key, a prefix ending in "/" (every key of it), or "*" (every key).
type MetadataRules struct {
	Labels, Annotations []string
}

// lastAppliedAnnotation is kubectl's copy of the whole object: never copied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// empty: the binding copies no metadata (the default).
func (m MetadataRules) empty() bool { return len(m.Labels) == 0 && len(m.Annotations) == 0 }

// Stamp sets on the provider copy u the labels and annotations of cobj the
// rules select, and records their keys in SyncedMetadataAnnotation — with
// server-side apply, a key no longer selected then leaves the provider copy
// too, and keys other writers set there are left alone. No rules: nothing.
func (m MetadataRules) Stamp(u, cobj *unstructured.Unstructured) {
	if m.empty() {
		return
	}
	labels := selectKeys(m.Labels, cobj.GetLabels())
	annotations := selectKeys(m.Annotations, cobj.GetAnnotations())
	annotations[kbindv1alpha1.SyncedMetadataAnnotation] = "labels=" + strings.Join(sortedKeys(labels), ",") +
		";annotations=" + strings.Join(sortedKeys(annotations), ",")
	if len(labels) > 0 {
		u.SetLabels(labels)
	}
	u.SetAnnotations(annotations)
}

// selectKeys returns the entries of from that rules select, without
// kbind's own keys and kubectl's last-applied configuration.
func selectKeys(rules []string, from map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range from {
		if strings.HasPrefix(k, kbindv1alpha1.GroupName+"/") || k == lastAppliedAnnotation {
			continue
		}
		for _, r := range rules {
			if r == "*" || r == k || (strings.HasSuffix(r, "/") && strings.HasPrefix(k, r)) {
				out[k] = v
				break
			}
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
