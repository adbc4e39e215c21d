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

package v1alpha1

import "testing"

func TestConsumerName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  APIReference
		want string
	}{
		{"not projected", APIReference{Name: "widgets.example.org"}, "widgets.example.org"},
		{"empty projection", APIReference{Name: "widgets.example.org", Projection: &Projection{}}, "widgets.example.org"},
		{"group only", APIReference{Name: "widgets.example.org", Projection: &Projection{Group: "acme.io"}}, "widgets.acme.io"},
		{"kind derives the plural", APIReference{Name: "widgets.example.org", Projection: &Projection{Group: "acme.io", Kind: "AcmeWidget"}}, "acmewidgets.acme.io"},
		{"plural wins over the kind", APIReference{Name: "widgets.example.org", Projection: &Projection{Kind: "AcmeWidget", Plural: "aws"}}, "aws.example.org"},
		{"a dotted group", APIReference{Name: "databases.internal.corp", Projection: &Projection{Group: "db.acme.io"}}, "databases.db.acme.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ref.ConsumerName(); got != tc.want {
				t.Errorf("ConsumerName() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAPIFor(t *testing.T) {
	spec := BindingSpec{APIs: []APIReference{
		{Name: "widgets.example.org"},
		{Name: "gadgets.example.org", Projection: &Projection{Group: "acme.io"}},
	}}
	if a, ok := spec.APIFor("gadgets.acme.io"); !ok || a.Name != "gadgets.example.org" {
		t.Errorf("APIFor(gadgets.acme.io) = %v, %v", a, ok)
	}
	if _, ok := spec.APIFor("gadgets.example.org"); ok {
		t.Error("APIFor found a projected API by its provider name")
	}
	if got := spec.ConsumerNames(); len(got) != 2 || got[0] != "widgets.example.org" || got[1] != "gadgets.acme.io" {
		t.Errorf("ConsumerNames() = %v", got)
	}
}
