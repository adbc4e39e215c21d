package syncer

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/internal/storage"
	"github.com/kbind/kbind/engine/ownership"
)

// Event reasons on consumer objects (beyond the condition reasons).
const (
	eventProviderRejected = "ProviderRejected"
	eventSynced           = "Synced"
)

// sync reconciles one consumer object with its provider copy; seen are
// when the changes it handles were observed (the writes it makes observe
// their end-to-end latency). It returns requeue=true to retry with backoff
// without logging an error.
func (s *Syncer) sync(ctx context.Context, key types.NamespacedName, seen *changes) (bool, error) {
	cobj := s.newObject()
	if err := s.ccache.Get(ctx, key, cobj); err != nil {
		if apierrors.IsNotFound(err) {
			s.results.forget(s.target, key)
			s.deletions.forget(key)
			return false, nil
		}
		return false, fmt.Errorf("reading consumer object: %w", err)
	}
	policy, inScope := s.currentScope().covers(key.Namespace)
	if !inScope {
		s.results.forget(s.target, key)
		return false, nil
	}
	pkey, err := s.target.Isolation.Object(key)
	if err != nil {
		// Never written somewhere surprising: the binding says the same.
		s.unplaceable(cobj, err)
		return false, nil
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	if err != nil {
		return false, err
	}
	if !cobj.GetDeletionTimestamp().IsZero() {
		if done, err := s.releaseOrphaned(ctx, cobj, policy); err != nil || !done {
			return !done && err == nil, err
		}
		cached := exists
		if confirmAbsence(exists, controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer), s.deletions.seen(key)) {
			// SYNC-D: the cache may lag the provider (a copy applied a
			// moment ago; a watch re-listing after an outage or a
			// compaction): the finalizer goes only once the provider
			// itself has no copy.
			if pobj, exists, err = s.providerCopy(ctx, key); err != nil {
				return false, err
			}
		}
		requeue, err := s.release(ctx, cobj, pobj, exists)
		// A copy the cache has not seen may go without an event: look again.
		return requeue || (exists && !cached && err == nil), err
	}
	if !controllerutil.ContainsFinalizer(cobj, kbindv1alpha1.SyncerFinalizer) {
		// Before the first provider write (SYNC-D); the update event brings
		// the object back.
		if err := patch.AddFinalizer(ctx, s.consumer, cobj, kbindv1alpha1.SyncerFinalizer); err != nil {
			if isConflictOrGone(err) {
				return true, nil
			}
			return false, err
		}
		// Go on with the patched object: no round trip through the informer
		// before the first provider write.
	}

	if exists && !pobj.GetDeletionTimestamp().IsZero() {
		// SYNC-5: a terminating copy is waited for, not raced; its deletion
		// event brings the object back.
		s.results.set(s.target, key, Result{State: StatePending})
		return false, nil
	}
	verdict := ownership.Decide(ownership.Classify(exists, annotationsOf(pobj), s.target.ClusterUID, string(cobj.GetUID())), policy.Conflict)
	if !verdict.Write {
		return false, s.reportConflict(ctx, cobj, verdict.Conflict, "")
	}

	if s.target.Namespaced && s.target.Isolation.CreatesNamespaces() {
		// A missing provider namespace is created, marked as kbind's (SYNC-3).
		conflict, err := s.ensureNamespace(ctx, key.Namespace, pkey.Namespace)
		if err != nil {
			return s.failed(cobj, err, "create", "namespaces/"+pkey.Namespace)
		}
		if conflict != "" {
			return false, s.reportConflict(ctx, cobj, conflict, namespaceConflictMessage(pkey.Namespace, conflict))
		}
	}
	desired := s.desiredCopy(cobj, pkey, policy)
	if !exists || !upToDate(pobj, desired) {
		// The digest only now: most reconciles find the copy up to date.
		digest := digestOf(desired)
		if last, ok := s.applied.Load(key); ok && last == digest {
			if !exists {
				// Applied a moment ago; the provider informer has not
				// reported it yet. Its event brings the object back.
				s.results.set(s.target, key, Result{State: StatePending})
				return false, nil
			}
		} else {
			applied, requeue, err := s.apply(ctx, cobj, desired, pkey, exists, seen)
			if applied == nil {
				return requeue, err
			}
			s.applied.Store(key, digest)
			if verdict.Adopt {
				log.FromContext(ctx).Info("Adopted an unmarked provider object (conflictPolicy Adopt)")
			}
			pobj = applied
		}
	}
	if err := s.statusDown(ctx, cobj, pobj, seen); err != nil {
		if isConflictOrGone(err) {
			return true, nil
		}
		return false, err
	}
	if err := s.clearConflict(ctx, cobj); err != nil {
		if isConflictOrGone(err) {
			return true, nil
		}
		return false, err
	}
	s.results.set(s.target, key, Result{State: StateSynced})
	return false, nil
}

// providerGet reads the provider copy from the session cache.
func (s *Syncer) providerGet(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, bool, error) {
	pobj := s.newObject()
	if err := s.session.Cache().Get(ctx, key, pobj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		// Never taken as absence: retried.
		return nil, false, fmt.Errorf("reading the provider copy: %w", err)
	}
	return pobj, true, nil
}

// failed records a provider refusal: a Warning Event on the consumer object
// with the provider's message, the failed count, and a retry with backoff
// (never a hot loop). A refusal is any refusal.Kind, NotFound included (a
// namespace or object gone under the write); anything else is returned as
// a transient error.
func (s *Syncer) failed(cobj *unstructured.Unstructured, err error, verb, resource string) (bool, error) {
	kind := refusal.Of(err)
	if kind == refusal.None {
		return false, fmt.Errorf("%s %s on the provider: %w", verb, resource, err)
	}
	res := Result{State: StateFailed, Message: fmt.Sprintf("the provider refused %s %s: %v", verb, resource, err)}
	if storage.TooLarge(err) {
		res.Message += " (the provider copy, with kbind's ownership markers, is larger than the provider stores; make the object smaller)"
	}
	if kind == refusal.Forbidden {
		res.Forbidden = s.refusal(verb, resource, s.providerNamespace(cobj))
	}
	if s.results.set(s.target, client.ObjectKeyFromObject(cobj), res) {
		s.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventProviderRejected, "Sync", "%s", res.Message)
	}
	return true, nil
}

// refusal names what the provider refused, without the object's name: the
// binding counts objects per refusal ("apply Widget in namespace team-a",
// the provider namespace), so its condition stays short however many
// objects are refused.
func (s *Syncer) refusal(verb, resource, ns string) string {
	if strings.HasPrefix(resource, "namespaces/") {
		return verb + " " + resource
	}
	if ns != "" {
		return fmt.Sprintf("%s %s in namespace %s", verb, s.target.GVK.Kind, ns)
	}
	return verb + " " + s.target.GVK.Kind
}

// providerNamespace is the provider namespace of a consumer object's copy
// ("" when cluster-scoped or unplaceable).
func (s *Syncer) providerNamespace(cobj *unstructured.Unstructured) string {
	pkey, err := s.target.Isolation.Object(client.ObjectKeyFromObject(cobj))
	if err != nil {
		return ""
	}
	return pkey.Namespace
}

// unplaceable records a consumer object the Connection's isolation has no
// provider place for (a cluster-scoped object under Namespace isolation):
// failed, with a Warning Event once; nothing is written anywhere.
func (s *Syncer) unplaceable(cobj *unstructured.Unstructured, err error) {
	res := Result{State: StateFailed, Message: fmt.Sprintf("not synced: %v under %s; bind this API through a Connection without Namespace isolation", err, s.target.Isolation)}
	if s.results.set(s.target, client.ObjectKeyFromObject(cobj), res) {
		s.events.Eventf(cobj, nil, corev1.EventTypeWarning, eventProviderRejected, "Sync", "%s", res.Message)
	}
}
