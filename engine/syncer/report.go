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

// This file holds what a Syncer, and a drain, report per consumer object
// — the Results the bindings count and the Warning Events on consumer
// objects — when the provider refuses a write or an object has no
// provider place.

package syncer

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/internal/storage"
)

// Event reasons on consumer objects (beyond the condition reasons).
const (
	eventProviderRejected = "ProviderRejected"
	eventMutationFailed   = "MutationFailed"
	// eventObjectTooLarge: the consumer object is too large for the
	// consumer's storage to take kbind's finalizer and route annotation;
	// nothing is written to the provider for it.
	eventObjectTooLarge = "ObjectTooLarge"
	eventSynced         = "Synced"
	// eventInvalidDeletionPolicy: a deleting object's deletion-policy
	// annotation names no policy; its provider copy is kept.
	eventInvalidDeletionPolicy = "InvalidDeletionPolicy"
	// eventCopiesKept: an object its protected binding no longer syncs
	// was released and its provider copy kept (BIND-5), once per release.
	eventCopiesKept = "CopiesKept"
)

// reporter is one synced API (its Target) and where the outcome of each of
// its consumer objects is reported: the Results the bindings count and
// the Events on the consumer objects. The Syncer and its releaser share
// it; it is a value, never changed once built.
type reporter struct {
	target  Target
	results *Results
	events  recorder.EventRecorder
}

// newObject returns an empty object of the consumer API.
func (rp reporter) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rp.target.GVK)
	return u
}

// newProviderObject returns an empty object of the provider API (another
// group and kind when the API is projected).
func (rp reporter) newProviderObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rp.target.ProviderGVK)
	return u
}

// failed records a provider refusal: a Warning Event on the consumer object
// with the provider's message, the failed count, and a retry with backoff
// (never a hot loop). A refusal is any refusal.Kind, NotFound included (a
// namespace or object gone under the write); anything else is returned as
// a transient error.
func (rp reporter) failed(cobj *unstructured.Unstructured, err error, verb, resource string) (outcome, error) {
	kind := refusal.Of(err)
	if kind == refusal.None {
		return done, fmt.Errorf("%s %s on the provider: %w", verb, resource, err)
	}
	res := Result{State: StateFailed, Message: fmt.Sprintf("the provider refused %s %s: %v", verb, resource, err)}
	if storage.TooLarge(err) {
		res.Message += " (the provider copy, with kbind's ownership markers, is larger than the provider stores; make the object smaller)"
	}
	if kind == refusal.Forbidden {
		res.Forbidden = rp.refusal(verb, resource, rp.providerNamespace(cobj))
	}
	if rp.results.set(rp.target, client.ObjectKeyFromObject(cobj), res) {
		rp.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventProviderRejected, "Sync", "%s", res.Message)
	}
	return requeue, nil
}

// refusal names what the provider refused, without the object's name: the
// binding counts objects per refusal ("apply Widget in namespace team-a",
// the provider namespace), so its condition stays short however many
// objects are refused.
func (rp reporter) refusal(verb, resource, ns string) string {
	if strings.HasPrefix(resource, "namespaces/") {
		return verb + " " + resource
	}
	if ns != "" {
		return fmt.Sprintf("%s %s in namespace %s", verb, rp.target.ProviderGVK.Kind, ns)
	}
	return verb + " " + rp.target.ProviderGVK.Kind
}

// providerNamespace is the provider namespace of a consumer object's copy
// ("" when cluster-scoped or unplaceable).
func (rp reporter) providerNamespace(cobj *unstructured.Unstructured) string {
	pkey, err := rp.target.Isolation.Object(client.ObjectKeyFromObject(cobj))
	if err != nil {
		return ""
	}
	return pkey.Namespace
}

// mutationFailed records a mutation rule failing on one consumer object (a
// runtime error: no such field, a type error, the cost budget): failed,
// with a Warning Event naming the rule and its path; nothing is written.
func (rp reporter) mutationFailed(cobj *unstructured.Unstructured, err error) {
	res := Result{State: StateFailed, Message: fmt.Sprintf("not synced: %v", err)}
	if rp.results.set(rp.target, client.ObjectKeyFromObject(cobj), res) {
		rp.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventMutationFailed, "Sync", "%s", res.Message)
	}
}

// tooLarge records a consumer object the consumer's storage refused to
// store with kbind's finalizer and route annotation (it was accepted
// without them, a few bytes under the limit): failed, with a Warning Event
// once, retried with backoff; nothing is written to the provider, so
// nothing can be lost there.
func (rp reporter) tooLarge(cobj *unstructured.Unstructured, err error) (outcome, error) {
	res := Result{State: StateFailed, Message: fmt.Sprintf("not synced: the consumer refused to store the object with kbind's finalizer and annotation (%v); make the object smaller", err)}
	if rp.results.set(rp.target, client.ObjectKeyFromObject(cobj), res) {
		rp.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventObjectTooLarge, "Sync", "%s", res.Message)
	}
	return requeue, nil
}

// unplaceable records a consumer object the Connection's isolation has no
// provider place for (a cluster-scoped object under Namespace isolation):
// failed, with a Warning Event once; nothing is written anywhere.
func (rp reporter) unplaceable(cobj *unstructured.Unstructured, err error) {
	res := Result{State: StateFailed, Message: fmt.Sprintf("not synced: %v under %s; bind this API through a Connection without Namespace isolation", err, rp.target.Isolation)}
	if rp.results.set(rp.target, client.ObjectKeyFromObject(cobj), res) {
		rp.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventProviderRejected, "Sync", "%s", res.Message)
	}
}
