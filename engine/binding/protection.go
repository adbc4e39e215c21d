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

package binding

// This file is deletion protection (BIND-4, issue #54,
// docs/bindings.md#deletion-protection): a binding being deleted whose
// spec.deletionProtection is true is held by the konnector's cleanup
// finalizer — nothing drained, no provider copy or related copy deleted, no
// consumer CRD deleted, nothing forgotten — and keeps syncing as before
// (syncer.Claiming) while the operator decides; Ready says
// DeletionProtected, what its deletion would take and the way forward.
// Turning protection off (a spec change: the binding's update event) lets
// the deletion proceed exactly as without protection. It also decides
// status.boundAPIs[].unbindDeletesCRD, which the chart's policy and
// kubectl kbind unbind quote.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/admission"
	"github.com/kbind/kbind/engine/internal/patch"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

// holdInput is what the hold decision needs of a binding.
type holdInput struct {
	// Deleting: the binding has a deletionTimestamp.
	Deleting bool
	// Protected: its spec.deletionProtection is true.
	Protected bool
	// Finalizer: it still carries the konnector's cleanup finalizer (the
	// only thing the konnector holds it with).
	Finalizer bool
	// NamespaceDeleting: a Binding whose namespace is being deleted — the
	// namespace controller's delete, which protection does not cover: the
	// namespace's objects go whatever the Binding does, and holding it
	// would only keep the namespace Terminating.
	NamespaceDeleting bool
}

// holdDeletion decides whether the konnector holds a binding's deletion.
func holdDeletion(in holdInput) bool {
	return in.Deleting && in.Protected && in.Finalizer && !in.NamespaceDeleting
}

// crdFateOf reads, from the cache, what kbindschema.UnbindDeletesCRD needs for api of
// ClusterBinding b; crd is the consumer CRD (nil when there is none).
func (r *Reconciler) crdFateOf(ctx context.Context, b binding, api string) (f kbindschema.UnbindFate, crd *apiextensionsv1.CustomResourceDefinition, err error) {
	conn := &kbindv1alpha1.Connection{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: b.spec.ConnectionRef.Name}, conn); {
	case apierrors.IsNotFound(err):
		return f, nil, nil
	case err != nil:
		return f, nil, fmt.Errorf("reading connection %s: %w", b.spec.ConnectionRef.Name, err)
	}
	f.Connection, f.PullPolicy = true, conn.Spec.Schema.PullPolicy
	if f.OtherBindings, err = r.otherBindingsOf(ctx, api, b.obj, ""); err != nil {
		return f, nil, err
	}
	crd = &apiextensionsv1.CustomResourceDefinition{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: api}, crd); {
	case apierrors.IsNotFound(err):
		return f, nil, nil
	case err != nil:
		return f, nil, fmt.Errorf("reading consumer CRD %s: %w", api, err)
	}
	f.CRD, f.CreatedForConnection, f.CRDDeleting = true, kbindschema.CreatedByKbind(crd, conn.Name), !crd.DeletionTimestamp.IsZero()
	return f, crd, nil
}

// markUnbindDeletesCRD sets unbindDeletesCRD on every entry of a
// ClusterBinding's bound APIs, from the cache (the Connection, the
// consumer CRD and the BindingAPI index): no API request. A read that
// fails leaves the entry false and is returned.
func (r *Reconciler) markUnbindDeletesCRD(ctx context.Context, b binding, bound []kbindv1alpha1.BoundAPI) error {
	if r.Namespaced {
		return nil // a Binding never deletes a consumer CRD
	}
	for i := range bound {
		f, _, err := r.crdFateOf(ctx, b, bound[i].Name)
		if err != nil {
			return err
		}
		bound[i].UnbindDeletesCRD = kbindschema.UnbindDeletesCRD(f)
	}
	return nil
}

// holds reads what the hold decision needs (a Binding's namespace, from
// the metadata cache) and decides.
func (r *Reconciler) holds(ctx context.Context, b binding) (bool, error) {
	in := holdInput{
		Deleting:  !b.obj.GetDeletionTimestamp().IsZero(),
		Protected: b.spec.DeletionProtection,
		Finalizer: controllerutil.ContainsFinalizer(b.obj, kbindv1alpha1.CleanupFinalizer),
	}
	if r.Namespaced && holdDeletion(in) {
		ns := admission.NamespaceMetadata()
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: b.obj.GetNamespace()}, ns); {
		case apierrors.IsNotFound(err):
			in.NamespaceDeleting = true
		case err != nil:
			return false, fmt.Errorf("reading namespace %s: %w", b.obj.GetNamespace(), err)
		default:
			in.NamespaceDeleting = !ns.DeletionTimestamp.IsZero()
		}
	}
	return holdDeletion(in), nil
}

// heldMessage is Ready's message on a held binding of kind (ClusterBinding
// or Binding): what its deletion would take, from its status — each bound
// API's objects (status.boundAPIs[].instances) and their provider copies
// under policy, the consumer CRD when unbindDeletesCRD, its related
// copies — and the way forward. failed is a reconcile failure to report
// too ("" for none).
func heldMessage(kind string, listed []string, status *kbindv1alpha1.BindingStatus, policy kbindv1alpha1.DeletionPolicy, failed string) string {
	var would []string
	copies := "their provider copies are deleted"
	switch policy {
	case kbindv1alpha1.DeletionPolicyOrphan:
		copies = "their provider copies are kept"
	case kbindv1alpha1.DeletionPolicyForeground:
		copies = "their provider copies are deleted in the foreground"
	}
	policy = policyOrDefault(policy)
	counted := map[string]bool{}
	for _, a := range status.BoundAPIs {
		counted[a.Name] = true
	}
	for _, name := range listed {
		if !counted[name] {
			// Not bound now (its Connection not usable, the API not
			// exported …): its objects are not counted, and still drained.
			would = append(would, fmt.Sprintf("release the objects of %s (not counted now; deletionPolicy %s: %s)", name, policyOrDefault(policy), copies))
		}
	}
	for _, a := range status.BoundAPIs {
		objects := "its objects (not counted yet)"
		if a.Instances != nil {
			objects = fmt.Sprintf("%d object(s)", a.Instances.Total)
		}
		what := fmt.Sprintf("release %s of %s (deletionPolicy %s: %s, unless an object's annotation says otherwise)", objects, a.Name, policy, copies)
		if a.UnbindDeletesCRD {
			what += fmt.Sprintf(", then delete the consumer CRD %s with every object of it", a.Name)
		}
		would = append(would, what)
	}
	if rel := status.RelatedResources; rel != nil && rel.Copies > 0 {
		would = append(would, fmt.Sprintf("delete its %d related cop(ies)", rel.Copies))
	}
	msg := fmt.Sprintf("deletion held: spec.deletionProtection is true, so nothing is drained or deleted and the %s keeps syncing as before", kind)
	if len(would) > 0 {
		msg += "; its deletion would " + strings.Join(would, "; ")
	}
	if failed != "" {
		msg += "; " + failed
	}
	return msg + fmt.Sprintf("; set spec.deletionProtection to false to let the deletion proceed (a Terminating %s cannot be revived)", kind)
}

// policyOrDefault is the deletion policy a binding's spec.deletionPolicy
// means: Delete when unset.
func policyOrDefault(policy kbindv1alpha1.DeletionPolicy) kbindv1alpha1.DeletionPolicy {
	if policy == "" {
		return kbindv1alpha1.DeletionPolicyDelete
	}
	return policy
}

// heldReady sets Ready=False/DeletionProtected on a held binding.
func heldReady(b binding, failed error) {
	why := ""
	if failed != nil {
		why = "reconciling failed, retrying with backoff: " + failed.Error()
	}
	patch.SetCondition(&b.status.Conditions, metav1.Condition{
		Type: string(kbindv1alpha1.ConditionReady), Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonDeletionProtected),
		Message: heldMessage(b.obj.BindingKind(), b.spec.ConsumerNames(), b.status, b.spec.DeletionPolicy, why),
	}, b.obj.GetGeneration())
}

// heldBefore reports whether status already said the deletion is held.
func heldBefore(status *kbindv1alpha1.BindingStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, string(kbindv1alpha1.ConditionReady))
	return c != nil && c.Reason == string(kbindv1alpha1.ReasonDeletionProtected)
}

// announceHeld records the Warning Event of a binding whose deletion is
// now held: once, when Ready turns DeletionProtected, not at every resync.
func (r *Reconciler) announceHeld(b binding) {
	if r.Events == nil {
		return
	}
	c := meta.FindStatusCondition(b.status.Conditions, string(kbindv1alpha1.ConditionReady))
	if c == nil {
		return
	}
	r.Events.Eventf(b.obj, nil, corev1.EventTypeWarning, string(kbindv1alpha1.ReasonDeletionProtected), "Delete", "%s", c.Message)
}
