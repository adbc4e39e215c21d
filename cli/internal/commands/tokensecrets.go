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

package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

// A service-account token Secret is a credential of its own: the cluster's
// token controller fills it with a token of the ServiceAccount it names,
// valid until the Secret is deleted. A consumer that may write Secrets in
// its namespace could make one (the Secrets policy refuses that from
// grant on; a grant made before that policy, or the moment before it was
// loaded, did not), and deleting the consumer's ServiceAccount does not
// invalidate it. So revoke sweeps the consumer's namespace for them, last.

// tokenSweep is what revoke reads of a grant's ServiceAccount before it
// deletes it: the consumer's own namespace, and when the grant began; and
// of the roles it deletes: whether they let the consumer write Secrets
// there.
type tokenSweep struct {
	consumer  string
	namespace string
	mode      kbindv1alpha1.IsolationMode
	granted   metav1.Time
	// wroteSecrets: the consumer could make a token Secret there — its
	// revoked roles let it create Secrets in the namespace, under
	// Namespace isolation (the Prefixed and None writes policies always
	// refused token Secrets). Without that, none there is its doing.
	wroteSecrets bool
}

// sweepOf is the sweep for a grant's ServiceAccount; false when it does
// not record the consumer's namespace (granted by an earlier
// kubectl-kbind).
func sweepOf(consumer string, sa *unstructured.Unstructured) (tokenSweep, bool) {
	ann := sa.GetAnnotations()
	ns := ann[access.NamespaceAnnotation]
	return tokenSweep{consumer: consumer, namespace: ns, mode: kbindv1alpha1.IsolationMode(ann[access.IsolationModeAnnotation]), granted: sa.GetCreationTimestamp()}, ns != ""
}

// addSweep adds s to sweeps, one per namespace: with two ServiceAccounts
// recording one namespace (a grant that moved its ServiceAccount), the
// earlier one's time — every Secret after it was made while this consumer
// was granted.
func addSweep(sweeps []tokenSweep, s tokenSweep) []tokenSweep {
	for i := range sweeps {
		if sweeps[i].namespace == s.namespace {
			if s.granted.Before(&sweeps[i].granted) {
				sweeps[i].granted = s.granted
			}
			return sweeps
		}
	}
	return append(sweeps, s)
}

// splitTokenSecrets sorts the service-account token Secrets of a
// consumer's namespace into those revoke deletes and those it only lists.
// It deletes one only when the consumer could write Secrets there
// (wroteSecrets) and it was created after the grant's ServiceAccount:
// made while the consumer was granted, by it (before the Secrets policy
// existed or was loaded) or for it. It lists the others: older ones, or
// of the same second — creation timestamps have a resolution of one
// second, so a Secret of that second is not provably the grant's — may be
// the provider's own, in a namespace the admin labelled for the consumer.
// A consumer hardly makes one in that second: grant prints its token
// only after its confinement probes, and from then on the Secrets policy
// refuses it.
func splitTokenSecrets(secrets []metav1.PartialObjectMetadata, granted metav1.Time, wroteSecrets bool) (after, before []metav1.PartialObjectMetadata) {
	for _, s := range secrets {
		if wroteSecrets && s.CreationTimestamp.Truncate(time.Second).After(granted.Truncate(time.Second)) {
			after = append(after, s)
		} else {
			before = append(before, s)
		}
	}
	byName := func(l []metav1.PartialObjectMetadata) {
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	}
	byName(after)
	byName(before)
	return after, before
}

// listTokenSecrets lists the service-account token Secrets of namespace ns
// (metadata only: their tokens never reach revoke). A failed list is an
// error that says so, never "none".
func listTokenSecrets(ctx context.Context, c client.Client, ns string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{"type": string(corev1.SecretTypeServiceAccountToken)}); err != nil {
		return nil, fmt.Errorf("listing the service-account token Secrets of namespace %s: %w", ns, err)
	}
	return list.Items, nil
}

// deleteTokenSecret deletes s, listed before, only if it is still that
// very object (a UID precondition): a Secret made in its place since is
// not one revoke judged. Gone already is fine.
func deleteTokenSecret(ctx context.Context, c client.Client, s metav1.PartialObjectMetadata) error {
	obj := s.DeepCopy()
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	uid := s.UID
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("service-account token Secret %s/%s was replaced since revoke listed it (UID %s): not deleted; check it: kubectl -n %s get secret %s",
			s.Namespace, s.Name, s.UID, s.Namespace, s.Name)
	}
	return fmt.Errorf("deleting service-account token Secret %s/%s: %w", s.Namespace, s.Name, err)
}

// run deletes the token Secrets of the sweep's namespace created after
// the grant, printing each on out, and lists the others on notes with the
// command to delete them.
func (s tokenSweep) run(ctx context.Context, c client.Client, out, notes io.Writer) error {
	secrets, err := listTokenSecrets(ctx, c, s.namespace)
	if err != nil {
		return fmt.Errorf("%w; none of them was deleted: %s", err, s.byHand())
	}
	after, before := splitTokenSecrets(secrets, s.granted, s.wroteSecrets)
	var errs []error
	for _, secret := range after {
		if err := deleteTokenSecret(ctx, c, secret); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "Secret %s/%s deleted (a service-account token Secret created after consumer %s was granted)\n", secret.Namespace, secret.Name, s.consumer)
	}
	switch {
	case len(before) > 0 && s.wroteSecrets:
		fmt.Fprintf(notes, "namespace %s holds service-account token Secrets created before consumer %s was granted (%s) or in that second: "+
			"revoke leaves them, as they may be the provider's own; each still authenticates as its ServiceAccount. Delete those that are not yours:\n",
			s.namespace, s.consumer, s.granted.UTC().Format(time.RFC3339))
	case len(before) > 0:
		fmt.Fprintf(notes, "namespace %s holds service-account token Secrets; consumer %s could not write Secrets there under the grant revoke deleted, "+
			"so revoke leaves them, as they may be the provider's own; each still authenticates as its ServiceAccount. Delete those that are not yours:\n",
			s.namespace, s.consumer)
	}
	if len(before) > 0 {
		for _, secret := range before {
			fmt.Fprintf(notes, "  kubectl -n %s delete secret %s   # created %s, for ServiceAccount %s\n", secret.Namespace, secret.Name,
				secret.CreationTimestamp.UTC().Format(time.RFC3339), cmp.Or(secret.Annotations[corev1.ServiceAccountNameKey], "?"))
		}
	}
	return errors.Join(errs...)
}

// byHand says how to finish the sweep without revoke.
func (s tokenSweep) byHand() string {
	return fmt.Sprintf("list them with `kubectl -n %s get secrets --field-selector type=%s` and delete those created after %s (consumer %s's grant)",
		s.namespace, corev1.SecretTypeServiceAccountToken, s.granted.UTC().Format(time.RFC3339), s.consumer)
}

// sweepsByHand says how to finish every sweep without revoke.
func sweepsByHand(sweeps []tokenSweep) string {
	var parts []string
	for _, s := range sweeps {
		parts = append(parts, s.byHand())
	}
	return strings.Join(parts, "; ")
}
