package syncer

import "testing"

func TestDecideImport(t *testing.T) {
	cases := []struct {
		name string
		s    ImportState
		want ImportAction
	}{
		{"nothing on either side", ImportState{}, ImportNothing},
		{"a provider object, no consumer object: created", ImportState{ProviderExists: true}, ImportCreate},
		{"a copy of a consumer object is never imported", ImportState{ProviderExists: true, ProviderMarked: true}, ImportNothing},
		{"a copy of a consumer object where an imported copy is: left to the ordinary flow", ImportState{ProviderExists: true, ProviderMarked: true, ConsumerExists: true, ConsumerImported: true}, ImportNothing},
		{"a consumer object of the user's holds the name: conflict, untouched", ImportState{ProviderExists: true, ConsumerExists: true}, ImportConflict},
		{"the imported copy follows", ImportState{ProviderExists: true, ConsumerExists: true, ConsumerImported: true, InSync: true}, ImportNothing},
		{"a consumer edit is reverted", ImportState{ProviderExists: true, ConsumerExists: true, ConsumerImported: true}, ImportUpdate},
		{"deleted on the consumer: created again once gone", ImportState{ProviderExists: true, ConsumerExists: true, ConsumerImported: true, ConsumerDeleting: true}, ImportNothing},
		{"deleted on the provider: the copy goes", ImportState{ConsumerExists: true, ConsumerImported: true, InSync: true}, ImportDelete},
		{"being deleted on the provider: the copy goes", ImportState{ProviderExists: true, ProviderDeleting: true, ConsumerExists: true, ConsumerImported: true}, ImportDelete},
		{"deleted on the provider, the copy already going", ImportState{ConsumerExists: true, ConsumerImported: true, ConsumerDeleting: true}, ImportNothing},
		{"deleted on the provider: a user's object is never deleted", ImportState{ConsumerExists: true}, ImportNothing},
	}
	for _, tc := range cases {
		if got := DecideImport(tc.s); got != tc.want {
			t.Errorf("%s: DecideImport = %s, want %s", tc.name, got, tc.want)
		}
	}
}
