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
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kbind/kbind/engine/heartbeat"
)

// Delete removes exactly this consumer's Lease. The last renewal before
// the heartbeat stopped may land between Delete's read and its delete (a
// renewal cancelled on the client may still be committed): the Lease is
// read again and deleted — unless another holder took it meanwhile. A
// failed read deletes nothing. Found by the e2e suite's teardown, which
// once left a Lease whose delete failed on its resourceVersion.
func TestDeleteWhileARenewalLands(t *testing.T) {
	t.Parallel()
	admin := startProvider(t)
	ns := leaseNamespace(t)
	ctx := context.Background()
	cases := []struct {
		name string
		// meanwhile writes the Lease between Delete's read and its first
		// delete; nil writes nothing.
		meanwhile func(*coordinationv1.Lease)
		getFails  bool
		gone      bool
	}{
		{"nothing meanwhile: deleted", nil, false, true},
		{"a renewal lands meanwhile: read again, deleted", func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(time.Second)))
		}, false, true},
		{"another holder took it meanwhile: kept", func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = ptr.To("someone-else")
		}, false, false},
		{"the read fails: an error, kept", nil, true, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := heartbeat.For("provider", "0123456789abcdef", ns)
			l.Name = l.Name + "-" + string(rune('a'+i))
			if err := heartbeat.NewRenewer(admin, l).Renew(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: l.Namespace, Name: l.Name}
			var deletes atomic.Int32
			c := interceptor.NewClient(admin, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if tc.getFails {
						return apierrors.NewServiceUnavailable("the provider is starting")
					}
					return c.Get(ctx, k, obj, opts...)
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if deletes.Add(1) == 1 && tc.meanwhile != nil {
						lease := &coordinationv1.Lease{}
						if err := admin.Get(ctx, key, lease); err != nil {
							t.Fatal(err)
						}
						tc.meanwhile(lease)
						if err := admin.Update(ctx, lease); err != nil {
							t.Fatal(err)
						}
					}
					return c.Delete(ctx, obj, opts...)
				},
			})
			err := heartbeat.Delete(ctx, c, l)
			if tc.getFails != (err != nil) {
				t.Errorf("Delete = %v", err)
			}
			lease := &coordinationv1.Lease{}
			err = admin.Get(ctx, key, lease)
			if gone := apierrors.IsNotFound(err); gone != tc.gone {
				t.Errorf("Lease gone = %v (%v), want %v", gone, err, tc.gone)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		})
	}
}
