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
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestCheck(t *testing.T) {
	spec := func(size int64) map[string]any { return map[string]any{"size": size} }
	status := func(phase string) map[string]any { return map[string]any{"phase": phase} }
	consumer := func(name, uid string, size int64, phase string) Object {
		o := Object{Namespace: "ns", Name: name, UID: uid, Spec: spec(size)}
		if phase != "" {
			o.Status = status(phase)
		}
		return o
	}
	copyOf := func(c Object, phase string) Object {
		o := Object{Namespace: c.Namespace, Name: c.Name, UID: "p-" + c.UID, ConsumerUID: c.UID, Spec: c.Spec}
		if phase != "" {
			o.Status = status(phase)
		}
		return o
	}
	a, b := consumer("a", "1", 1, "Ready"), consumer("b", "2", 2, "")
	deleting := func(o Object) Object { o.Deleting, o.Finalizers = true, []string{"core.kbind.io/cleanup"}; return o }
	foreign := Object{Namespace: "ns", Name: "foreign", UID: "f", ResourceVersion: "7"}
	foreignChanged := foreign
	foreignChanged.ResourceVersion = "8"

	for _, tc := range []struct {
		name               string
		consumer, provider []Object
		foreign            []Object
		want               []string // kind + " " + object
	}{
		{name: "converged", consumer: []Object{a, b}, provider: []Object{copyOf(a, "Ready"), copyOf(b, ""), foreign}, foreign: []Object{foreign}},
		{name: "nothing at all"},
		{name: "lost", consumer: []Object{a, b}, provider: []Object{copyOf(a, "Ready")}, want: []string{"lost ns/b"}},
		{name: "duplicated", consumer: []Object{a}, provider: []Object{copyOf(a, "Ready"), func() Object {
			o := copyOf(a, "Ready")
			o.Namespace = "other"
			return o
		}()}, want: []string{"duplicated ns/a"}},
		{name: "orphaned copy", consumer: []Object{a}, provider: []Object{copyOf(a, "Ready"), copyOf(b, "")}, want: []string{"orphaned ns/b"}},
		{name: "a copy of a recreated object is an orphan and the new one lost",
			consumer: []Object{consumer("a", "9", 1, "")}, provider: []Object{copyOf(a, "")},
			want: []string{"lost ns/a", "orphaned ns/a"}},
		{name: "old spec on the provider", consumer: []Object{a}, provider: []Object{func() Object {
			o := copyOf(a, "Ready")
			o.Spec = spec(5)
			return o
		}()}, want: []string{"spec-differs ns/a"}},
		{name: "status not back", consumer: []Object{b}, provider: []Object{copyOf(b, "Ready")}, want: []string{"status-differs ns/b"}},
		{name: "stale status", consumer: []Object{a}, provider: []Object{copyOf(a, "Failed")}, want: []string{"status-differs ns/a"}},
		{name: "a copy without status keeps the consumer's last one", consumer: []Object{a}, provider: []Object{copyOf(a, "")}},
		{name: "stuck consumer deletion", consumer: []Object{deleting(a)}, provider: []Object{copyOf(a, "Ready")}, want: []string{"stuck ns/a"}},
		{name: "stuck provider deletion of a gone object", provider: []Object{deleting(copyOf(a, "Ready"))}, want: []string{"stuck ns/a"}},
		{name: "foreign object changed", provider: []Object{foreignChanged}, foreign: []Object{foreign}, want: []string{"touched ns/foreign"}},
		{name: "foreign object deleted", foreign: []Object{foreign}, want: []string{"touched ns/foreign"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range Check(tc.consumer, tc.provider, tc.foreign) {
				got = append(got, v.Kind+" "+v.Object)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFromUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"namespace": "ns", "name": "a", "uid": "u", "resourceVersion": "3",
			"annotations":       map[string]any{kbindv1alpha1.ConsumerObjectUIDAnnotation: "c"},
			"finalizers":        []any{"f"},
			"deletionTimestamp": "2026-01-01T00:00:00Z",
		},
		"spec":   map[string]any{"size": int64(1)},
		"status": map[string]any{"phase": "Ready"},
	}}
	got := FromUnstructured(u)
	want := Object{Namespace: "ns", Name: "a", UID: "u", ConsumerUID: "c", ResourceVersion: "3",
		Spec: map[string]any{"size": int64(1)}, Status: map[string]any{"phase": "Ready"}, Finalizers: []string{"f"}, Deleting: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCount(t *testing.T) {
	vs := []Violation{{Kind: Lost}, {Kind: Lost}, {Kind: Orphaned}}
	if Count(vs, Lost) != 2 || Count(vs, Orphaned) != 1 || Count(vs, Stuck) != 0 {
		t.Errorf("Count: %v", vs)
	}
}
