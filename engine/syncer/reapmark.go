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

package syncer

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// settleUnsynced handles the provider copy of a consumer object this
// Syncer does not sync (gone, or not selected and without the finalizer):
// a late copy a write in doubt created is deleted (reapLate, doubt.go),
// and so is the copy of an object that vanished with the finalizer kbind
// had just added (reapVanished, vanished.go);
// any other copy of this consumer cluster keeps everything but the
// backend reaper's mark, which it loses (unmarkUnsynced).
func (s *Syncer) settleUnsynced(ctx context.Context, key types.NamespacedName) (outcome, error) {
	out, err := s.reapLate(ctx, key)
	if err != nil {
		return out, err
	}
	if err := s.reapVanished(ctx, key); err != nil {
		return done, err
	}
	if err := s.unmarkUnsynced(ctx, key); err != nil {
		return done, err
	}
	return out, nil
}

// unmarkUnsynced removes the backend reaper's phase-1 mark from the
// provider copy of a consumer object this Syncer does not sync, when the
// copy is this consumer cluster's (both its cluster markers name it, its
// object marker is set) and not being deleted (issue #52). The mark says
// "this consumer looks dead"; a konnector that sees it is live, whichever
// of its copies carries it. Only the mark goes: the copy, its markers and
// a kept label stay. Before, such a copy (an orphan a write landing late
// left) kept its mark while the konnector cleared the others', and once
// those were gone its surviving mark let the reaper take the consumer for
// dead. A failed read of the copy leaves the mark (it deletes nothing).
func (s *Syncer) unmarkUnsynced(ctx context.Context, key types.NamespacedName) error {
	pkey, err := s.target.Isolation.Object(key)
	if err != nil {
		return nil // no provider place: no copy
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	if err != nil || !exists {
		// Nothing is deleted here: a failed read only leaves the mark,
		// and the copy's next event brings it back.
		return nil
	}
	data, ok := unmarkUnsyncedPatch(pobj, s.target.ClusterUID)
	if !ok {
		return nil
	}
	if err := s.session.Client.Patch(ctx, pobj.DeepCopy(), client.RawPatch(types.MergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone or replaced: its event brings it back
		}
		return fmt.Errorf("removing the reaper's mark from provider copy %s: %w", pkey, err)
	}
	log.FromContext(ctx).V(1).Info("Removed the reaper's mark from a provider copy of an object this konnector does not sync",
		"namespace", pkey.Namespace, "name", pkey.Name, "reapMarkedAt", pobj.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation])
	return nil
}

// unmarkUnsyncedPatch is the JSON merge patch that removes only the reap
// mark from pobj, exactly that copy (its UID); ok is false when pobj
// carries no mark, is being deleted or is not clusterUID's copy.
func unmarkUnsyncedPatch(pobj *unstructured.Unstructured, clusterUID string) (data []byte, ok bool) {
	ann := pobj.GetAnnotations()
	if _, marked := ann[kbindv1alpha1.ReapMarkedAtAnnotation]; !marked || pobj.GetDeletionTimestamp() != nil {
		return nil, false
	}
	if clusterUID == "" || ann[kbindv1alpha1.ConsumerClusterUIDAnnotation] != clusterUID ||
		pobj.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] != clusterUID || ann[kbindv1alpha1.ConsumerObjectUIDAnnotation] == "" {
		return nil, false
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         string(pobj.GetUID()),
		"annotations": map[string]any{kbindv1alpha1.ReapMarkedAtAnnotation: nil},
	}})
	return data, err == nil
}
