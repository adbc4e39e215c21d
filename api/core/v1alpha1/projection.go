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

import "strings"

// ConsumerName is the name of the consumer API an entry of spec.apis
// binds, "<plural>.<group>": the provider's name, or the projection's
// (docs/shaping.md#projection). Everything on the consumer — the consumer
// CRD, status.boundAPIs, the engine's per-API state — is keyed by it.
func (a APIReference) ConsumerName() string {
	if a.Projection == nil {
		return a.Name
	}
	plural, group, _ := strings.Cut(a.Name, ".")
	if p := a.Projection; p.Plural != "" {
		plural = p.Plural
	} else if p.Kind != "" {
		plural = DefaultPlural(p.Kind)
	}
	if a.Projection.Group != "" {
		group = a.Projection.Group
	}
	return plural + "." + group
}

// Projected reports whether the entry has a projection: its consumer API's
// names (short names and categories included) come from the projection,
// not from the provider.
func (a APIReference) Projected() bool { return a.Projection != nil }

// DefaultPlural is the plural a projection derives from a kind: the kind
// in lower case with "s" appended.
func DefaultPlural(kind string) string { return strings.ToLower(kind) + "s" }

// ConsumerNames are the consumer API names of every entry of spec.apis,
// in order.
func (s *BindingSpec) ConsumerNames() []string {
	out := make([]string, 0, len(s.APIs))
	for _, a := range s.APIs {
		out = append(out, a.ConsumerName())
	}
	return out
}

// APIFor returns the entry of spec.apis whose consumer API is
// consumerName.
func (s *BindingSpec) APIFor(consumerName string) (APIReference, bool) {
	for _, a := range s.APIs {
		if a.ConsumerName() == consumerName {
			return a, true
		}
	}
	return APIReference{}, false
}
