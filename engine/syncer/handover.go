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

// Hand-over (docs/import.md#hand-over): an imported object becomes the
// consumer's, or a consumer-owned object the provider's, on request (the
// annotation core.kbind.io/hand-over, which kubectl kbind adopt and
// release set).
//
// Which side owns an object is said by the consumer object alone — the
// core.kbind.io/owner: provider annotation (the provider's) or the syncer
// finalizer (the consumer's) — and each hand-over switches one for the
// other in a single consumer write. The provider object's markers are a
// reservation around that write: stamped before an adoption (conditional
// on the very provider object the copy follows, so nothing the provider
// wrote is overwritten), removed after a release. Two writes, ordered so
// that no moment has neither or both owners.

package syncer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/ownership"
)

// Event reasons of hand-overs.
const (
	eventHandedOver      = "HandedOver"
	eventHandOverRefused = "HandOverRefused"
)

// HandOverStep is the next step of a hand-over at one key.
type HandOverStep string

const (
	// HandOverNone means no hand-over is asked for or under way.
	HandOverNone HandOverStep = "None"
	// HandOverRefuse means the hand-over cannot be done; an Event says why.
	HandOverRefuse HandOverStep = "Refuse"
	// HandOverReserve stamps this consumer object's markers on the provider
	// object, conditional on its resourceVersion (adoption, step 1).
	HandOverReserve HandOverStep = "Reserve"
	// HandOverToConsumer replaces the owner annotation of the imported copy
	// by the syncer finalizer in one write (adoption, step 2).
	HandOverToConsumer HandOverStep = "ToConsumer"
	// HandOverToProvider replaces the syncer finalizer of a consumer-owned
	// object by the owner annotation in one write (release, step 1).
	HandOverToProvider HandOverStep = "ToProvider"
	// HandOverUnreserve removes this consumer object's markers from the
	// provider object, conditional on its resourceVersion (release, step 2;
	// also an adoption withdrawn after its step 1).
	HandOverUnreserve HandOverStep = "Unreserve"
)

// HandOverState is what a hand-over's next step is decided on.
type HandOverState struct {
	// Requested is the hand-over annotation's value ("" when none).
	Requested string
	// Imported: the consumer object is an imported copy; Finalized: it
	// holds the syncer finalizer; Deleting: it is being deleted.
	Imported, Finalized, Deleting bool
	// Importing: a binding imports at the key (ImportOn).
	Importing bool
	// ProviderExists, ProviderDeleting: the provider object; Reserved: it
	// carries this consumer object's markers; MarkedByOther: another
	// consumer's or object's.
	ProviderExists, ProviderDeleting, Reserved, MarkedByOther bool
	// SelectedAfter: the binding's objectSelector selects the object as
	// the side taking it over will read it (always true without an
	// objectSelector) — for a release, the provider object's labels once
	// kbind's markers are gone (the import reads them); for an adoption,
	// the consumer object's labels (the ordinary sync reads them). Handed
	// over unselected, the object would leave the binding at once: a
	// released object read as "import off" and deleted, an adopted one
	// released and its provider object deleted (issue #51). Selector and
	// Labels say so in a refusal.
	SelectedAfter    bool
	Selector, Labels string
}

// DecideHandOver is the next step of a hand-over, with why when refused.
func DecideHandOver(s HandOverState) (HandOverStep, string) {
	switch {
	case s.Imported && s.Reserved && s.Requested == kbindv1alpha1.HandOverConsumer && s.SelectedAfter:
		return HandOverToConsumer, ""
	case s.Imported && s.Reserved:
		// Released (step 1 done), or an adoption withdrawn after step 1 —
		// or one the objectSelector stopped selecting meanwhile: unreserved,
		// then refused (adoptStep).
		return HandOverUnreserve, ""
	case s.Imported && s.Requested == kbindv1alpha1.HandOverConsumer:
		return adoptStep(s)
	case !s.Imported && s.Requested == kbindv1alpha1.HandOverProvider:
		return releaseStep(s)
	}
	return HandOverNone, ""
}

// adoptStep is the first step of an adoption, or why it cannot start.
func adoptStep(s HandOverState) (HandOverStep, string) {
	switch {
	case s.Deleting:
		return HandOverRefuse, "the object is being deleted"
	case !s.Importing:
		return HandOverRefuse, "no binding imports the provider's objects here any more"
	case !s.ProviderExists || s.ProviderDeleting:
		return HandOverRefuse, "its provider object is gone or being deleted"
	case s.MarkedByOther:
		return HandOverRefuse, "its provider object carries another consumer object's markers"
	case !s.SelectedAfter:
		return HandOverRefuse, fmt.Sprintf("the binding's objectSelector (%s) does not select this object, whose labels are {%s}: "+
			"once it is the consumer's it would leave the binding at once, and its provider object would be deleted; label it so that the selector selects it "+
			"(or list the selector's labels in the binding's spec.metadata.labels, which imported copies carry), then adopt it", s.Selector, s.Labels)
	}
	return HandOverReserve, ""
}

// releaseStep is the first step of a release, or why it cannot start.
func releaseStep(s HandOverState) (HandOverStep, string) {
	switch {
	case s.Deleting:
		return HandOverRefuse, "the object is being deleted"
	case !s.Importing:
		return HandOverRefuse, "no binding imports the provider's objects here: set providerObjects: Import on the binding's entry first"
	case !s.ProviderExists || !s.Reserved || !s.Finalized:
		return HandOverRefuse, "it has no provider copy of its own yet (wait until it is synced)"
	case s.ProviderDeleting:
		return HandOverRefuse, "its provider copy is being deleted"
	case !s.SelectedAfter:
		return HandOverRefuse, fmt.Sprintf("the binding's objectSelector (%s) does not select its provider copy, whose labels without kbind's markers are {%s}: "+
			"the import would not take it back, and this object would be deleted; list the labels the selector needs in the binding's spec.metadata.labels "+
			"so that the provider copy carries them, then release it", s.Selector, s.Labels)
	}
	return HandOverToProvider, ""
}

// release is the ordinary sync's last phase: a consumer-owned object
// asked to become the provider's (HandOverProvider) is handed over now
// that the provider copy holds its spec.
func (s *Syncer) release(ctx context.Context, o *objectSync) (outcome, error) {
	if o.cobj.GetAnnotations()[kbindv1alpha1.HandOverAnnotation] == "" {
		return next, nil
	}
	scope, _, err := s.importScope(ctx, o.key.Namespace)
	if err != nil {
		return done, err
	}
	var pobj *unstructured.Unstructured
	if o.exists {
		pobj = o.pobj
	}
	out, handled, err := s.handOver(ctx, o, scope, pobj)
	if !handled {
		return next, err
	}
	return out, err
}

// reservedFor reports whether pobj carries the markers of consumer object
// cobj (this consumer cluster, that object's UID).
func (s *Syncer) reservedFor(pobj, cobj *unstructured.Unstructured) bool {
	return pobj != nil && ownership.Classify(true, pobj.GetAnnotations(), s.target.ClusterUID, string(cobj.GetUID())) == ownership.Ours
}

// handOver runs the next step of a hand-over at a key whose consumer
// object exists; handled is false when there is none, and the sync goes on.
func (s *Syncer) handOver(ctx context.Context, o *objectSync, scope ImportScope, pobj *unstructured.Unstructured) (out outcome, handled bool, err error) {
	cobj := o.cobj
	st := HandOverState{
		Requested: cobj.GetAnnotations()[kbindv1alpha1.HandOverAnnotation],
		Imported:  isImported(cobj), Finalized: controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer),
		Deleting: !cobj.GetDeletionTimestamp().IsZero(), Importing: scope == ImportOn,
		ProviderExists: pobj != nil,
	}
	if pobj != nil {
		st.ProviderDeleting = !pobj.GetDeletionTimestamp().IsZero()
		st.Reserved = s.reservedFor(pobj, cobj)
		st.MarkedByOther = marked(pobj) && !st.Reserved
		if st.Imported {
			st.SelectedAfter, st.Selector, st.Labels = selectedAfter(o.policy, cobj, false)
		} else {
			st.SelectedAfter, st.Selector, st.Labels = selectedAfter(o.policy, pobj, true)
		}
	}
	step, why := DecideHandOver(st)
	switch step {
	case HandOverNone:
		return next, false, nil
	case HandOverRefuse:
		msg := fmt.Sprintf("%s=%s cannot be done: %s", kbindv1alpha1.HandOverAnnotation, st.Requested, why)
		if s.results.set(s.target, o.key, Result{State: StateSynced, Imported: st.Imported, Message: msg, Refused: "hand-over"}) {
			s.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventHandOverRefused, "HandOver", "%s", msg)
		}
		return done, true, nil
	case HandOverReserve:
		err = s.markProvider(ctx, o.key, cobj, true)
	case HandOverUnreserve:
		err = s.markProvider(ctx, o.key, cobj, false)
	case HandOverToConsumer:
		err = s.toConsumer(ctx, o.key)
	case HandOverToProvider:
		// Conditional on the consumer object whose spec the provider copy
		// holds now: a consumer write since then is synced up first (its
		// event syncs the key again), then handed over.
		if err = s.releaser.handOverToProvider(ctx, cobj); err == nil {
			s.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventHandedOver, "HandOver",
				"this object is the provider's now (%s: %s): its spec and status follow %s %s on the provider of Connection %q",
				kbindv1alpha1.OwnerAnnotation, kbindv1alpha1.OwnerProvider, s.target.ProviderGVK.Kind, client.ObjectKeyFromObject(pobj), s.target.Connection)
		}
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Written in between: the write's own event syncs the key again.
		return done, true, nil
	}
	if err != nil {
		return done, true, fmt.Errorf("hand-over step %s: %w", step, err)
	}
	// The step's write syncs the key again through its watch event.
	log.FromContext(ctx).Info("Hand-over step done", "step", step)
	return done, true, nil
}

// selectedAfter says whether the objectSelector of the entry covering an
// object (its policy) selects obj as the side taking the object over reads
// it: a consumer object by its labels (adoption), a provider object by its
// labels once a release has removed kbind's markers (unmarked: the import
// reads it then). It also returns the selector and the labels read, for a
// refusal's message.
func selectedAfter(policy Policy, obj *unstructured.Unstructured, unmarked bool) (ok bool, selector, read string) {
	if policy.Objects == nil {
		return true, "", ""
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetLabels(obj.GetLabels())
	if unmarked {
		unmark(u)
	}
	set := labels.Set(u.GetLabels())
	return policy.Objects.Matches(set), policy.Objects.String(), set.String()
}

// markProvider reserves (mark) or unreserves the provider object of key
// for consumer object cobj: its markers stamped or removed, conditional on
// the provider object read from the provider itself just before, retried
// at once on a conflict (a provider controller writing it all the time
// must not hold a hand-over off).
func (s *Syncer) markProvider(ctx context.Context, key types.NamespacedName, cobj *unstructured.Unstructured, mark bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pobj, exists, err := s.releaser.providerCopy(ctx, key)
		if err != nil || !exists {
			return err
		}
		reserved := s.reservedFor(pobj, cobj)
		if reserved == mark || (mark && marked(pobj)) {
			return nil // done already, or another's: decided again
		}
		u := pobj.DeepCopy()
		if mark {
			s.target.Isolation.Markers(s.target.ClusterUID, key, string(cobj.GetUID())).Stamp(u)
		} else {
			unmark(u)
		}
		return s.session.Client.Patch(ctx, u, client.MergeFromWithOptions(pobj, client.MergeFromWithOptimisticLock{}))
	})
}

// toConsumer makes the imported copy at key the consumer's, with the
// provider's latest spec (read from the provider itself), in one write
// conditional on the consumer object read just before; retried at once on
// a conflict.
func (s *Syncer) toConsumer(ctx context.Context, key types.NamespacedName) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cobj := s.newObject()
		if err := s.consumer.Get(ctx, key, cobj); err != nil {
			return err
		}
		latest, exists, err := s.releaser.providerCopy(ctx, key)
		if err != nil || !exists || !isImported(cobj) || cobj.GetAnnotations()[kbindv1alpha1.HandOverAnnotation] != kbindv1alpha1.HandOverConsumer ||
			!s.reservedFor(latest, cobj) {
			return err // decided again on what is there now
		}
		if err := s.consumer.Update(ctx, toConsumer(cobj, latest)); err != nil {
			return err
		}
		s.events.Eventf(cobj, nil, corev1.EventTypeNormal, eventHandedOver, "HandOver",
			"this object is the consumer's now: its spec goes to %s %s on the provider of Connection %q, whose changes there are reverted",
			s.target.ProviderGVK.Kind, client.ObjectKeyFromObject(latest), s.target.Connection)
		return nil
	})
}

// unmark removes kbind's copy markers (and origin, prefix, the synced
// metadata keys) from u: a released or moved copy is no longer kbind's.
func unmark(u *unstructured.Unstructured) {
	markers := kbindv1alpha1.CopyMarkers("-", "-").WithOrigin("-", "-").WithPrefix("-")
	lbl, ann := u.GetLabels(), u.GetAnnotations()
	for k := range markers.Labels {
		delete(lbl, k)
	}
	for k := range markers.Annotations {
		delete(ann, k)
	}
	delete(ann, kbindv1alpha1.SyncedMetadataAnnotation)
	u.SetLabels(lbl)
	u.SetAnnotations(ann)
}

// toConsumer is the imported copy cobj made the consumer's: the owner
// annotation, its provider resourceVersion and the request go, the syncer
// finalizer comes, with the provider's latest spec — one write.
func toConsumer(cobj, latest *unstructured.Unstructured) *unstructured.Unstructured {
	u := cobj.DeepCopy()
	if spec, ok := latest.Object["spec"]; ok {
		u.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	ann := u.GetAnnotations()
	delete(ann, kbindv1alpha1.OwnerAnnotation)
	delete(ann, ProviderResourceVersionAnnotation)
	delete(ann, kbindv1alpha1.HandOverAnnotation)
	u.SetAnnotations(ann)
	controllerutil.AddFinalizer(u, kbindv1alpha1.SyncerFinalizer)
	return u
}
