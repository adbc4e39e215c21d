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

package session

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/isolation"
)

// RunningSession prepares and publishes a session "p" from cfg, starts its
// cache with a Namespace informer and waits until it has synced.
func RunningSession(ctx context.Context, t *testing.T, m *Manager, cfg *rest.Config) *Session {
	t.Helper()
	s, _, err := m.Prepare("p", "hash", "", "", isolation.Mapping{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Publish(s)
	if _, err := s.Cache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		t.Fatal(err)
	}
	s.Activate()
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("the session's cache did not sync")
	}
	return s
}
