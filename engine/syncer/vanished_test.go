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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestDecideVanished(t *testing.T) {
	const cluster, object = "cluster-a", "uid-1"
	copyOf := func(clusterUID, objectUID string, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		kbindv1alpha1.CopyMarkers(clusterUID, objectUID).Stamp(u)
		if mutate != nil {
			mutate(u)
		}
		return u
	}
	deleteHold := hold{uid: object, policy: kbindv1alpha1.DeletionPolicyDelete, known: true}
	for _, tc := range []struct {
		name string
		copy *unstructured.Unstructured
		h    hold
		want vanishedAction
	}{
		{"that object's copy, policy Delete: deleted", copyOf(cluster, object, nil), deleteHold, vanishedDelete},
		{"Foreground: deleted", copyOf(cluster, object, nil), hold{uid: object, policy: kbindv1alpha1.DeletionPolicyForeground, known: true}, vanishedDelete},
		{"Orphan: kept", copyOf(cluster, object, nil), hold{uid: object, policy: kbindv1alpha1.DeletionPolicyOrphan, known: true}, vanishedKeep},
		{"a policy naming none: kept, never guessed", copyOf(cluster, object, nil), hold{uid: object, policy: "orphan", known: false}, vanishedKeep},
		{"no copy", nil, deleteHold, vanishedNothing},
		{"another object's copy (created again under the name)", copyOf(cluster, "uid-2", nil), deleteHold, vanishedNothing},
		{"another consumer cluster's copy", copyOf("cluster-b", object, nil), deleteHold, vanishedNothing},
		{"an unmarked provider object", &unstructured.Unstructured{}, deleteHold, vanishedNothing},
		{"a copy kbind kept", copyOf(cluster, object, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptOrphan})
		}), deleteHold, vanishedNothing},
		{"a copy being deleted", copyOf(cluster, object, func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}), deleteHold, vanishedNothing},
	} {
		if got := decideVanished(tc.copy, cluster, tc.h); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHoldsAreForgotten(t *testing.T) {
	now := time.Now()
	h := &holds{now: func() time.Time { return now }}
	key := types.NamespacedName{Namespace: "team-a", Name: "db"}
	h.added(key, "uid-1", kbindv1alpha1.DeletionPolicyDelete, true)
	if got, ok := h.vanished(key); !ok || got.uid != "uid-1" {
		t.Fatalf("vanished right after the finalizer was added: %v %v", got, ok)
	}
	h.held(key)
	if _, ok := h.vanished(key); ok {
		t.Error("a hold seen held (the object deleting, or released) is still taken for a vanishing")
	}
	h.added(key, "uid-1", kbindv1alpha1.DeletionPolicyDelete, true)
	now = now.Add(HoldHorizon + time.Second)
	if _, ok := h.vanished(key); ok {
		t.Error("a hold older than HoldHorizon is still taken for a vanishing")
	}
	// The next add sweeps it.
	h.added(types.NamespacedName{Namespace: "team-a", Name: "other"}, "uid-2", kbindv1alpha1.DeletionPolicyDelete, true)
	if _, stays := h.m[key]; stays {
		t.Error("a hold older than HoldHorizon is kept in memory after a sweep")
	}
	var none *holds
	none.added(key, "uid-1", kbindv1alpha1.DeletionPolicyDelete, true)
	if _, ok := none.vanished(key); ok {
		t.Error("a nil holds (a drain's releaser) remembers")
	}
}
