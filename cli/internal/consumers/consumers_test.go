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

package consumers

import (
	"reflect"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func at(ago time.Duration) *time.Time {
	t := now.Add(-ago)
	return &t
}

func TestLeaseStale(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Lease
		want bool
	}{
		{"renewed within its duration", Lease{RenewTime: at(30 * time.Second), DurationSeconds: 60}, false},
		{"older than its duration", Lease{RenewTime: at(61 * time.Second), DurationSeconds: 60}, true},
		{"no duration: the konnector's 60 s", Lease{RenewTime: at(59 * time.Second)}, false},
		{"marked stale by the backend, though fresh", Lease{RenewTime: at(time.Second), DurationSeconds: 60, StaleSince: "2026-12-02T09:59:00Z"}, true},
		{"never renewed", Lease{DurationSeconds: 60}, true},
	} {
		if got := leaseStale(tc.l, now); got != tc.want {
			t.Errorf("%s: stale %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStatusOf(t *testing.T) {
	live := Lease{RenewTime: at(time.Second)}
	stale := Lease{RenewTime: at(time.Hour), Stale: true}
	for _, tc := range []struct {
		name   string
		sa     bool
		leases []Lease
		want   Status
	}{
		{"granted, never connected", true, nil, StatusGranted},
		{"connected", true, []Lease{live}, StatusConnected},
		{"one of two Leases renews", true, []Lease{stale, live}, StatusConnected},
		{"stale", true, []Lease{stale}, StatusStale},
		{"revoked with a Lease left", false, []Lease{live}, StatusRevoked},
		{"revoked, no Lease", false, nil, StatusRevoked},
	} {
		if got := statusOf(tc.sa, tc.leases); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestHeartbeatCell(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leases []Lease
		want   string
	}{
		{"no Lease", nil, "-"},
		{"the newest renewal", []Lease{{RenewTime: at(time.Hour), Stale: true}, {RenewTime: at(4 * time.Second)}}, "4s"},
		{"stale", []Lease{{RenewTime: at(10 * time.Minute), Stale: true}}, "10m (stale)"},
		{"a renewal from the future (clock skew)", []Lease{{RenewTime: at(-time.Minute)}}, "0s"},
	} {
		if got := HeartbeatCell(heartbeatOf(tc.leases), now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTokenCell(t *testing.T) {
	inThreeDays, later := now.Add(72*time.Hour), now.Add(720*time.Hour)
	for _, tc := range []struct {
		name   string
		leases []Lease
		want   Token
		cell   string
	}{
		{"nothing said", []Lease{{}}, Token{}, "-"},
		{"an expiry", []Lease{{CredentialKind: "ClientCertificate", CredentialExpiry: &inThreeDays}},
			Token{Kind: "ClientCertificate", ExpiresAt: &inThreeDays}, "2026-12-05T10:00Z"},
		{"renews", []Lease{{CredentialKind: "ServiceAccountToken", CredentialExpiry: &later, CredentialRenews: true}},
			Token{Kind: "ServiceAccountToken", Renews: true}, "renews"},
		{"the earliest expiry that does not renew wins over one that renews", []Lease{
			{CredentialKind: "ServiceAccountToken", CredentialExpiry: &inThreeDays, CredentialRenews: true},
			{CredentialKind: "Token", CredentialExpiry: &later},
			{CredentialKind: "ClientCertificate", CredentialExpiry: &inThreeDays}},
			Token{Kind: "ClientCertificate", ExpiresAt: &inThreeDays}, "2026-12-05T10:00Z"},
		{"expired", []Lease{{CredentialKind: "Token", CredentialExpiry: at(time.Minute)}},
			Token{Kind: "Token", ExpiresAt: at(time.Minute)}, "expired 2026-12-02T09:59Z"},
		{"a kind that does not expire", []Lease{{CredentialKind: "Basic"}}, Token{Kind: "Basic"}, "-"},
	} {
		got := tokenOf(tc.leases)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if cell := TokenCell(got, now); cell != tc.cell {
			t.Errorf("%s: cell %q, want %q", tc.name, cell, tc.cell)
		}
	}
}

func TestAPIsOf(t *testing.T) {
	verbs := []string{"get"}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: verbs},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: verbs},
		{APIGroups: []string{"example.org"}, Resources: []string{"widgets", "gadgets", "widgets/status"}, Verbs: verbs},
		{APIGroups: []string{"other.io"}, Resources: []string{"things"}, Verbs: verbs},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: verbs},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: verbs},
		{APIGroups: []string{"example.org"}, Resources: []string{"widgets"}, Verbs: verbs}, // the ClusterRole's again
	}
	apis, related := apisOf(rules)
	if want := []string{"gadgets.example.org", "things.other.io", "widgets.example.org"}; !reflect.DeepEqual(apis, want) {
		t.Errorf("APIs %v, want %v", apis, want)
	}
	if want := []string{"configmaps", "secrets"}; !reflect.DeepEqual(related, want) {
		t.Errorf("related %v, want %v", related, want)
	}
	if apis, _ := apisOf(nil); apis == nil || len(apis) != 0 {
		t.Errorf("no rules: %#v, want an empty list (JSON [])", apis)
	}
}

func TestOwnersOf(t *testing.T) {
	ns := &Consumer{Name: "a", Mode: "Namespace", Namespace: "kbind-a"}
	prefixed := &Consumer{Name: "b", Mode: "Prefixed", Namespace: "b", Prefix: "b"}
	none := &Consumer{Name: "c", Mode: "None", Namespace: "kbind-c"}
	names := func(cs []*Consumer) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		candidates []*Consumer
		ns, want   string
	}{
		{[]*Consumer{none}, "anywhere", "c"},
		{[]*Consumer{ns, prefixed, none}, "kbind-a", "a"},
		{[]*Consumer{ns, prefixed, none}, "b-default", "b"},
		{[]*Consumer{ns, prefixed, none}, "b", "b"},
		{[]*Consumer{ns, prefixed, none}, "bb-default", "a,b,c"}, // "bb" is not b's: nobody claims it
		{[]*Consumer{ns, none}, "default", "a,c"},
	} {
		if got := names(ownersOf(tc.candidates, tc.ns)); got != tc.want {
			t.Errorf("copy in %q among %s: owners %s, want %s", tc.ns, names(tc.candidates), got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	three, seven := 3, 7
	expiry := now.Add(72 * time.Hour)
	l := List{Consumers: []Consumer{
		{Name: "a", Mode: "Namespace", Namespace: "kbind-a", APIs: []string{"widgets.example.org"}, Status: StatusConnected,
			Heartbeat: Heartbeat{LastRenewal: at(4 * time.Second)}, KonnectorVersions: []string{"0.4.0"}, Objects: &three,
			Token: Token{Kind: "ClientCertificate", ExpiresAt: &expiry}},
		{Name: "b", Mode: "Prefixed", Namespace: "b", Prefix: "b", APIs: []string{"widgets.example.org", "clusterwidgets.example.org"}, Status: StatusStale,
			Heartbeat: Heartbeat{LastRenewal: at(10 * time.Minute), Stale: true}, KonnectorVersions: []string{"0.3.2"}, Objects: &seven,
			Token: Token{Renews: true}},
		{Name: "c", Namespace: "kbind-c", APIs: []string{}, Status: StatusRevoked, Heartbeat: Heartbeat{LastRenewal: at(time.Hour), Stale: true},
			KonnectorVersions: []string{"unknown"}, Left: []string{"namespace kbind-c", "1 Lease", "2 copies"},
			Problems: []string{"counting its widgets.example.org copies: forbidden"}},
		{Name: "d", Mode: "None", Namespace: "kbind-d", APIs: []string{"widgets.example.org"}, Status: StatusGranted, KonnectorVersions: []string{}, Objects: new(int)},
	}}
	var b strings.Builder
	if err := WriteTable(&b, l, now); err != nil {
		t.Fatal(err)
	}
	want := `NAME   MODE        NAMESPACE/PREFIX   HEARTBEAT     KONNECTOR   APIS   OBJECTS   TOKEN               STATUS
a      Namespace   kbind-a            4s            0.4.0       1      3         2026-12-05T10:00Z   connected
b      Prefixed    b                  10m (stale)   0.3.2       2      7         renews              stale
c      -           kbind-c            60m (stale)   unknown     0      ?         -                   revoked (left: namespace kbind-c, 1 Lease, 2 copies)
d      None        kbind-d            -             -           1      0         -                   granted
problem: consumer c: counting its widgets.example.org copies: forbidden
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestLeftOf(t *testing.T) {
	two := 2
	c := Consumer{Leases: []Lease{{}}, Objects: &two, Granted: []ObjectRef{{Kind: "ClusterRole", Name: "kbind-consumer-c"}}}
	want := []string{"namespace kbind-c", "1 Lease", "ClusterRole kbind-consumer-c", "2 copies"}
	if got := leftOf(c, []string{"kbind-c"}); !reflect.DeepEqual(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	if got := leftOf(Consumer{}, nil); !reflect.DeepEqual(got, []string{"copies uncounted"}) {
		t.Errorf("uncounted: %v", got)
	}
}
