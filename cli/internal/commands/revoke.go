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
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

func newRevoke(e *env) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Take a consumer's access away: its ServiceAccount (and with it every token), RBAC, admission policies and the token Secrets it made",
		Long: `Delete what grant created for consumer NAME: the ServiceAccount kbind-consumer-NAME first, which
invalidates every token issued for it — the printed one and every one the konnector minted itself: new
requests are refused at once, watches already open end at the API server's watch timeout — then its
bindings and roles (the token Role among them); then, once the API server denies the consumer every
write its roles allowed, the admission policies — so that no moment leaves a right without its
confinement. Last, the service-account token Secrets in the consumer's own namespace: where it could
write Secrets (Namespace with related Secrets), those created after its ServiceAccount (each would
authenticate after revoke) are deleted; older ones, those of the same second, and every one where it
could not write Secrets may be the provider's own and are only listed, with the command to delete
them. The
provider objects the consumer synced stay (the backend reaps them once its heartbeat is stale); the
consumer's own namespace stays. The consumer's Connection then reports the refusal.`,
		Example: `  kubectl kbind revoke team-a`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.revoke(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "confine-timeout", time.Minute, "how long to wait for the API server to deny the consumer's writes before the admission policy goes")
	return cmd
}

func (e *env) revoke(ctx context.Context, name string, timeout time.Duration) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	deleted := 0
	var revoked revokedAccess
	var sweeps []tokenSweep
	err = forEachGranted(ctx, c, name, func(kind string, obj *unstructured.Unstructured) error {
		if strings.HasPrefix(kind, "ValidatingAdmissionPolicy") && !revoked.denied {
			if err := revoked.waitDenied(ctx, c, timeout); err != nil {
				return fmt.Errorf("%w; the admission policy is kept: run revoke again", err)
			}
		}
		if err := revoked.remember(kind, obj); err != nil {
			return err
		}
		if kind == "ServiceAccount" {
			// When the grant began, read before the ServiceAccount goes.
			if s, ok := sweepOf(name, obj); ok {
				sweeps = addSweep(sweeps, s)
			} else {
				fmt.Fprintf(e.err, "ServiceAccount %s does not record consumer %s's namespace (granted by an earlier kubectl-kbind): revoke cannot tell which "+
					"service-account token Secrets its grant made; look for them: kubectl get secrets -A --field-selector type=%s\n",
					client.ObjectKeyFromObject(obj), name, corev1.SecretTypeServiceAccountToken)
			}
		}
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
		}
		fmt.Fprintf(e.out, "%s %s deleted\n", kind, client.ObjectKeyFromObject(obj))
		deleted++
		return nil
	})
	if err != nil {
		if len(sweeps) > 0 {
			return fmt.Errorf("%w\nthe service-account token Secrets of the consumer's namespace were not checked: %s", err, sweepsByHand(sweeps))
		}
		return err
	}
	if deleted == 0 {
		return fmt.Errorf("nothing is granted to consumer %q on this cluster (objects labelled %s=%s)", name, access.ConsumerLabel, name)
	}
	return e.sweepTokenSecrets(ctx, c, sweeps, &revoked, timeout)
}

// sweepTokenSecrets deletes the service-account token Secrets each sweep's
// namespace got while the consumer was granted, and lists the older ones.
// It goes last, once the API server denies the consumer every write its
// roles allowed (a grant without admission policies has not waited for
// that yet), so that none can be made after it.
func (e *env) sweepTokenSecrets(ctx context.Context, c client.Client, sweeps []tokenSweep, revoked *revokedAccess, timeout time.Duration) error {
	if len(sweeps) == 0 {
		return nil
	}
	if !revoked.denied {
		if err := revoked.waitDenied(ctx, c, timeout); err != nil {
			return fmt.Errorf("%w\nthe service-account token Secrets of the consumer's namespace were not checked: %s", err, sweepsByHand(sweeps))
		}
	}
	var errs []error
	for _, s := range sweeps {
		s.wroteSecrets = s.mode == kbindv1alpha1.IsolationNamespace && revoked.mayCreate(s.namespace, "", "secrets")
		errs = append(errs, s.run(ctx, c, e.out, e.err))
	}
	return errors.Join(errs...)
}

// revokedAccess is what a revoke deleted before the admission policy: the
// users the bindings named and the writes the roles allowed them.
type revokedAccess struct {
	users  []string
	writes []authorizationv1.ResourceAttributes
	denied bool
}

func (r *revokedAccess) remember(kind string, obj *unstructured.Unstructured) error {
	switch kind {
	case "ClusterRoleBinding", "RoleBinding":
		var b rbacv1.RoleBinding // the same subjects either way
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
			return err
		}
		for _, s := range b.Subjects {
			switch s.Kind {
			case rbacv1.ServiceAccountKind:
				r.users = append(r.users, "system:serviceaccount:"+s.Namespace+":"+s.Name)
			case rbacv1.UserKind:
				r.users = append(r.users, s.Name)
			}
		}
	case "ClusterRole", "Role":
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			return err
		}
		for _, rule := range role.Rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					// serviceaccounts/token of one name: the token Role.
					res, sub, _ := strings.Cut(res, "/")
					for _, name := range names {
						r.writes = append(r.writes, authorizationv1.ResourceAttributes{Namespace: obj.GetNamespace(), Verb: "create", Group: g, Resource: res, Subresource: sub, Name: name})
					}
				}
			}
		}
	}
	return nil
}

// mayCreate reports whether the revoked roles let their users create
// group/resource in namespace ns (a ClusterRole: in every namespace).
// remember records every resource a role names (grant's rules name the
// related kinds with every verb).
func (r *revokedAccess) mayCreate(ns, group, resource string) bool {
	return slices.ContainsFunc(r.writes, func(w authorizationv1.ResourceAttributes) bool {
		return w.Group == group && w.Resource == resource && w.Subresource == "" && (w.Namespace == ns || w.Namespace == "")
	})
}

// waitDenied waits until the API server denies every remembered user every
// remembered write, confinedProbes rounds in a row (each API server
// replica's authorizer follows RBAC changes on its own): only then may the
// admission policy that confines those writes go.
func (r *revokedAccess) waitDenied(ctx context.Context, c client.Client, timeout time.Duration) error {
	still, err := inARow(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		for _, user := range r.users {
			for _, w := range r.writes {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &w}}
				if err := c.Create(ctx, sar); err != nil {
					return false, "", fmt.Errorf("asking the API server whether %s may still %s %s: %w", user, w.Verb, w.Resource, err)
				}
				if sar.Status.Allowed {
					return false, fmt.Sprintf("%s may still %s %s", user, w.Verb, w.Resource), nil
				}
			}
		}
		return true, "", nil
	})
	if errors.Is(err, errNotInARow) {
		return fmt.Errorf("after %s the API server still says %s", timeout, still)
	}
	r.denied = err == nil
	return err
}
