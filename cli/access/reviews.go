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

package access

import (
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Reviews expands the RBAC of Objects into one access review per verb,
// resource and namespace ("" cluster-wide): what a doctor asks the
// provider, as the consumer's identity, to name a missing permission
// precisely. Admission policies are not reviewed (they only narrow writes).
func (r Request) Reviews() []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, o := range r.Objects() {
		var ns string
		var rules []rbacv1.PolicyRule
		switch role := o.(type) {
		case *rbacv1.Role:
			ns, rules = role.Namespace, role.Rules
		case *rbacv1.ClusterRole:
			rules = role.Rules
		default:
			continue
		}
		for _, rule := range rules {
			out = append(out, expand(rule, ns)...)
		}
	}
	return out
}

func expand(rule rbacv1.PolicyRule, ns string) []authorizationv1.ResourceAttributes {
	names := rule.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	var out []authorizationv1.ResourceAttributes
	for _, g := range rule.APIGroups {
		for _, res := range rule.Resources {
			// A review names a subresource apart: serviceaccounts, token.
			res, sub, _ := strings.Cut(res, "/")
			for _, verb := range rule.Verbs {
				for _, name := range names {
					out = append(out, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: g, Resource: res, Subresource: sub, Name: name})
				}
			}
		}
	}
	return out
}
