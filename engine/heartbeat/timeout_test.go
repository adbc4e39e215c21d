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

package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kbind/kbind/engine/heartbeat"
)

func TestRenewTimeout(t *testing.T) {
	for _, tc := range []struct {
		interval, request, want time.Duration
	}{
		{30 * time.Second, 30 * time.Second, 7500 * time.Millisecond}, // the defaults: reported within 37.5 s
		{30 * time.Second, 5 * time.Second, 5 * time.Second},          // never beyond the request timeout
		{time.Second, 10 * time.Second, 5 * time.Second},              // at least 5 s
		{time.Second, time.Second, time.Second},                       // ... unless requests time out sooner
		{2 * time.Minute, 0, 30 * time.Second},                        // no request timeout
	} {
		if got := heartbeat.RenewTimeout(tc.interval, tc.request); got != tc.want {
			t.Errorf("RenewTimeout(%s, %s) = %s, want %s", tc.interval, tc.request, got, tc.want)
		}
	}
}

func TestUnanswered(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	wrap := func(err error) error {
		return &heartbeat.Error{Verb: "update", Resource: "leases.coordination.k8s.io kbind/x", Err: err}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"renewed", nil, false},
		{"timeout", wrap(&url.Error{Op: "Put", URL: "https://p", Err: context.DeadlineExceeded}), true},
		{"rate limiter gave up", wrap(fmt.Errorf("client rate limiter Wait returned an error: %w", context.DeadlineExceeded)), true},
		{"TLS handshake timeout", wrap(&url.Error{Op: "Put", URL: "https://p", Err: timeoutError{}}), true},
		{"connection refused is the network's answer", wrap(&url.Error{Op: "Put", URL: "https://p", Err: errors.New("dial tcp: connection refused")}), false},
		{"connection reset is the network's answer", wrap(&url.Error{Op: "Put", URL: "https://p", Err: errors.New("read: connection reset by peer")}), false},
		{"forbidden is an answer", wrap(apierrors.NewForbidden(gr, "x", errors.New("no"))), false},
		{"a server error is an answer", wrap(apierrors.NewInternalError(errors.New("etcd"))), false},
		{"unavailable is an answer", wrap(apierrors.NewServiceUnavailable("later")), false},
	} {
		if got := heartbeat.Unanswered(tc.err); got != tc.want {
			t.Errorf("%s: Unanswered(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// timeoutError is a net.Error that timed out (as net/http's TLS handshake
// timeout is).
type timeoutError struct{}

func (timeoutError) Error() string   { return "net/http: TLS handshake timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestJittered(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{
		{0, 27 * time.Second},
		{0.5, 30 * time.Second},
		{0.999999999, 33 * time.Second},
	} {
		got := heartbeat.Jittered(30*time.Second, tc.r)
		if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("Jittered(30s, %v) = %v, want %v", tc.r, got, tc.want)
		}
	}
	// The mean over many draws is the interval: an idle Connection's
	// request rate is unchanged.
	var sum time.Duration
	const n = 10000
	for i := range n {
		sum += heartbeat.Jittered(30*time.Second, (float64(i)+0.5)/n)
	}
	if mean := sum / n; mean < 29900*time.Millisecond || mean > 30100*time.Millisecond {
		t.Errorf("mean wait %v, want 30s", mean)
	}
}
