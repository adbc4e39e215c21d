package refusal

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kbind/kbind/engine/internal/storage"
)

func TestOf(t *testing.T) {
	gr := schema.GroupResource{Group: "example.org", Resource: "widgets"}
	cases := []struct {
		name string
		err  error
		want Kind
		big  bool
	}{
		{"no error", nil, None, false},
		{"forbidden", apierrors.NewForbidden(gr, "w", errors.New("no")), Forbidden, false},
		{"forbidden, wrapped", fmt.Errorf("apply: %w", apierrors.NewForbidden(gr, "w", errors.New("no"))), Forbidden, false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "example.org", Kind: "Widget"}, "w", nil), Rejected, false},
		{"bad request", apierrors.NewBadRequest("no"), Rejected, false},
		{"413", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), Rejected, true},
		{"etcd's size limit, as the API server passes it on", apierrors.NewInternalError(errors.New("etcdserver: request is too large")), Rejected, true},
		{"not found", apierrors.NewNotFound(gr, "w"), NotFound, false},
		{"another internal error", apierrors.NewInternalError(errors.New("etcd leader changed")), None, false},
		{"conflict", apierrors.NewConflict(gr, "w", errors.New("changed")), None, false},
		{"already exists", apierrors.NewAlreadyExists(gr, "w"), None, false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), None, false},
		{"unavailable", apierrors.NewServiceUnavailable("down"), None, false},
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), None, false},
	}
	for _, tc := range cases {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %d, want %d", tc.name, got, tc.want)
		}
		if got := storage.TooLarge(tc.err); got != tc.big {
			t.Errorf("%s: storage.TooLarge = %v, want %v", tc.name, got, tc.big)
		}
	}
}
