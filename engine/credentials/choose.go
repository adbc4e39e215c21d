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

package credentials

import (
	"time"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Renewed is a token the konnector renewed and keeps in a Secret of its
// own: its facts, and the hash of the kubeconfig it renews the credential
// of.
type Renewed struct {
	Credential Credential
	// From is the kubeconfig hash (kubeconfig.Hash) whose token was
	// renewed.
	From string
}

// Choose says which credential a Connection uses: the kubeconfig
// Secret's (user) or the renewed token. The renewed one is used only
// while it renews exactly the kubeconfig the Secret holds now (a user who
// changes the Secret — a new grant bundle, a rotation — always wins, even
// with a token that expires sooner), for the same subject, is not expired,
// and expires later than the kubeconfig's own token. Everything else —
// no renewed token, one made from an earlier kubeconfig, one of another
// subject — uses the kubeconfig's.
func Choose(kubeconfigHash string, user Credential, renewed *Renewed, now time.Time) kbindv1alpha1.CredentialSource {
	switch {
	case renewed == nil, renewed.From != kubeconfigHash, !user.Renewable(),
		renewed.Credential.Kind != kbindv1alpha1.CredentialServiceAccountToken,
		renewed.Credential.Subject != user.Subject,
		renewed.Credential.Expired(now),
		!renewed.Credential.ExpiresAt.After(user.ExpiresAt):
		return kbindv1alpha1.CredentialSourceKubeconfig
	}
	return kbindv1alpha1.CredentialSourceRenewed
}

// Expiring is whether a credential is reported as expiring at now, and
// why: Expired once it has, ExpiresSoon from its WarnAt(lead) — unless it
// renews and its renewal has not failed (a renewing token is never
// "expiring", however short its life). "" when it is not.
func Expiring(c Credential, renews, renewalFailing bool, lead time.Duration, now time.Time) kbindv1alpha1.Reason {
	switch {
	case !c.Expires():
		return ""
	case c.Expired(now):
		return kbindv1alpha1.ReasonExpired
	case renews && !renewalFailing:
		return ""
	case !now.Before(c.WarnAt(lead)):
		return kbindv1alpha1.ReasonExpiresSoon
	}
	return ""
}
