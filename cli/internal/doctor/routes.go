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

package doctor

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// docRoutes is where the routing rules are explained.
const docRoutes = "docs/bindings.md#one-api-several-providers"

// refusedRoute is the reason a binding that is no route of its API has
// (docs/bindings.md#one-api-several-providers), "" when it is one.
func refusedRoute(b BindingState) kbindv1alpha1.Reason {
	c := meta(b.Status.Conditions, kbindv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	switch r := kbindv1alpha1.Reason(c.Reason); r {
	case kbindv1alpha1.ReasonOverlappingBinding, kbindv1alpha1.ReasonSchemaIncompatible:
		return r
	}
	return ""
}

// routeFindings explains each consumer API bound through more than one
// Connection: a Note naming, for every binding of it, the Connection its
// objects go to and the namespaces (and objects) it routes — and the
// bindings the konnector refused as routes, with their reason (their
// binding.notReady finding carries the message).
func routeFindings(bindings []BindingState, cmd Commands) []Finding {
	type route struct {
		b   BindingState
		api kbindv1alpha1.APIReference
	}
	byAPI := map[string][]route{}
	for _, b := range bindings {
		for _, api := range b.Spec.APIs {
			byAPI[api.ConsumerName()] = append(byAPI[api.ConsumerName()], route{b, api})
		}
	}
	var out []Finding
	for _, name := range slices.Sorted(maps.Keys(byAPI)) {
		routes := byAPI[name]
		conns := map[string]bool{}
		for _, r := range routes {
			conns[r.b.Spec.ConnectionRef.Name] = true
		}
		if len(conns) < 2 {
			continue
		}
		slices.SortFunc(routes, func(a, b route) int {
			return cmp.Or(cmp.Compare(b.b.Kind, a.b.Kind), // ClusterBindings first: they take precedence
				cmp.Compare(a.b.Spec.ConnectionRef.Name, b.b.Spec.ConnectionRef.Name),
				cmp.Compare(a.b.Meta.Namespace, b.b.Meta.Namespace), cmp.Compare(a.b.Meta.Name, b.b.Meta.Name))
		})
		lines := make([]string, 0, len(routes))
		for _, r := range routes {
			line := fmt.Sprintf("Connection %s: %s %s routes %s", r.b.Spec.ConnectionRef.Name, r.b.Kind,
				placeString(r.b.Meta.Namespace, r.b.Meta.Name), Routes(r.b.Kind, r.b.Meta.Namespace, r.b.Spec, r.api))
			switch reason := refusedRoute(r.b); {
			case reason != "":
				line = fmt.Sprintf("refused (%s): %s %s through Connection %s", reason, r.b.Kind, placeString(r.b.Meta.Namespace, r.b.Meta.Name), r.b.Spec.ConnectionRef.Name)
			case !isReady(r.b):
				why := "no Ready condition yet"
				if c := meta(r.b.Status.Conditions, kbindv1alpha1.ConditionReady); c != nil {
					why = "Ready=" + string(c.Status) + "/" + c.Reason
				}
				line += " (not yet: " + why + ")"
			}
			lines = append(lines, line)
		}
		out = append(out, Finding{
			Check: "api.routes", Severity: SeverityNote, Object: Object{Cluster: "consumer", Kind: "CustomResourceDefinition", Name: name},
			Problem: fmt.Sprintf("%s syncs through %d Connections: each object through the one whose binding routes its namespace (a ClusterBinding's namespaceSelector before a namespace's Binding) and, with objectSelectors, its labels; its %s annotation names it",
				name, len(conns), kbindv1alpha1.ConnectionAnnotation),
			Evidence: strings.Join(lines, "; "),
			Fix: fmt.Sprintf("%s get %s -A -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,CONNECTION:.metadata.annotations.%s'",
				cmd.Consumer, name, strings.ReplaceAll(kbindv1alpha1.ConnectionAnnotation, ".", `\.`)),
			Doc: docRoutes,
		})
	}
	return out
}

// coversNamespace: the ClusterBinding cb routes api in a namespace with
// nsLabels (nil: not read), so it takes precedence there over the
// namespace's Binding. A ClusterBinding refused as a route covers nothing;
// with a namespaceSelector and unknown labels it is not known to.
func coversNamespace(cb BindingState, api string, nsLabels labels.Set) bool {
	if refusedRoute(cb) != "" || !slices.Contains(cb.Spec.ConsumerNames(), api) {
		return false
	}
	if cb.Spec.NamespaceSelector == nil {
		return true
	}
	if nsLabels == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(cb.Spec.NamespaceSelector)
	return err == nil && sel.Matches(nsLabels)
}

// routeString says which Connection an object syncs through and which
// binding routes it there, for a finding's evidence.
func routeString(in Instance) string {
	if in.Connection == "" {
		return ""
	}
	s := "; synced through Connection " + in.Connection
	if in.Meta.Annotations[kbindv1alpha1.ConnectionAnnotation] != "" {
		s += " (its " + kbindv1alpha1.ConnectionAnnotation + " annotation)"
	}
	if b := in.Binding; b != nil {
		for _, api := range b.Spec.APIs {
			if api.ConsumerName() == in.API {
				return s + fmt.Sprintf(", routed by %s %s: %s", b.Kind, placeString(b.Meta.Namespace, b.Meta.Name), Routes(b.Kind, b.Meta.Namespace, b.Spec, api))
			}
		}
	}
	return s
}

// isReady: the binding's Ready condition is True.
func isReady(b BindingState) bool {
	c := meta(b.Status.Conditions, kbindv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}
