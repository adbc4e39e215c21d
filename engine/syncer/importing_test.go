package syncer

import "testing"

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
		{"deleted on the provider: the copy goes", ImportState{Scope: ImportOn, ConsumerExists: true, ConsumerImported: true, InSync: true}, ImportDelete},
		{"being deleted on the provider: the copy goes", ImportState{Scope: ImportOn, ProviderExists: true, ProviderDeleting: true, ConsumerExists: true, ConsumerImported: true}, ImportDelete},
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
