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

package refusal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
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
		{"an API server's admission warming up", warmingUp(gr), None, false},
		{"an API server's admission warming up, wrapped", fmt.Errorf("apply: %w", warmingUp(gr)), None, false},
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

func TestUnreached(t *testing.T) {
	gr := schema.GroupResource{Group: "example.org", Resource: "widgets"}
	// What a request to a stopped API server fails with, as client-go
	// returns it: a *url.Error around the dial's *net.OpError.
	dial := func(errno syscall.Errno) error {
		return &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis/example.org/v1alpha1/widgets/w",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: errno}}}
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"connection refused", dial(syscall.ECONNREFUSED), true},
		{"connection refused, wrapped by the syncer", fmt.Errorf("status write: %w", dial(syscall.ECONNREFUSED)), true},
		{"connection reset", dial(syscall.ECONNRESET), true},
		{"closed mid-answer", &url.Error{Op: "Get", URL: "https://x", Err: io.ErrUnexpectedEOF}, true},
		{"GOAWAY", &url.Error{Op: "Get", URL: "https://x", Err: errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1")}, true},
		{"HTTP/2 connection lost", errors.New("http2: client connection lost"), true},
		// Answers, and silences that may be a busy server: backed off.
		{"no route to host", dial(syscall.EHOSTUNREACH), false},
		{"client timeout", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, false},
		{"the server's timeout", apierrors.NewTimeoutError("slow", 1), false},
		{"service unavailable", apierrors.NewServiceUnavailable("shutting down"), false},
		{"too many requests", apierrors.NewTooManyRequests("busy", 1), false},
		{"conflict", apierrors.NewConflict(gr, "w", errors.New("changed")), false},
		{"internal error naming a reset", apierrors.NewInternalError(errors.New("connection reset by peer")), false},
	}
	for _, tc := range cases {
		if got := Unreached(tc.err); got != tc.want {
			t.Errorf("%s: Unreached = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// warmingUp is the 403 an API server's admission answers while it warms
// up, as k8s.io/apiserver's admission.NewForbidden builds it.
func warmingUp(gr schema.GroupResource) error {
	return apierrors.NewForbidden(gr, "w", errors.New("not yet ready to handle request"))
}

func TestIsForbidden(t *testing.T) {
	gr := schema.GroupResource{Group: "example.org", Resource: "widgets"}
	cases := []struct {
		name                   string
		err                    error
		forbidden, notYetReady bool
	}{
		{"no error", nil, false, false},
		{"RBAC", apierrors.NewForbidden(gr, "w", errors.New(`User "system:serviceaccount:kbind:c1" cannot patch resource "widgets"`)), true, false},
		{"an admission policy", apierrors.NewForbidden(gr, "w", errors.New("ValidatingAdmissionPolicy 'kbind-c1' denied request: not this consumer's")), true, false},
		{"the admission warming up", warmingUp(gr), false, true},
		{"the admission warming up, wrapped", fmt.Errorf("heartbeat: %w", warmingUp(gr)), false, true},
		{"the words elsewhere in a refusal", apierrors.NewForbidden(gr, "w", errors.New("not yet ready to handle request: no, RBAC says")), true, false},
		{"the words in another status", apierrors.NewServiceUnavailable("not yet ready to handle request"), false, false},
		{"a plain error with the words", errors.New("forbidden: not yet ready to handle request"), false, false},
	}
	for _, tc := range cases {
		if got := IsForbidden(tc.err); got != tc.forbidden {
			t.Errorf("%s: IsForbidden = %v, want %v", tc.name, got, tc.forbidden)
		}
		if got := NotYetReady(tc.err); got != tc.notYetReady {
			t.Errorf("%s: NotYetReady = %v, want %v", tc.name, got, tc.notYetReady)
		}
	}
}
