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

package faults

import (
	"fmt"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Object is what the invariants look at of one consumer object or
// provider copy.
type Object struct {
	Namespace, Name string
	UID             string
	// ConsumerUID is a provider copy's consumer-object-uid annotation;
	// empty on consumer objects and on provider objects kbind did not
	// create.
	ConsumerUID     string
	ResourceVersion string
	Spec, Status    map[string]any
	Finalizers      []string
	Deleting        bool
}

func (o Object) key() string { return o.Namespace + "/" + o.Name }

// FromUnstructured reads an Object.
func FromUnstructured(u *unstructured.Unstructured) Object {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	return Object{
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
		ConsumerUID:     u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation],
		ResourceVersion: u.GetResourceVersion(),
		Spec:            spec, Status: status,
		Finalizers: u.GetFinalizers(), Deleting: u.GetDeletionTimestamp() != nil,
	}
}

// Violation is one broken invariant.
type Violation struct {
	// Kind is the invariant: see the constants.
	Kind   string
	Object string
	Detail string
}

func (v Violation) String() string { return v.Kind + " " + v.Object + ": " + v.Detail }

// The invariants.
const (
	// Lost: a live consumer object has no provider copy.
	Lost = "lost"
	// Duplicated: more than one provider copy of a consumer object.
	Duplicated = "duplicated"
	// Orphaned: a provider copy whose consumer object is gone.
	Orphaned = "orphaned"
	// SpecDiffers: the copy's spec is not the consumer's current spec.
	SpecDiffers = "spec-differs"
	// StatusDiffers: the consumer's status is not the copy's current
	// status (when the copy has one: an absent status does not clear the
	// consumer's, SYNC-2).
	StatusDiffers = "status-differs"
	// Stuck: an object is being deleted and its deletion has not
	// completed (a finalizer is left) although nothing stops it.
	Stuck = "stuck"
	// Touched: an object kbind did not create was changed.
	Touched = "touched"
)

// Check compares the consumer objects with the provider objects of the
// same API after the fault healed and everything should have converged:
// provider objects without the consumer-object-uid annotation are
// foreign, and must equal (by resourceVersion) the foreign objects
// listed before the fault.
func Check(consumer, provider, foreignBefore []Object) []Violation {
	var out []Violation
	add := func(kind string, o Object, format string, args ...any) {
		out = append(out, Violation{Kind: kind, Object: o.key(), Detail: fmt.Sprintf(format, args...)})
	}
	copies := map[string][]Object{}
	foreign := map[string]Object{}
	for _, p := range provider {
		if p.ConsumerUID == "" {
			foreign[p.key()] = p
			continue
		}
		copies[p.ConsumerUID] = append(copies[p.ConsumerUID], p)
		if p.Deleting {
			add(Stuck, p, "provider copy deleting with finalizers %v", p.Finalizers)
		}
	}
	live := map[string]bool{} // consumer UIDs that exist
	for _, c := range consumer {
		// A deleting object's copy is reported with it, not as an orphan.
		live[c.UID] = true
		if c.Deleting {
			add(Stuck, c, "consumer object deleting with finalizers %v", c.Finalizers)
			continue
		}
		cs := copies[c.UID]
		switch {
		case len(cs) == 0:
			add(Lost, c, "no provider copy")
			continue
		case len(cs) > 1:
			add(Duplicated, c, "%d provider copies", len(cs))
		}
		p := cs[0]
		if !reflect.DeepEqual(c.Spec, p.Spec) {
			add(SpecDiffers, c, "consumer %v, provider %v", c.Spec, p.Spec)
		}
		// SYNC-2: a copy without status (re-created a moment ago, not
		// yet seen by the provider's controller) leaves the consumer's
		// last status as it is.
		if p.Status != nil && !reflect.DeepEqual(c.Status, p.Status) {
			add(StatusDiffers, c, "consumer %v, provider %v", c.Status, p.Status)
		}
	}
	for uid, cs := range copies {
		if live[uid] {
			continue
		}
		for _, p := range cs {
			if !p.Deleting {
				add(Orphaned, p, "the consumer object %s is gone", uid)
			}
		}
	}
	for _, f := range foreignBefore {
		now, ok := foreign[f.key()]
		switch {
		case !ok:
			add(Touched, f, "deleted")
		case now.ResourceVersion != f.ResourceVersion:
			add(Touched, f, "resourceVersion %s, was %s", now.ResourceVersion, f.ResourceVersion)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Object < out[j].Object
	})
	return out
}

// Count is how many violations there are of kind.
func Count(vs []Violation, kind string) int {
	n := 0
	for _, v := range vs {
		if v.Kind == kind {
			n++
		}
	}
	return n
}
