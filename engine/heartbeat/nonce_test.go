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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
)

// TestForeignNonce: each renewal writes its konnector's nonce; a renewal
// finds another's only when it came after its own write — two live
// renewers of one Lease find each other's at every renewal, a restarted
// one (a new nonce, a new Renewer) finds its predecessor's never.
func TestForeignNonce(t *testing.T) {
	t.Parallel()
	admin := startProvider(t)
	ns := leaseNamespace(t)
	ctx := context.Background()
	lease := func(nonce string) heartbeat.Lease {
		l := heartbeat.For("provider", "0123456789abcdef", ns)
		l.Nonce = nonce
		return l
	}
	a, b := heartbeat.NewRenewer(admin, lease("a")), heartbeat.NewRenewer(admin, lease("b"))
	now := time.Now()
	step := 0
	renew := func(who string, r *heartbeat.Renewer, want bool) {
		t.Helper()
		step++
		if err := r.Renew(ctx, now.Add(time.Duration(step)*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := r.Foreign(); got != want {
			t.Errorf("renewal %d by %s: Foreign() = %t, want %t", step, who, got, want)
		}
		l := &coordinationv1.Lease{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease("").Name}, l); err != nil {
			t.Fatal(err)
		}
		if got := l.Annotations[kbindv1alpha1.KonnectorNonceAnnotation]; got != who {
			t.Errorf("renewal %d by %s: the Lease's nonce is %q", step, who, got)
		}
	}
	renew("a", a, false)
	renew("a", a, false)
	// A restart: a new process, its first renewal finds its predecessor's
	// nonce, which is no sighting; nobody else writes afterwards.
	a = heartbeat.NewRenewer(admin, lease("c"))
	renew("c", a, false)
	renew("c", a, false)
	// A clone starts: its first renewal is no sighting either; from then
	// on each finds the other's at each renewal.
	renew("b", b, false)
	renew("c", a, true)
	renew("b", b, true)
	renew("c", a, true)
	renew("b", b, true)
	// The clone stops: the survivor's renewals find nothing foreign.
	renew("c", a, true)
	renew("c", a, false)
}

func TestNewNonce(t *testing.T) {
	if a, b := heartbeat.NewNonce(), heartbeat.NewNonce(); a == "" || a == b {
		t.Errorf("NewNonce gave %q and %q", a, b)
	}
}
