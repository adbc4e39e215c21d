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
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

// confinedProbes is how many probes in a row the admission policy must
// refuse: with several API server replicas behind one address, each
// caches policies on its own, and consecutive requests may reach
// different ones.
const confinedProbes = 5

// probeAudience is the audience of the token grant's probe asks for as
// the consumer: no API server's, so a token minted by mistake opens
// nothing.
const probeAudience = "kbind.io/grant-probe"

// confined waits until the admission policies of a grant refuse, to the
// consumer's own token, a request each exists to refuse — confinedProbes
// rounds in a row — so that no token is handed out while a right is in
// force and the policy confining it is not yet (the API server loads
// policies asynchronously):
//
//   - Prefixed and None: a dry-run namespace write outside the tenant
//     (nothing is written);
//   - Namespace with related Secrets: a dry-run service-account token
//     Secret in the consumer's namespace, which the Secrets policy
//     refuses (until the Secrets Role is in force RBAC refuses it, which
//     confirms nothing);
//   - token renewal: minting a token for the consumer's own ServiceAccount
//     with a foreign audience. TokenRequest ignores dryRun, so this is a
//     real create: refused, it mints nothing. Until the policy is loaded
//     it is allowed (RBAC follows a new Role faster than the API server
//     loads a new policy): the token minted then is for an audience no
//     API server accepts, lives 10 minutes, and is dropped unseen — and
//     the round counts as unconfirmed. Only grant holds a token of the
//     ServiceAccount by then (see docs/isolation.md for a grant that
//     upgrades one made before token renewal).
//
// It fails after timeout, saying what the API server last answered.
func confined(ctx context.Context, cfg *rest.Config, token string, req access.Request, timeout time.Duration) error {
	probeCfg := rest.AnonymousClientConfig(cfg)
	probeCfg.BearerToken = token
	probeCfg.UserAgent = "kubectl-kbind"
	cs, err := kubernetes.NewForConfig(probeCfg)
	if err != nil {
		return err
	}
	var probes []func(context.Context) (bool, string, error)
	if req.Isolation.Mode != kbindv1alpha1.IsolationNamespace {
		probes = append(probes, writeProbe(cs, req))
	}
	if req.HasSecretsPolicy() {
		probes = append(probes, tokenSecretProbe(cs, req))
	}
	if req.TokenRenewal != nil {
		probes = append(probes, tokenProbe(cs, req))
	}
	last, err := inARow(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		for _, probe := range probes {
			if ok, why, err := probe(ctx); err != nil || !ok {
				return ok, why, err
			}
		}
		return true, "", nil
	})
	if errors.Is(err, errNotInARow) {
		return fmt.Errorf("the admission policies of consumer %s are not in force after %s: %s "+
			"(does this provider serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies?)", req.Consumer, timeout, last)
	}
	return err
}

// writeProbe: the write policy of a Prefixed or None grant refuses a
// dry-run namespace it exists to refuse.
func writeProbe(cs kubernetes.Interface, req access.Request) func(context.Context) (bool, string, error) {
	ns := probeNamespace(req)
	policy := fmt.Sprintf("ValidatingAdmissionPolicy '%s'", access.Name(req.Consumer))
	return func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			return false, fmt.Sprintf("policy %s let a dry-run write it must refuse, made with the new token, through", access.Name(req.Consumer)), nil
		case strings.Contains(err.Error(), policy):
			return true, "", nil
		}
		return false, fmt.Sprintf("a dry-run write policy %s must refuse, made with the new token, got: %v", access.Name(req.Consumer), err), nil
	}
}

// tokenSecretProbe: the Secrets policy of a Namespace grant with related
// Secrets refuses a dry-run service-account token Secret in the
// consumer's namespace (nothing is written).
func tokenSecretProbe(cs kubernetes.Interface, req access.Request) func(context.Context) (bool, string, error) {
	name := access.Name(req.Consumer)
	policy := fmt.Sprintf("ValidatingAdmissionPolicy '%s'", name)
	return func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Secrets(req.Namespace()).Create(ctx, probeTokenSecret(req.Namespace()), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			return false, fmt.Sprintf("policy %s let a dry-run service-account token Secret in namespace %s, made with the new token, through", name, req.Namespace()), nil
		case strings.Contains(err.Error(), policy):
			return true, "", nil
		}
		return false, fmt.Sprintf("a dry-run service-account token Secret in namespace %s, which policy %s must refuse, made with the new token, got: %v", req.Namespace(), name, err), nil
	}
}

// probeTokenSecret is a service-account token Secret for the namespace's
// default ServiceAccount: what a tenant would make to mint a token that
// outlives its grant.
func probeTokenSecret(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kbind-grant-probe", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type: corev1.SecretTypeServiceAccountToken}
}

// tokenProbe: the token policy refuses the consumer a token for a foreign
// audience (once its Role lets it mint at all: until then RBAC refuses).
func tokenProbe(cs kubernetes.Interface, req access.Request) func(context.Context) (bool, string, error) {
	name, policy := access.Name(req.Consumer), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", access.TokenName(req.Consumer))
	return func(ctx context.Context) (bool, string, error) {
		seconds := int64(access.MinTokenLifetime.Seconds())
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{probeAudience}, ExpirationSeconds: &seconds}}
		_, err := cs.CoreV1().ServiceAccounts(req.ServiceAccountNamespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		switch {
		case err == nil:
			// Not in force yet; the token, for audience kbind.io/grant-probe,
			// opens nothing and is dropped unseen.
			return false, fmt.Sprintf("policy %s let the new token mint a token for audience %s, which it must refuse (that token was dropped: no API server accepts its audience)",
				access.TokenName(req.Consumer), probeAudience), nil
		case strings.Contains(err.Error(), policy):
			return true, "", nil
		}
		return false, fmt.Sprintf("minting a token for a foreign audience, which policy %s must refuse, with the new token got: %v", access.TokenName(req.Consumer), err), nil
	}
}

// errNotInARow is inARow's timeout.
var errNotInARow = errors.New("not confirmed in a row before the timeout")

// inARow polls probe until it confirms confinedProbes times in a row (each
// API server replica caches policies and RBAC on its own, and consecutive
// requests may reach different ones), or timeout passes: then it returns
// errNotInARow and what the last unconfirmed probe said. A probe error
// ends the wait.
func inARow(ctx context.Context, timeout time.Duration, probe func(context.Context) (confirmed bool, why string, err error)) (string, error) {
	confirmations := 0
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		confirmed, why, err := probe(ctx)
		if err != nil || !confirmed {
			confirmations, last = 0, why
			return false, err
		}
		confirmations++
		return confirmations >= confinedProbes, nil
	})
	if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
		return last, errNotInARow
	}
	return last, err
}

// probeNamespace is a namespace the policy refuses to let the consumer
// create: under Prefixed one outside its prefix (no prefix may cover
// "kbind-"), under None one labelled for a Prefixed consumer.
func probeNamespace(req access.Request) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kbind-grant-probe"}}
	if req.Isolation.Mode == kbindv1alpha1.IsolationNone {
		ns.Labels = map[string]string{kbindv1alpha1.PrefixLabel: "kbind-grant-probe"}
	}
	return ns
}
