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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestDecideImport(t *testing.T) {
	cases := []struct {
		name string
		s    ImportState
		want ImportAction
	}{
		{"nothing on either side", ImportState{Scope: ImportOn}, ImportNothing},
		{"a provider object, no consumer object: created", ImportState{Scope: ImportOn, ProviderExists: true}, ImportCreate},
		{"a copy of a consumer object is never imported", ImportState{Scope: ImportOn, ProviderExists: true, ProviderMarked: true}, ImportNothing},
		{"a copy of a consumer object where an imported copy is: left to the ordinary flow", ImportState{Scope: ImportOn, ProviderExists: true, ProviderMarked: true, ConsumerExists: true, ConsumerImported: true}, ImportNothing},
		{"a consumer object of the user's holds the name: conflict, untouched", ImportState{Scope: ImportOn, ProviderExists: true, ConsumerExists: true}, ImportConflict},
		{"the imported copy follows", ImportState{Scope: ImportOn, ProviderExists: true, ConsumerExists: true, ConsumerImported: true, InSync: true}, ImportNothing},
		{"a consumer edit is reverted", ImportState{Scope: ImportOn, ProviderExists: true, ConsumerExists: true, ConsumerImported: true}, ImportUpdate},
		{"deleted on the consumer: created again once gone", ImportState{Scope: ImportOn, ProviderExists: true, ConsumerExists: true, ConsumerImported: true, ConsumerDeleting: true}, ImportNothing},
		{"deleted on the provider, absence confirmed: the copy goes", ImportState{Scope: ImportOn, ConsumerExists: true, ConsumerImported: true, InSync: true, AbsenceConfirmed: true}, ImportDelete},
		{"being deleted on the provider, confirmed: the copy goes", ImportState{Scope: ImportOn, ProviderExists: true, ProviderDeleting: true, ConsumerExists: true, ConsumerImported: true, AbsenceConfirmed: true}, ImportDelete},
		{"deleted on the provider, not for the window yet: the copy is kept", ImportState{Scope: ImportOn, ConsumerExists: true, ConsumerImported: true, InSync: true}, ImportAwaitAbsence},
		{"being deleted on the provider, not for the window yet: kept", ImportState{Scope: ImportOn, ProviderExists: true, ProviderDeleting: true, ConsumerExists: true, ConsumerImported: true}, ImportAwaitAbsence},
		{"back on the provider (a restore, a new UID): the same copy follows it", ImportState{Scope: ImportOn, ProviderExists: true, ConsumerExists: true, ConsumerImported: true, AbsenceConfirmed: true}, ImportUpdate},
		{"gone on the provider, confirmed: a user's object is never deleted", ImportState{Scope: ImportOn, ConsumerExists: true, AbsenceConfirmed: true}, ImportNothing},
		{"deleted on the provider, the copy already going", ImportState{Scope: ImportOn, ConsumerExists: true, ConsumerImported: true, ConsumerDeleting: true}, ImportNothing},
		{"deleted on the provider: a user's object is never deleted", ImportState{Scope: ImportOn, ConsumerExists: true}, ImportNothing},
		{"unscoped (binding going, filters not parsing): an imported copy is left", ImportState{Scope: ImportUnscoped, ConsumerExists: true, ConsumerImported: true}, ImportNothing},
		{"unscoped: nothing is imported", ImportState{Scope: ImportUnscoped, ProviderExists: true}, ImportNothing},
		{"unscoped, even with the provider object gone: the copy is left", ImportState{Scope: ImportUnscoped, ConsumerExists: true, ConsumerImported: true, ProviderDeleting: true}, ImportNothing},
		{"Import turned off: the imported copy is removed", ImportState{Scope: ImportOff, ProviderExists: true, ConsumerExists: true, ConsumerImported: true, InSync: true}, ImportDelete},
		{"Import off: nothing is imported", ImportState{Scope: ImportOff, ProviderExists: true}, ImportNothing},
		{"Import off: a user's object is never deleted", ImportState{Scope: ImportOff, ProviderExists: true, ConsumerExists: true}, ImportNothing},
		{"Import off, the copy already going", ImportState{Scope: ImportOff, ConsumerExists: true, ConsumerImported: true, ConsumerDeleting: true}, ImportNothing},
	}
	for _, tc := range cases {
		if got := DecideImport(tc.s); got != tc.want {
			t.Errorf("%s: DecideImport = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestAbsenceLasted(t *testing.T) {
	const window = 30 * time.Second
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		since     time.Time
		now       time.Time
		confirmed bool
		wait      time.Duration
	}{
		{"first seen now: wait the whole window", t0, t0, false, window},
		{"within the window: wait the rest", t0, t0.Add(10 * time.Second), false, 20 * time.Second},
		{"just before the end: not yet", t0, t0.Add(window - time.Nanosecond), false, time.Nanosecond},
		{"the window passed: confirmed", t0, t0.Add(window), true, 0},
		{"long gone: confirmed", t0, t0.Add(time.Hour), true, 0},
		{"a clock that went back: the window starts again", t0.Add(time.Minute), t0, false, window},
	}
	for _, tc := range cases {
		confirmed, wait := AbsenceLasted(tc.since, tc.now, window)
		if confirmed != tc.confirmed || wait != tc.wait {
			t.Errorf("%s: AbsenceLasted = %v, %s; want %v, %s", tc.name, confirmed, wait, tc.confirmed, tc.wait)
		}
	}
}

func TestAbsences(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	a := &absences{window: time.Minute, clock: func() time.Time { return now }}
	k := types.NamespacedName{Namespace: "team-a", Name: "db"}
	if since, first := a.observe(k); !first || !since.Equal(now) {
		t.Fatalf("first observe = %s, %v", since, first)
	}
	t0 := now
	now = now.Add(20 * time.Second)
	if since, first := a.observe(k); first || !since.Equal(t0) {
		t.Errorf("second observe = %s, %v; want the first sighting %s", since, first, t0)
	}
	a.forget(k) // seen again on the provider
	if since, first := a.observe(k); !first || !since.Equal(now) {
		t.Errorf("observe after forget = %s, %v; want a new window from %s", since, first, now)
	}
}
