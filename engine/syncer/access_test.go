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
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestAccessRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *AccessRefused
		want []string
	}{
		{name: "the consumer: the chart value to change", err: &AccessRefused{Consumer: true, Group: "example.org", Kind: "Widget"},
			want: []string{"consumer cluster refuses the konnector the list of Widget objects (API group example.org): forbidden", "ServiceAccount", `add "example.org" to rbac.boundResourceGroups`}},
		{name: "the provider: its administrator grants", err: &AccessRefused{Group: "example.org", Kind: "Widget"},
			want: []string{"provider refuses this Connection's credentials the list of Widget objects (API group example.org) on the provider: forbidden", "administrator"}},
		{name: "a confined Connection: the namespace", err: &AccessRefused{Group: "example.org", Kind: "Widget", Namespace: "tenant-a"},
			want: []string{"in the provider namespace tenant-a: forbidden", "on them in the provider namespace tenant-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if got := Refusal(fmt.Errorf("syncer: %w", tc.err)); got != msg {
				t.Errorf("Refusal of the wrapped error: %q", got)
			}
		})
	}
	if got := Refusal(errors.New("informers did not sync")); got != "" {
		t.Errorf("another error read as a refusal: %q", got)
	}
}
