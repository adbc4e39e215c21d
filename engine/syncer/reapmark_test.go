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

package syncer_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// TestSyncClearsReapMarkAndKeptLabel (issue #52, paths 4 and 5): the
// backend reaper's phase-1 mark on a provider copy — written while the
// consumer's heartbeat Lease is stale — is removed by the live konnector,
// prompted by the copy's own event; and a kept label left by an earlier
// Orphan release goes once the object syncs again.
func TestSyncClearsReapMarkAndKeptLabel(t *testing.T) {
	parallelEnv(t)
	ns := unique("reap-mark")
	ctx := context.Background()
	w := object(widgetGVK, ns, "db", map[string]any{"size": int64(1)})
	create(t, env.Consumer, w)
	pcopy := waitCopy(t, widgetGVK, ns, "db", nil)

	// What the backend writes: a merge patch of the annotation (its clock),
	// and what an Orphan release left.
	data := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:"2026-01-01T00:00:00Z"},"labels":{%q:%q}}}`,
		pcopy.GetUID(), kbindv1alpha1.ReapMarkedAtAnnotation, kbindv1alpha1.KeptLabel, kbindv1alpha1.KeptOrphan)
	if err := env.Provider.Patch(ctx, pcopy, client.RawPatch(types.MergePatchType, []byte(data))); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "db", func(u *unstructured.Unstructured) error {
		if v, ok := u.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation]; ok {
			return fmt.Errorf("still marked %q", v)
		}
		if v, ok := u.GetLabels()[kbindv1alpha1.KeptLabel]; ok {
			return fmt.Errorf("still labelled kept %q", v)
		}
		if u.GetUID() != pcopy.GetUID() {
			return fmt.Errorf("the copy was replaced")
		}
		return nil
	})
}

// TestOrphanLabelsTheKeptCopy (issue #52, path 5): a copy kept by an
// Orphan release keeps its markers and carries core.kbind.io/kept: Orphan,
// which the backend reaper respects.
func TestOrphanLabelsTheKeptCopy(t *testing.T) {
	parallelEnv(t)
	ns := unique("orphan-kept")
	ctx := context.Background()
	w := object(widgetGVK, ns, "db", map[string]any{"size": int64(1)})
	w.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	create(t, env.Consumer, w)
	waitCopy(t, widgetGVK, ns, "db", nil)
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, widgetGVK, ns, "db")
	u, ok := get(t, env.Provider, widgetGVK, ns, "db")
	if !ok {
		t.Fatal("Orphan deleted the provider copy")
	}
	if got := u.GetLabels()[kbindv1alpha1.KeptLabel]; got != kbindv1alpha1.KeptOrphan {
		t.Errorf("label %s = %q, want %q", kbindv1alpha1.KeptLabel, got, kbindv1alpha1.KeptOrphan)
	}
	if u.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] == "" || u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] == "" {
		t.Errorf("the kept copy lost its markers: labels %v annotations %v", u.GetLabels(), u.GetAnnotations())
	}
}

// TestSyncClearsTheReapMarkOfACopyItDoesNotSync (issue #52, the CI
// failure of lease-renewals-refused-with-reaper): a copy of this consumer
// cluster whose consumer object is gone (an orphan a late write leaves;
// here a copy an Orphan release kept, its kept label removed) carries the
// backend reaper's mark. The live konnector removes the mark — only the
// mark: the copy and its markers stay. Before, only the copies of objects
// it syncs lost their marks, so this one kept its mark round after round,
// and once the others were gone the reaper took the consumer for dead.
func TestSyncClearsTheReapMarkOfACopyItDoesNotSync(t *testing.T) {
	parallelEnv(t)
	ns := unique("reap-mark-orphan")
	ctx := context.Background()
	w := object(widgetGVK, ns, "orphan", map[string]any{"size": int64(1)})
	w.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
	create(t, env.Consumer, w)
	waitCopy(t, widgetGVK, ns, "orphan", nil)
	if err := env.Consumer.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Consumer, widgetGVK, ns, "orphan")
	pcopy := waitCopy(t, widgetGVK, ns, "orphan", func(u *unstructured.Unstructured) error {
		if u.GetLabels()[kbindv1alpha1.KeptLabel] == "" {
			return fmt.Errorf("not labelled kept yet")
		}
		return nil
	})
	data := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:"2026-01-01T00:00:00Z"},"labels":{%q:null}}}`,
		pcopy.GetUID(), kbindv1alpha1.ReapMarkedAtAnnotation, kbindv1alpha1.KeptLabel)
	if err := env.Provider.Patch(ctx, pcopy, client.RawPatch(types.MergePatchType, []byte(data))); err != nil {
		t.Fatal(err)
	}
	waitCopy(t, widgetGVK, ns, "orphan", func(u *unstructured.Unstructured) error {
		if v, ok := u.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation]; ok {
			return fmt.Errorf("still marked %q", v)
		}
		if u.GetUID() != pcopy.GetUID() || u.GetDeletionTimestamp() != nil {
			return fmt.Errorf("the copy was replaced or deleted")
		}
		if u.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] == "" || u.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] == "" {
			return fmt.Errorf("the copy lost its markers: %v %v", u.GetLabels(), u.GetAnnotations())
		}
		return nil
	})
}
