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

package syncer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/session"
)

func TestInDoubt(t *testing.T) {
	gr := schema.GroupResource{Group: "example.org", Resource: "widgets"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
	cases := []struct {
		name  string
		err   error
		doubt bool
	}{
		{"no error", nil, false},
		{"connection refused: nothing was sent", fmt.Errorf("Patch: %w", refused), false},
		{"connection reset: the request may have left", fmt.Errorf("Patch: %w", reset), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"the client's own deadline", context.DeadlineExceeded, true},
		{"a transport error kbind does not know", errors.New("stream error: stream ID 3; INTERNAL_ERROR"), true},
		{"504: may still be processing", apierrors.NewTimeoutError("the server was unable to return a response in the time allotted, but may still be processing the request", 1), true},
		{"500", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		{"503", apierrors.NewServiceUnavailable("not ready"), true},
		{"408", apierrors.NewGenericServerResponse(http.StatusRequestTimeout, "PATCH", gr, "w", "", 0, false), true},
		{"429: refused before processing", apierrors.NewTooManyRequests("slow down", 1), false},
		{"403", apierrors.NewForbidden(gr, "w", errors.New("no")), false},
		{"409", apierrors.NewConflict(gr, "w", errors.New("conflict")), false},
		{"422", apierrors.NewInvalid(schema.GroupKind{Group: "example.org", Kind: "Widget"}, "w", nil), false},
		{"404", apierrors.NewNotFound(gr, "w"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := inDoubt(c.err); got != c.doubt {
				t.Errorf("inDoubt(%v) = %v, want %v", c.err, got, c.doubt)
			}
		})
	}
}

func TestDoubts(t *testing.T) {
	key := types.NamespacedName{Namespace: "a", Name: "w"}
	const uid, other = types.UID("u1"), types.UID("u2")
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	cases := []struct {
		name   string
		steps  func(d *doubts)
		uid    types.UID
		policy kbindv1alpha1.DeletionPolicy
		late   bool
	}{
		{"no write in doubt: a copy is the release's business, not a late one", func(d *doubts) {
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
		}, uid, "", false},
		{"a write in doubt, the object not released: it still owns its copy", func(d *doubts) {
			d.wrote(key, uid)
		}, uid, "", false},
		{"released under Delete after a write in doubt", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
		}, uid, kbindv1alpha1.DeletionPolicyDelete, true},
		{"released under Foreground: deleted so", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyForeground)
		}, uid, kbindv1alpha1.DeletionPolicyForeground, true},
		{"released under Orphan: the copy may stay", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyOrphan)
		}, uid, "", false},
		{"released under Delete, then again under Orphan (selected again, then deleted so)", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyOrphan)
		}, uid, "", false},
		{"another object under the same key is not the released one", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
		}, other, "", false},
		{"written in doubt again after the release (selected again): released again to count", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
			d.wrote(key, uid)
		}, uid, "", false},
		{"applied again after the release (selected again): the release no longer counts", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
			d.applied(key, uid)
		}, uid, "", false},
		{"applied again, then released again: late again", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
			d.applied(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyForeground)
		}, uid, kbindv1alpha1.DeletionPolicyForeground, true},
		{"another object applied under the key: the released one's copy is still late", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
			d.applied(key, other)
		}, uid, kbindv1alpha1.DeletionPolicyDelete, true},
		{"past the horizon: nothing lands any more", func(d *doubts) {
			d.wrote(key, uid)
			d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
			now = now.Add(DoubtHorizon + time.Second)
		}, uid, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now = time.Unix(1000, 0)
			d := &doubts{now: clock}
			c.steps(d)
			policy, late := d.late(key, c.uid)
			if late != c.late || policy != c.policy {
				t.Errorf("late = %q, %v; want %q, %v", policy, late, c.policy, c.late)
			}
		})
	}

	t.Run("a nil doubts (a drain's releaser) remembers nothing", func(t *testing.T) {
		var d *doubts
		d.wrote(key, uid)
		d.released(key, uid, kbindv1alpha1.DeletionPolicyDelete)
		d.applied(key, uid)
		if _, late := d.late(key, uid); late || d.any() {
			t.Error("a nil doubts remembered")
		}
	})

	t.Run("old doubts are swept", func(t *testing.T) {
		now = time.Unix(1000, 0)
		d := &doubts{now: clock}
		for i := range 100 {
			d.wrote(types.NamespacedName{Namespace: "a", Name: fmt.Sprint(i)}, uid)
		}
		now = now.Add(DoubtHorizon + time.Second)
		d.wrote(key, uid)
		if len(d.m) != 1 {
			t.Errorf("%d doubts remembered after the horizon, want 1", len(d.m))
		}
	})
}

// reapLate deletes only a copy that is provably a late write in doubt:
// this cluster's, of the very object released under a deleting policy
// after a write of it was in doubt, not terminating; and never on a failed
// read.
func TestReapLate(t *testing.T) {
	target := Target{Connection: "p", GVK: widgetGVK, ProviderGVK: widgetGVK, Namespaced: true, ClusterUID: "cluster"}
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	copyOf := func(clusterUID string, objectUID types.UID) *unstructured.Unstructured {
		return widget("ns", "w", "p1", map[string]string{
			kbindv1alpha1.ConsumerClusterUIDAnnotation: clusterUID, kbindv1alpha1.ConsumerObjectUIDAnnotation: string(objectUID)})
	}
	terminating := copyOf("cluster", "c1")
	terminating.SetFinalizers([]string{"provider.example.com/hold"})
	terminating.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	releasedAfterDoubt := func(policy kbindv1alpha1.DeletionPolicy) func(*doubts) {
		return func(d *doubts) {
			d.wrote(key, "c1")
			d.released(key, "c1", policy)
		}
	}
	readFails := errors.New("the cache is not synced")
	cases := []struct {
		name    string
		doubts  func(*doubts)
		pobj    *unstructured.Unstructured // nil: no copy
		readErr error
		deleted string // the propagation it is deleted with; "" when it is not
	}{
		{"a late copy of an object released under Delete: deleted in the background", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), copyOf("cluster", "c1"), nil, "Background"},
		{"under Foreground: deleted so", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyForeground), copyOf("cluster", "c1"), nil, "Foreground"},
		{"the read fails: an error, nothing deleted", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), copyOf("cluster", "c1"), readFails, ""},
		{"no copy", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), nil, nil, ""},
		{"released under Orphan: kept", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyOrphan), copyOf("cluster", "c1"), nil, ""},
		{"no write in doubt: kept", func(d *doubts) { d.released(key, "c1", kbindv1alpha1.DeletionPolicyDelete) }, copyOf("cluster", "c1"), nil, ""},
		{"in doubt but never released (another sync's business): kept", func(d *doubts) { d.wrote(key, "c1") }, copyOf("cluster", "c1"), nil, ""},
		{"another object's copy: kept", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), copyOf("cluster", "c2"), nil, ""},
		{"another cluster's copy with the same object UID: kept", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), copyOf("other", "c1"), nil, ""},
		{"unmarked: kept", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), widget("ns", "w", "p1", nil), nil, ""},
		{"terminating already: left to finish", releasedAfterDoubt(kbindv1alpha1.DeletionPolicyDelete), terminating, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var deleted []string
			pb := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					o := (&client.DeleteOptions{}).ApplyOptions(opts)
					if o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != obj.GetUID() {
						t.Errorf("deleted without the copy's UID as precondition: %+v", o.Preconditions)
					}
					deleted = append(deleted, string(*o.PropagationPolicy))
					return c.Delete(ctx, obj, opts...)
				}})
			if tc.pobj != nil {
				pb = pb.WithObjects(tc.pobj.DeepCopy())
			}
			provider := pb.Build()
			d := &doubts{}
			tc.doubts(d)
			sess := &session.Session{Client: provider}
			s := &Syncer{reporter: reporter{target: target}, session: sess, doubts: d,
				releaser: &releaser{reporter: reporter{target: target}, session: sess, doubts: d}}
			get := func(ctx context.Context, pkey types.NamespacedName) (*unstructured.Unstructured, bool, error) {
				if tc.readErr != nil {
					return nil, false, tc.readErr
				}
				u := widget("", "", "", nil)
				if err := provider.Get(ctx, pkey, u); err != nil {
					return nil, false, client.IgnoreNotFound(err)
				}
				return u, true, nil
			}
			out, err := s.reapLateFrom(ctx, key, get)
			if !errors.Is(err, tc.readErr) || out != done {
				t.Errorf("reapLate = %v, %v; want done, %v", out, err, tc.readErr)
			}
			want := []string(nil)
			if tc.deleted != "" {
				want = []string{tc.deleted}
			}
			if fmt.Sprint(deleted) != fmt.Sprint(want) {
				t.Errorf("deleted with %v, want %v", deleted, want)
			}
		})
	}
}

// A release records the policy a late copy of the object is deleted
// under: the deleting ones; Orphan and a policy named by a typo keep it.
func TestReleaseRemembersTheDoubt(t *testing.T) {
	target := Target{Connection: "p", GVK: widgetGVK, ProviderGVK: widgetGVK, Namespaced: true, ClusterUID: "cluster"}
	cases := []struct {
		name        string
		annotations map[string]string
		def         kbindv1alpha1.DeletionPolicy
		want        kbindv1alpha1.DeletionPolicy // "": not deleted when it lands
	}{
		{"the default, Delete", nil, "", kbindv1alpha1.DeletionPolicyDelete},
		{"the binding's Foreground", nil, kbindv1alpha1.DeletionPolicyForeground, kbindv1alpha1.DeletionPolicyForeground},
		{"the binding's Orphan", nil, kbindv1alpha1.DeletionPolicyOrphan, ""},
		{"the annotation's Orphan", map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: "Orphan"}, kbindv1alpha1.DeletionPolicyDelete, ""},
		{"a typo: never guessed", map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: "orphan"}, kbindv1alpha1.DeletionPolicyDelete, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cobj := widget("ns", "w", "c1", tc.annotations, kbindv1alpha1.SyncerFinalizer)
			consumer := fake.NewClientBuilder().WithObjects(cobj.DeepCopy()).Build()
			d := &doubts{}
			key := client.ObjectKeyFromObject(cobj)
			d.wrote(key, "c1")
			r := &releaser{reporter: reporter{target: target, results: NewResults(nil)}, consumer: consumer,
				session: &session.Session{Client: fake.NewClientBuilder().Build()}, doubts: d}
			if err := consumer.Get(ctx, key, cobj); err != nil {
				t.Fatal(err)
			}
			if out, err := r.release(ctx, cobj, nil, false, tc.def, ""); err != nil || out != done {
				t.Fatalf("release = %v, %v", out, err)
			}
			if holdsFinalizer(t, consumer, cobj) {
				t.Fatal("the finalizer was kept")
			}
			policy, late := d.late(key, "c1")
			if late != (tc.want != "") || policy != tc.want {
				t.Errorf("late = %q, %v; want %q", policy, late, tc.want)
			}
		})
	}
}
