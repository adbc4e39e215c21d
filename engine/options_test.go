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

package engine

import (
	"reflect"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	ns := []string{"kbind"}
	all := Options{
		SecretNamespaces:           ns,
		ProviderQPS:                DefaultProviderQPS,
		ProviderBurst:              DefaultProviderBurst,
		ProviderTimeout:            DefaultProviderTimeout,
		DiscoveryInterval:          DefaultDiscoveryInterval,
		RecheckInterval:            DefaultRecheckInterval,
		HeartbeatInterval:          DefaultHeartbeatInterval,
		BindingResync:              DefaultBindingResync,
		Workers:                    DefaultWorkers,
		RelatedWatchesPerNamespace: DefaultRelatedWatchesPerNamespace,
		CredentialExpiryWarning:    DefaultCredentialExpiryWarning,
		Version:                    DefaultVersion,
	}
	set := Options{
		SecretNamespaces: []string{"a", "b"}, ProviderQPS: 5, ProviderBurst: 6, ProviderTimeout: time.Second,
		DisableProviderCompression: true, DiscoveryInterval: 2 * time.Second, RecheckInterval: 3 * time.Second,
		HeartbeatInterval: 4 * time.Second, BindingResync: 5 * time.Second, Workers: 1, RelatedWatchesPerNamespace: 7,
		InCluster: true, CredentialExpiryWarning: time.Hour, Version: "v1.2.3",
	}
	cases := []struct {
		name    string
		in      Options
		want    Options
		wantErr bool
	}{
		{name: "zero: every default", in: Options{SecretNamespaces: ns}, want: all},
		{name: "negative: every default", in: Options{
			SecretNamespaces: ns, ProviderQPS: -1, ProviderBurst: -1, ProviderTimeout: -1, DiscoveryInterval: -1,
			RecheckInterval: -1, HeartbeatInterval: -1, BindingResync: -1, Workers: -1, RelatedWatchesPerNamespace: -1,
			CredentialExpiryWarning: -1,
		}, want: all},
		{name: "set: kept", in: set, want: set},
		{name: "no Secret namespace", in: Options{}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in
			err := got.defaults()
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("defaults:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestDefaultValues pins the values the Options docs and the konnector's
// flag help state.
func TestDefaultValues(t *testing.T) {
	for name, tc := range map[string]struct{ got, want any }{
		"ProviderQPS":                {float32(DefaultProviderQPS), float32(100)},
		"ProviderBurst":              {DefaultProviderBurst, 200},
		"ProviderTimeout":            {DefaultProviderTimeout, 30 * time.Second},
		"DiscoveryInterval":          {DefaultDiscoveryInterval, 30 * time.Second},
		"RecheckInterval":            {DefaultRecheckInterval, 10 * time.Minute},
		"HeartbeatInterval":          {DefaultHeartbeatInterval, 30 * time.Second},
		"BindingResync":              {DefaultBindingResync, 30 * time.Second},
		"Workers":                    {DefaultWorkers, 4},
		"RelatedWatchesPerNamespace": {DefaultRelatedWatchesPerNamespace, 512},
		"CredentialExpiryWarning":    {DefaultCredentialExpiryWarning, 7 * 24 * time.Hour},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: default %v, want %v", name, tc.got, tc.want)
		}
	}
}
