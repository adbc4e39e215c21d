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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/session"
)

// While another konnector may renew the Connection's Lease with this
// consumer's identity (a restored clone: heartbeat.Suspect or Duplicate),
// the door deletes no provider copy: a deleting object keeps its
// finalizer, pending, with a Warning Event DuplicateConsumer; Orphan still
// releases (it deletes nothing); a moved object's old copy is left as it
// is; a late copy is not deleted. Alone deletes as always.
func TestDeletesHeldWhileDuplicate(t *testing.T) {
	target := Target{Connection: "p", GVK: widgetGVK, ProviderGVK: widgetGVK, Namespaced: true, ClusterUID: "cluster"}
	copyOf := func(objectUID types.UID) *unstructured.Unstructured {
		return widget("ns", "w", "p1", map[string]string{
			kbindv1alpha1.ConsumerClusterUIDAnnotation: "cluster", kbindv1alpha1.ConsumerObjectUIDAnnotation: string(objectUID)})
	}
	orphan := map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan}
	deleteOnMove := map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyDelete}
	for _, tc := range []struct {
		name          string
		verdict       heartbeat.Verdict
		annotations   map[string]string
		wantOut       outcome
		copyDeleted   bool
		finalizerKept bool
		event         string
	}{
		{"alone: deleted as always", heartbeat.Alone, nil, done, true, true, ""},
		{"duplicate: the copy is kept, the object waits", heartbeat.Duplicate, nil, requeue, false, true,
			"Warning DuplicateConsumer deleting: the provider copy is kept and the object waits: another konnector renews the heartbeat Lease of Connection p"},
		{"one sighting: held too", heartbeat.Suspect, nil, requeue, false, true, "Warning DuplicateConsumer"},
		{"duplicate, Orphan: released, the copy stays", heartbeat.Duplicate, orphan, done, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cobj := widget("ns", "w", "c1", tc.annotations, kbindv1alpha1.SyncerFinalizer)
			consumer := fake.NewClientBuilder().WithObjects(cobj.DeepCopy()).Build()
			provider := fake.NewClientBuilder().WithObjects(copyOf("c1")).Build()
			recorded := events.NewFakeRecorder(4)
			r := &releaser{reporter: reporter{target: target, results: NewResults(nil), events: recorded}, consumer: consumer,
				session: &session.Session{Client: provider}, duplicate: func() heartbeat.Verdict { return tc.verdict }}
			key := client.ObjectKeyFromObject(cobj)
			pobj, exists, err := r.providerCopy(ctx, key)
			if err != nil || !exists {
				t.Fatalf("providerCopy = %v, %v", exists, err)
			}
			if out, err := r.release(ctx, cobj, pobj, exists, "", ""); err != nil || out != tc.wantOut {
				t.Fatalf("release = %v, %v; want %v", out, err, tc.wantOut)
			}
			_, stillThere, err := r.providerCopy(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if deleted := !stillThere; deleted != tc.copyDeleted {
				t.Errorf("provider copy deleted = %v, want %v", deleted, tc.copyDeleted)
			}
			if kept := holdsFinalizer(t, consumer, cobj); kept != tc.finalizerKept {
				t.Errorf("finalizer kept = %v, want %v", kept, tc.finalizerKept)
			}
			select {
			case e := <-recorded.Events:
				if tc.event == "" || !strings.HasPrefix(e, tc.event) {
					t.Errorf("event %q, want one starting %q", e, tc.event)
				}
			default:
				if tc.event != "" {
					t.Errorf("no event, want one starting %q", tc.event)
				}
			}
		})
	}

	t.Run("a moved object's old copy is left as it is", func(t *testing.T) {
		ctx := context.Background()
		cobj := widget("ns", "w", "c1", deleteOnMove, kbindv1alpha1.SyncerFinalizer)
		provider := fake.NewClientBuilder().WithObjects(copyOf("c1")).Build()
		r := &releaser{reporter: reporter{target: target, results: NewResults(nil), events: events.NewFakeRecorder(4)},
			consumer: fake.NewClientBuilder().WithObjects(cobj.DeepCopy()).Build(),
			session:  &session.Session{Client: provider}, duplicate: func() heartbeat.Verdict { return heartbeat.Duplicate }}
		pobj, exists, err := r.providerCopy(ctx, client.ObjectKeyFromObject(cobj))
		if err != nil || !exists {
			t.Fatalf("providerCopy = %v, %v", exists, err)
		}
		if out, err := r.releaseMoved(ctx, cobj, pobj, exists, "other", ""); err != nil || out != requeue {
			t.Fatalf("releaseMoved = %v, %v; want requeue", out, err)
		}
		after, stillThere, err := r.providerCopy(ctx, client.ObjectKeyFromObject(cobj))
		if err != nil || !stillThere || after.GetAnnotations()[kbindv1alpha1.ConsumerObjectUIDAnnotation] != "c1" {
			t.Errorf("the old copy was changed: %v, %v", after, err)
		}
	})

	t.Run("a late copy is not deleted", func(t *testing.T) {
		pobj := copyOf("c1")
		provider := fake.NewClientBuilder().WithObjects(pobj.DeepCopy()).Build()
		r := &releaser{reporter: reporter{target: target}, session: &session.Session{Client: provider},
			duplicate: func() heartbeat.Verdict { return heartbeat.Duplicate }}
		if err := r.deleteLate(context.Background(), pobj, kbindv1alpha1.DeletionPolicyDelete); err == nil || !strings.Contains(err.Error(), "another konnector") {
			t.Errorf("deleteLate = %v, want a refusal naming another konnector", err)
		}
		if err := provider.Get(context.Background(), client.ObjectKeyFromObject(pobj), copyOf("")); err != nil {
			t.Errorf("the late copy is gone: %v", err)
		}
	})
}
