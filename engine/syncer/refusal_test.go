package syncer

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kbind/kbind/engine/internal/storage"
)

func TestIsRefusal(t *testing.T) {
	gr := schema.GroupResource{Group: "example.org", Resource: "widgets"}
	cases := []struct {
		name         string
		err          error
		refusal, big bool
	}{
		{"forbidden", apierrors.NewForbidden(gr, "w", errors.New("no")), true, false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "example.org", Kind: "Widget"}, "w", nil), true, false},
		{"bad request", apierrors.NewBadRequest("no"), true, false},
		{"not found", apierrors.NewNotFound(gr, "w"), true, false},
		{"413", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true, true},
		{"etcd's size limit, as the API server passes it on", apierrors.NewInternalError(errors.New("etcdserver: request is too large")), true, true},
		{"another internal error", apierrors.NewInternalError(errors.New("etcd leader changed")), false, false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), false, false},
		{"unavailable", apierrors.NewServiceUnavailable("down"), false, false},
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false, false},
	}
	for _, tc := range cases {
		if got := isRefusal(tc.err); got != tc.refusal {
			t.Errorf("%s: isRefusal = %v, want %v", tc.name, got, tc.refusal)
		}
		if got := storage.TooLarge(tc.err); got != tc.big {
			t.Errorf("%s: storage.TooLarge = %v, want %v", tc.name, got, tc.big)
		}
	}
}
