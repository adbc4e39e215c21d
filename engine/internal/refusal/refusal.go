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

// Package refusal classifies an API server's answer to a write kbind makes
// for a consumer object (a provider copy, a related copy): a refusal,
// which retrying the same write will not change — the object's owner is
// told, and the write is retried only with backoff — or a transient
// failure, retried as usual. Unreached tells, of a transient failure,
// whether no server answered at all, which may be retried sooner.
package refusal

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kbind/kbind/engine/internal/storage"
)

// Kind is what an API error says about a write.
type Kind int

const (
	// None is no refusal: a timeout, an outage, a conflict, a network
	// error, or no error at all.
	None Kind = iota
	// Forbidden is RBAC refusing the verb.
	Forbidden
	// Rejected is the object itself refused: invalid, a bad request, or
	// larger than the API server or its etcd stores (storage.TooLarge).
	Rejected
	// NotFound is something the write needs gone (the object, its
	// namespace). Whether that is a refusal is the caller's rule: the
	// syncer treats it as one, the related copier retries it.
	NotFound
)

// Of classifies err.
func Of(err error) Kind {
	switch {
	case err == nil:
		return None
	case IsForbidden(err):
		return Forbidden
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), storage.TooLarge(err):
		return Rejected
	case apierrors.IsNotFound(err):
		return NotFound
	}
	return None
}

// IsForbidden reports whether err is a refusal of the verb (RBAC, an
// admission policy or webhook): a 403 — except the one an API server
// answers while it warms up, which is no refusal at all (NotYetReady).
// Every place kbind tells a permission refusal from a transient failure
// asks this, never apierrors.IsForbidden.
func IsForbidden(err error) bool {
	return apierrors.IsForbidden(err) && !NotYetReady(err)
}

// notYetReady is what an API server's admission answers, as a 403, while
// the policies or webhooks it enforces (or its namespace lifecycle) are
// not loaded yet — right after it starts: k8s.io/apiserver
// pkg/admission/plugin/policy/generic (ValidatingAdmissionPolicies, such
// as the one kbind grant creates per consumer), plugin/webhook/generic and
// plugin/namespace/lifecycle, through admission.NewForbidden.
const notYetReady = "not yet ready to handle request"

// NotYetReady reports whether err is the 403 an API server answers while
// its admission warms up (see notYetReady): transient, retried like any
// other transient failure, never reported as a permission refusal.
func NotYetReady(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return false
	}
	return strings.HasSuffix(status.Status().Message, ": "+notYetReady)
}

// Unreached reports whether a request failed before any API server could
// answer it: the connection was refused, reset, or closed under it (an
// API server stopping or not yet listening). Retrying soon costs the
// server little, and the write succeeds as soon as the server is back. A
// refused connection asked nothing of the server; a reset or closed one
// may have come after the request reached it, so a write that failed so
// may still be committed (the syncer's writes in doubt, syncer/doubt.go).
// A timeout is not unreached — the server may be there and busy — nor is
// any answer with a status.
func Unreached(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
}
