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

package watchjson

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestRetryRefused(t *testing.T) {
	refusedRetryFirst, refusedRetryCap = time.Millisecond, 4*time.Millisecond
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/apis/example.org/v1alpha1/widgets?watch=true",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	busy := apierrors.NewTooManyRequests("the watch cache is not ready", 1)
	cases := []struct {
		name      string
		answers   []error // one per try; past the end: a watch
		cancel    bool
		wantTries int
		wantErr   error
	}{
		{"opened at once", nil, false, 1, nil},
		{"refused, then opened", []error{refused, refused, refused, refused, refused, refused}, false, 7, nil},
		{"another error goes to the reflector", []error{busy}, false, 1, busy},
		{"refused, then another error", []error{refused, busy}, false, 2, busy},
		{"refused until the informer stops", []error{refused}, true, 1, refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			tries := 0
			open := retryRefused(func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				if opts.ResourceVersion != "42" {
					t.Errorf("try %d: resourceVersion %q, want the reflector's 42", tries, opts.ResourceVersion)
				}
				tries++
				if tries <= len(tc.answers) {
					return nil, tc.answers[tries-1]
				}
				return watch.NewEmptyWatch(), nil
			})
			w, err := open(ctx, metav1.ListOptions{ResourceVersion: "42"})
			if tries != tc.wantTries {
				t.Errorf("%d tries, want %d", tries, tc.wantTries)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if (w != nil) != (tc.wantErr == nil) {
				t.Errorf("watch %v with error %v", w, err)
			}
		})
	}
}
