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
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/routing"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Refusals decides which live bindings of the consumer API api are refused
// because an earlier binding through another Connection could claim the
// same objects (docs/bindings.md#one-api-several-providers): the result
// maps each refused binding's key (routingKey) to the earlier one's
// description. A binding whose entry for the API does not serve its
// consumer CRD crd (a projection collision, refused on its own; crd nil:
// not installed yet) claims nothing, and nor does a deleting one whose
// deletion is not held (Claiming).
func Refusals(api string, crd *apiextensionsv1.CustomResourceDefinition, bindings []kbindv1alpha1.BindingObject) map[routing.ClaimKey]string {
	var claims []routing.Claim
	for _, b := range bindings {
		entry, ok := b.BindingSpec().APIFor(api)
		if !ok || !Claiming(b) || (crd != nil && !kbindschema.Serves(entry, crd)) {
			continue
		}
		claims = append(claims, claimOf(b, entry))
	}
	out := map[routing.ClaimKey]string{}
	for key, earlier := range routing.Refusals(claims) {
		out[key] = earlier.String() + " (Connection " + earlier.Connection + ")"
	}
	return out
}

// Claiming reports whether binding b claims the objects it selects: it is
// not being deleted, or its deletion is held because its
// spec.deletionProtection is true (docs/bindings.md#deletion-protection):
// a held binding syncs as before, nothing of it is released, until
// protection is turned off and its deletion proceeds. A deleting binding
// otherwise drains and claims nothing.
func Claiming(b kbindv1alpha1.BindingObject) bool {
	return b.GetDeletionTimestamp().IsZero() || b.BindingSpec().DeletionProtection
}

// RoutingKey is the key of a binding among the claims of Refusals.
func RoutingKey(b kbindv1alpha1.BindingObject) routing.ClaimKey {
	if b.GetNamespace() != "" {
		return routing.ClaimKey{Kind: routing.KindBinding, Namespace: b.GetNamespace(), Name: b.GetName()}
	}
	return routing.ClaimKey{Kind: routing.KindClusterBinding, Name: b.GetName()}
}

func claimOf(b kbindv1alpha1.BindingObject, entry kbindv1alpha1.APIReference) routing.Claim {
	key := RoutingKey(b)
	c := routing.Claim{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name,
		Connection: b.BindingSpec().ConnectionRef.Name, Created: b.GetCreationTimestamp().Time, ObjectSelector: entry.ObjectSelector}
	if key.Kind == routing.KindClusterBinding {
		c.NamespaceSelector = b.BindingSpec().NamespaceSelector
	}
	return c
}

// CoversNamespace reports whether a ClusterBinding with spec covers
// namespace for precedence over the Bindings there (BIND-2): its
// namespaceSelector selects the namespace's labels (read from c), or it
// has none — or one that does not parse, which claims everything it
// might.
func CoversNamespace(ctx context.Context, c client.Reader, spec *kbindv1alpha1.BindingSpec, namespace string) (bool, error) {
	return coveredByClusterBinding(ctx, c, []labels.Selector{coverage(*spec)}, namespace)
}
