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

package schema

import (
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestUnbindDeletesCRD(t *testing.T) {
	last := UnbindFate{Connection: true, PullPolicy: kbindv1alpha1.PullPolicyBound, CRD: true, CreatedForConnection: true}
	with := func(mutate func(*UnbindFate)) UnbindFate { f := last; mutate(&f); return f }
	cases := []struct {
		name string
		f    UnbindFate
		want bool
	}{
		{"the last binding of kbind's CRD for this Connection", last, true},
		{"pullPolicy unset (Bound)", with(func(f *UnbindFate) { f.PullPolicy = "" }), true},
		{"another binding lists it (two ClusterBindings: false on both)", with(func(f *UnbindFate) { f.OtherBindings = 1 }), false},
		{"pullPolicy All never deletes", with(func(f *UnbindFate) { f.PullPolicy = kbindv1alpha1.PullPolicyAll }), false},
		{"pullPolicy None never deletes", with(func(f *UnbindFate) { f.PullPolicy = kbindv1alpha1.PullPolicyNone }), false},
		{"the Connection is gone: the policy is unknown, the CRD kept", with(func(f *UnbindFate) { f.Connection = false }), false},
		{"no consumer CRD", with(func(f *UnbindFate) { f.CRD, f.CreatedForConnection = false, false }), false},
		{"a CRD kbind did not create, or created for another Connection", with(func(f *UnbindFate) { f.CreatedForConnection = false }), false},
		{"the CRD is being deleted already", with(func(f *UnbindFate) { f.CRDDeleting = true }), false},
	}
	for _, tc := range cases {
		if got := UnbindDeletesCRD(tc.f); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}
