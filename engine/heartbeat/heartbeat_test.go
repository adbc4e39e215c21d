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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kbind/kbind/engine/heartbeat"
)

// requests counts a client's requests by verb.
type requests struct{ get, create, update atomic.Int32 }

func counting(c client.WithWatch, n *requests) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n.get.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.create.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			n.update.Add(1)
			return c.Update(ctx, obj, opts...)
		},
	})
}

// TestRenewWritesWithoutReading: after the first renewal, each renewal is
// one update and no read; a Lease changed or deleted by someone else is
// read again, and one another holder took over is left untouched.
func TestRenewWritesWithoutReading(t *testing.T) {
	t.Parallel()
	admin := startProvider(t)
	ctx := context.Background()
	n := &requests{}
	l := heartbeat.For("provider", "0123456789abcdef", leaseNamespace(t))
	r := heartbeat.NewRenewer(counting(admin, n), l)
	now := time.Now()
	renew := func(at time.Duration) error { return r.Renew(ctx, now.Add(at)) }

	if err := renew(0); err != nil {
		t.Fatal(err)
	}
	// GET (not found), CREATE (namespace missing), namespace CREATE, CREATE.
	if n.get.Load() != 1 {
		t.Errorf("first renewal: %d reads, want 1", n.get.Load())
	}
	for i := 1; i <= 5; i++ {
		if err := renew(time.Duration(i) * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got, updates := n.get.Load(), n.update.Load(); got != 1 || updates != 5 {
		t.Errorf("five renewals: %d reads and %d updates, want 1 and 5", got, updates)
	}
	lease := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
		t.Fatal(err)
	}
	if !lease.Spec.RenewTime.Time.Equal(now.Add(5 * time.Second).Truncate(time.Microsecond)) {
		t.Errorf("renewTime %v, want %v", lease.Spec.RenewTime.Time, now.Add(5*time.Second))
	}

	// Someone else writes it (the backend's stale-since mark): the stale
	// update is refused, the Lease read again, and kept with the mark.
	lease.Annotations["example.org/mark"] = "x"
	if err := admin.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := renew(6 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := n.get.Load(); got != 2 {
		t.Errorf("after a foreign write: %d reads, want 2", got)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Annotations["example.org/mark"] != "x" || !lease.Spec.RenewTime.Time.Equal(now.Add(6*time.Second).Truncate(time.Microsecond)) {
		t.Errorf("after re-reading: annotations %v, renewTime %v", lease.Annotations, lease.Spec.RenewTime.Time)
	}

	// Deleted: created again.
	if err := admin.Delete(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := renew(7 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
		t.Fatalf("the deleted Lease was not created again: %v", err)
	}

	// Another holder took it over: never overwritten.
	lease.Spec.HolderIdentity = ptr.To("someone-else")
	if err := admin.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	var held *heartbeat.HeldByAnother
	if err := renew(8 * time.Second); err == nil || !strings.Contains(err.Error(), `held by "someone-else"`) {
		t.Errorf("renewing a Lease another holder took: %v", err)
	} else if !errors.As(err, &held) || held.Holder != "someone-else" || held.Name != l.Name || held.Namespace != l.Namespace {
		t.Errorf("not a *HeldByAnother naming the Lease and its holder: %#v", err)
	} else if heartbeat.Unanswered(err) {
		t.Errorf("a Lease held by another is an answer, not an unreachable provider: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "someone-else" {
		t.Errorf("holder overwritten: %s", *lease.Spec.HolderIdentity)
	}

}

// TestLeaseInfo: the konnector's version and credential facts ride on the
// renewal itself — no request of their own — and an annotation without a
// value is removed.
func TestLeaseInfo(t *testing.T) {
	t.Parallel()
	admin := startProvider(t)
	ctx := context.Background()
	n := &requests{}
	l := heartbeat.For("provider", "0123456789abcdef", leaseNamespace(t))
	l.Info = heartbeat.Info{KonnectorVersion: "0.3.0", APIVersion: "core.kbind.io/v1alpha1", User: "system:serviceaccount:kbind:c",
		CredentialKind: "ServiceAccountToken", CredentialExpiry: "2027-01-03T00:00:00Z", Renews: true}
	get := func() map[string]string {
		lease := &coordinationv1.Lease{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
			t.Fatal(err)
		}
		return lease.Annotations
	}
	r := heartbeat.NewRenewer(counting(admin, n), l)
	for i := range 3 {
		if err := r.Renew(ctx, time.Now()); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	if g, c, u := n.get.Load(), n.create.Load(), n.update.Load(); g != 1 || c != 3 || u != 2 {
		t.Errorf("three renewals: %d reads, %d creates, %d updates; want 1, 3 (Lease, namespace, Lease) and 2", g, c, u)
	}
	a := get()
	for key, want := range map[string]string{
		"core.kbind.io/konnector-version": "0.3.0", "core.kbind.io/api-version": "core.kbind.io/v1alpha1",
		"core.kbind.io/provider-user": "system:serviceaccount:kbind:c", "core.kbind.io/credential-kind": "ServiceAccountToken",
		"core.kbind.io/credential-expiry": "2027-01-03T00:00:00Z", "core.kbind.io/credential-renews": "true",
	} {
		if a[key] != want {
			t.Errorf("%s = %q, want %q", key, a[key], want)
		}
	}
	// A credential that neither expires nor renews: those annotations go.
	l.Info = heartbeat.Info{KonnectorVersion: "0.3.0", APIVersion: "core.kbind.io/v1alpha1", CredentialKind: "Token"}
	if err := heartbeat.NewRenewer(admin, l).Renew(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	a = get()
	for _, gone := range []string{"core.kbind.io/credential-expiry", "core.kbind.io/credential-renews", "core.kbind.io/provider-user"} {
		if _, ok := a[gone]; ok {
			t.Errorf("%s still set: %v", gone, a)
		}
	}
}
