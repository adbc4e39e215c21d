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

// Package slim owns what kbind's caches keep of an object: informer
// transforms that drop what kbind never reads, so that a synced object
// costs as little memory as it can (docs/sync.md#cost).
package slim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Transform drops managed fields from every object and, from the objects
// of bound APIs (unstructured), kubectl's last-applied-configuration
// annotation: a second copy of the object that kbind never copies nor
// reads. What kbind writes back to such an object is a patch of the
// fields it changes or a status update, so the dropped fields are never
// written back (never lost).
func Transform() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(in any) (any, error) {
		if u, ok := in.(*unstructured.Unstructured); ok {
			slimUnstructured(u)
			return u, nil
		}
		return strip(in)
	}
}

// slimUnstructured drops managed fields and the last-applied annotation
// from u's maps in place. It reads the maps directly: the accessors of
// Unstructured convert managed fields to typed entries and copy the
// annotations, which made this transform a measurable share of the
// konnector's CPU (it runs on every watch event).
func slimUnstructured(u *unstructured.Unstructured) {
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return
	}
	delete(md, "managedFields")
	ann, ok := md["annotations"].(map[string]any)
	if !ok {
		return
	}
	if _, ok := ann[corev1.LastAppliedConfigAnnotation]; !ok {
		return
	}
	delete(ann, corev1.LastAppliedConfigAnnotation)
	if len(ann) == 0 {
		delete(md, "annotations")
	}
}
