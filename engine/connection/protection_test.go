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

package connection

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

func TestHoldDeletionOfAConnection(t *testing.T) {
	cases := []struct {
		name                         string
		deleting, protected, holding bool
		want                         bool
	}{
		{"live, protected: nothing to hold", false, true, true, false},
		{"deleting, unprotected: the deletion proceeds", true, false, true, false},
		{"deleting, protected: held", true, true, true, true},
		{"deleting, protected, the finalizer gone: nothing holds it", true, true, false, false},
	}
	for _, tc := range cases {
		if got := holdDeletion(tc.deleting, tc.protected, tc.holding); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

// A held Connection says DeletionProtected in Ready, with what its
// deletion would take and the way forward, and works as before: its
// session serves the bindings when it would be Ready without the hold.
func TestHeldConnectionConditions(t *testing.T) {
	working := observation{probed: true, verified: true, published: true, discovery: &kbindschema.Result{Source: kbindv1alpha1.ActiveSchemaSourceCRD},
		held: true, autoBinding: "p", referencing: []string{"ClusterBinding p", "Binding ns/b (protected: set its spec.deletionProtection to false, then delete it)"}}
	broken := observation{probed: true, identityErr: errors.New("connection refused"), held: true}
	cases := []struct {
		name  string
		obs   observation
		want  []string
		works bool
	}{
		{"working", working, []string{
			"deletion held: spec.deletionProtection is true, so no binding is drained, no session retired and nothing deleted; it works as before;",
			"its deletion would delete its autoBind ClusterBinding p",
			"wait for the 2 binding(s) referencing it to be deleted: ClusterBinding p, Binding ns/b (protected",
			"set spec.deletionProtection to false to let the deletion proceed (a Terminating Connection cannot be revived)",
		}, true},
		{"not ready under the hold: it says why, and serves nothing", broken, []string{
			"it works as before, and is not ready: Pending: reading the provider cluster identity failed: connection refused",
		}, false},
	}
	for _, tc := range cases {
		conds := desiredConditions(tc.obs)
		var ready string
		for _, c := range conds {
			if c.Type == kbindv1alpha1.ConditionReady {
				if c.Status != metav1.ConditionFalse || c.Reason != kbindv1alpha1.ReasonDeletionProtected {
					t.Errorf("%s: Ready %+v", tc.name, c)
				}
				ready = c.Message
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(ready, w) {
				t.Errorf("%s: Ready %q\nlacks %q", tc.name, ready, w)
			}
		}
		if got := works(tc.obs, conds); got != tc.works {
			t.Errorf("%s: works %t, want %t", tc.name, got, tc.works)
		}
		if d := decide(tc.obs, works(tc.obs, conds)); d.useSession != tc.works {
			t.Errorf("%s: useSession %t, want %t", tc.name, d.useSession, tc.works)
		}
	}
	// Without the hold, the same Connection is Ready.
	live := working
	live.held = false
	if conds := desiredConditions(live); !isReady(conds) || !works(live, conds) {
		t.Errorf("live: %+v", conds)
	}
}

func TestDesiredAutoBindingCarriesProtection(t *testing.T) {
	for _, protected := range []bool{false, true} {
		conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kbindv1alpha1.ConnectionSpec{DeletionProtection: protected}}
		if got := desiredAutoBinding(conn, nil).Spec.DeletionProtection; got != protected {
			t.Errorf("Connection protected %t: autoBind ClusterBinding protected %t", protected, got)
		}
	}
}

func TestProtectionNote(t *testing.T) {
	b := func(protected, deleting bool) kbindv1alpha1.BindingObject {
		cb := &kbindv1alpha1.ClusterBinding{Spec: kbindv1alpha1.BindingSpec{DeletionProtection: protected}}
		if deleting {
			now := metav1.Now()
			cb.DeletionTimestamp = &now
		}
		return cb
	}
	cases := []struct {
		name              string
		protected, delete bool
		want              string
	}{
		{"unprotected", false, false, ""},
		{"unprotected, deleting", false, true, ""},
		{"protected", true, false, " (protected: set its spec.deletionProtection to false, then delete it)"},
		{"protected, its deletion held", true, true, " (its deletion is held by its spec.deletionProtection: set it to false to let the deletion proceed)"},
	}
	for _, tc := range cases {
		if got := protectionNote(b(tc.protected, tc.delete)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
