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

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/related"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/syncer"
)

// reconcileRelated copies the binding's related resources (SYNC-R), or,
// when its entries are all gone, deletes the copies it made. A binding
// forgets it had copies (status.relatedResources) only once they are gone
// on both sides; without a provider session it waits and says so.
func (r *Reconciler) reconcileRelated(ctx context.Context, b binding, before *kbindv1alpha1.BindingStatus, o *observation) error {
	if len(b.spec.RelatedResources) == 0 {
		if before.RelatedResources == nil {
			r.Related.Forget(string(b.obj.GetUID()))
			return nil // never copied anything: nothing to clean up
		}
		waiting, err := r.cleanupRelated(ctx, b)
		if err != nil {
			return fmt.Errorf("deleting related copies: %w", err)
		}
		if waiting != "" {
			if o.connProblem != "" {
				o.connProblem += "; "
			}
			o.connProblem += waiting
			return nil // status.relatedResources stays: the cleanup is retried
		}
		b.status.RelatedResources = nil
		return nil
	}
	if o.connProblem != "" || o.session == nil {
		return nil
	}
	rb := r.relatedBinding(b, o.clusterUID, o.conn)
	rb.Owners = r.relatedOwners(ctx, b, o)
	res, err := r.Related.Sync(ctx, rb, o.session)
	if err != nil {
		// Part of the pass failed. A binding that had no copies yet still
		// records that it may have some now, so that removing every entry
		// later cleans up what this pass made.
		if b.status.RelatedResources == nil {
			b.status.RelatedResources = &res.Status
		}
		return fmt.Errorf("copying related resources: %w", err)
	}
	// Entries whose informers have not listed yet are not counted: the
	// counts of the last complete pass stay until the first list re-queues
	// the binding.
	if !res.NotReadYet || b.status.RelatedResources == nil {
		b.status.RelatedResources = &res.Status
	}
	o.instanceForbidden = append(o.instanceForbidden, res.Forbidden...)
	o.relatedRefused = append(o.relatedRefused, res.Refused...)
	return nil
}

// relatedBinding is what the copier needs of the binding; conn (nil when
// it is gone) gives the isolation.
func (r *Reconciler) relatedBinding(b binding, clusterUID string, conn *kbindv1alpha1.Connection) related.Binding {
	ns := ""
	if r.Namespaced {
		ns = b.obj.GetNamespace()
	}
	var iso isolation.Mapping
	if conn != nil {
		iso = isolation.For(conn.Spec.IsolationOf())
	}
	return related.Binding{Object: b.obj, UID: string(b.obj.GetUID()), Namespace: ns, Connection: b.spec.ConnectionRef.Name,
		Entries: b.spec.RelatedResources, ClusterUID: clusterUID, Isolation: iso}
}

// cleanupRelated deletes every related copy of the binding (entries
// removed, or the binding deleting): the consumer-side ones always, the
// provider-side ones through the Connection's session. It returns why it
// must wait ("" when done): without a session the provider copies cannot
// be deleted, unless the Connection itself is gone, in which case they
// are left for the backend reaper with a Warning Event.
func (r *Reconciler) cleanupRelated(ctx context.Context, b binding) (waiting string, err error) {
	uid := string(b.obj.GetUID())
	if len(b.spec.RelatedResources) == 0 && b.status.RelatedResources == nil {
		r.Related.Forget(uid)
		return "", nil // never had related resources
	}
	name := b.spec.ConnectionRef.Name
	conn := &kbindv1alpha1.Connection{}
	connGone := false
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, conn); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("reading connection %s: %w", name, err)
		}
		connGone = true
	}
	var sess *session.Session
	if !connGone && conn.Status.LocalClusterUID != "" {
		if s, ok := r.Sessions.Get(name); ok {
			sess = s
		}
	}
	rb := r.relatedBinding(b, conn.Status.LocalClusterUID, conn)
	done, err := r.Related.Cleanup(ctx, rb, sess)
	switch {
	case errors.Is(err, related.ErrNotReadYet):
		// The copies' informers just started; their first list re-queues
		// the binding.
		return "waiting for the related copies to be listed", nil
	case refusal.IsForbidden(err):
		// A refusal is a condition and a retry: the copies stay.
		return "waiting for permission to delete related copies: " + err.Error(), nil
	case err != nil:
		return "", err
	case done:
		r.Related.Forget(uid)
		return "", nil
	case connGone:
		r.Related.Abandon(rb)
		return "", nil
	}
	return fmt.Sprintf("waiting for the provider to delete related copies (Connection %q has no provider session)", name), nil
}

// relatedOwners describes the listed APIs that reference entries read
// objects of: their kind, scope, and whether their objects can be read
// (the API is bound, its CRD installed and its syncer runs).
func (r *Reconciler) relatedOwners(ctx context.Context, b binding, o *observation) map[string]related.OwnerAPI {
	referenced := map[string]bool{}
	for _, e := range b.spec.RelatedResources {
		if e.Reference != nil {
			referenced[e.Reference.API] = true
		}
	}
	if len(referenced) == 0 {
		return nil
	}
	bound := map[string]bool{}
	for _, a := range o.bound {
		bound[a.Name] = true
	}
	out := map[string]related.OwnerAPI{}
	for _, a := range b.spec.APIs {
		if !referenced[a.Name] {
			continue
		}
		// reference.api names the entry by the provider's name; the objects
		// are the consumer API's.
		owner, consumer := related.OwnerAPI{}, a.ConsumerName()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if bound[consumer] && r.Client.Get(ctx, client.ObjectKey{Name: consumer}, crd) == nil {
			if gvk, ok := kbindschema.StorageGVK(crd); ok {
				owner.GVK = gvk
			}
			owner.Namespaced = crd.Spec.Scope == apiextensionsv1.NamespaceScoped
			owner.Ready = owner.GVK.Kind != "" && r.Syncers.Running(syncer.Route{CRD: consumer, Connection: b.spec.ConnectionRef.Name})
			// Only the objects the binding's filters select are its: with
			// one API from several providers, the others' objects (and what
			// they name) belong to other Connections.
			objects, namespaces, err := syncer.Filters(*b.spec, consumer)
			owner.Objects, owner.Namespaces = objects, namespaces
			owner.Ready = owner.Ready && err == nil
		}
		out[a.Name] = owner
	}
	return out
}
