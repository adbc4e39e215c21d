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

package backend_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/backendtest"
)

// clearRelatedMarks plays a live konnector's related syncer whose Lease
// renewals are refused: it watches its provider copies (a poll here) and
// removes the reaper's mark from each related Secret and ConfigMap, as
// engine/related does on the copy's event. It returns the number of marks
// it cleared.
func clearRelatedMarks(t *testing.T, env *testEnv, consumer string) *atomic.Int64 {
	t.Helper()
	return clearMarksOf(t, env, func(ctx context.Context) []client.Object {
		var objs []client.Object
		cms, secrets := &corev1.ConfigMapList{}, &corev1.SecretList{}
		if env.Client.List(ctx, cms, client.MatchingLabels{kbindv1alpha1.ConsumerClusterUIDLabel: consumer}) == nil {
			for i := range cms.Items {
				objs = append(objs, &cms.Items[i])
			}
		}
		if env.Client.List(ctx, secrets, client.MatchingLabels{kbindv1alpha1.ConsumerClusterUIDLabel: consumer}) == nil {
			for i := range secrets.Items {
				objs = append(objs, &secrets.Items[i])
			}
		}
		return objs
	})
}

// related reads a related copy: its reap mark, whether it exists and
// whether it is terminating.
func related(t *testing.T, env *testEnv, kind, namespace, name string) (mark string, found, terminating bool) {
	t.Helper()
	var obj client.Object = &corev1.ConfigMap{}
	if kind == "Secret" {
		obj = &corev1.Secret{}
	}
	found, terminating = exists(t, env, obj, namespace, name)
	return obj.GetAnnotations()[kbindv1alpha1.ReapMarkedAtAnnotation], found, terminating
}

// TestLiveConsumerRelatedCopiesAreNeverReaped (issue #52, path 4, related
// copies): a consumer whose only provider objects are related copies
// (Secrets, ConfigMaps copied FromConsumer) never renews its Lease
// (renewals refused) while its konnector syncs on and clears the reaper's
// marks on them: they stay, and so does the Lease, however long it is
// stale.
func TestLiveConsumerRelatedCopiesAreNeverReaped(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Related(t, "ConfigMap", teamA, "a-cm", consumerA)
	env.Related(t, "Secret", teamA, "a-secret", consumerA)
	env.Lease(t, kbind, "a-1", consumerA) // never renewed
	cleared := clearRelatedMarks(t, env, consumerA)

	startBackend(t, env, backend.Options{StaleAfter: window, Reap: true, ReapInterval: 200 * time.Millisecond, ReapGrace: grace})
	check := func() error {
		for _, o := range [][2]string{{"ConfigMap", "a-cm"}, {"Secret", "a-secret"}} {
			if _, found, terminating := related(t, env, o[0], teamA, o[1]); !found || terminating {
				return fmt.Errorf("related copy %s %s reaped (found=%v terminating=%v) although its konnector syncs (marks cleared: %d)",
					o[0], o[1], found, terminating, cleared.Load())
			}
		}
		if _, err := lease(t, env, kbind, "a-1"); err != nil {
			return fmt.Errorf("the Lease: %v", err)
		}
		return nil
	}
	// Stale a window after the start, marked, cleared: window + settle.
	backendtest.Eventually(t, window+settle, "the reaper marked a related copy and the konnector cleared it", func() error {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if cleared.Load() == 0 {
			return fmt.Errorf("no mark cleared yet")
		}
		return nil
	})
	backendtest.Consistently(t, window+3*grace, "a live consumer keeps its related copies", check)
	t.Logf("marks cleared by the konnector: %d", cleared.Load())
}

// TestGoneConsumerRelatedCopiesAreMarkedFirst: a gone consumer with only
// related copies left has them marked first and deleted only once the
// marks survived the grace period; the namespace created for it and its
// Lease go after them.
func TestGoneConsumerRelatedCopiesAreMarkedFirst(t *testing.T) {
	t.Parallel()
	env, consumerA, kbind, teamA := newConsumerA(t)
	env.Related(t, "ConfigMap", teamA, "a-cm", consumerA)
	env.Lease(t, kbind, "a-1", consumerA)

	reapedAfterGrace(t, env, "the related copy team-a/a-cm", kbind, func() (string, bool, bool) { return related(t, env, "ConfigMap", teamA, "a-cm") })
}
