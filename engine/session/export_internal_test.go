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
