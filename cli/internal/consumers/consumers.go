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

// Package consumers is the provider operator's view of every consumer
// (kubectl kbind consumers, docs/cli.md#consumers): who was granted what
// (the objects grant labelled kbind.io/consumer), whether and how it
// heartbeats (what its konnectors wrote on their heartbeat Leases: version,
// provider user, credential kind and expiry — never a credential) and how
// many provider copies it holds. The decisions and the formatting are pure
// functions (this file, table.go); gather.go does the reading.
package consumers

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

// ListVersion identifies the JSON/YAML schema of List (docs/cli.md#consumers).
const ListVersion = "consumers.kbind.io/v1"

// List is what kubectl kbind consumers prints with -o json|yaml.
type List struct {
	Version   string     `json:"version"`
	Consumers []Consumer `json:"consumers"`
	// Problems are reads that failed: what they would have shown is
	// missing (never guessed) from Consumers.
	Problems []string `json:"problems,omitempty"`
}

// Status is a consumer's state on the provider.
type Status string

// The statuses, in the order a consumer goes through them.
const (
	// StatusGranted: granted, but no konnector ever heartbeat (no Lease).
	StatusGranted Status = "granted"
	// StatusConnected: some Lease of it renews.
	StatusConnected Status = "connected"
	// StatusStale: it has Leases and none renews.
	StatusStale Status = "stale"
	// StatusRevoked: its ServiceAccount is gone, but something labelled
	// for it is left (Left names what).
	StatusRevoked Status = "revoked"
)

// Consumer is one consumer of the provider.
type Consumer struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Mode is the isolation mode grant recorded: Namespace, Prefixed or
	// None; "" when unknown (a revoked consumer not Prefixed, or granted
	// by a kubectl-kbind that did not record it).
	Mode string `json:"mode,omitempty"`
	// Namespace is its own provider namespace (the prefix under Prefixed).
	Namespace string `json:"namespace,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	// ServiceAccount is "<namespace>/<name>"; absent once revoked.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// APIs are the granted APIs (<plural>.<group>, sorted), read from its
	// Role and ClusterRole; Related the related kinds it may copy.
	APIs    []string `json:"apis"`
	Related []string `json:"related,omitempty"`
	// Heartbeat is the newest renewal of its Leases.
	Heartbeat Heartbeat `json:"heartbeat"`
	// KonnectorVersions are the versions its konnectors wrote on their
	// Leases, sorted ("unknown" for a Lease without one).
	KonnectorVersions []string `json:"konnectorVersions"`
	Token             Token    `json:"token"`
	// Objects is the number of provider copies labelled with the consumer
	// cluster UIDs of its Leases, over its APIs; absent when some count
	// failed (Problems says which).
	Objects *int        `json:"objects,omitempty"`
	Copies  []CopyCount `json:"copies"`
	Leases  []Lease     `json:"leases"`
	// Granted are the objects grant made that exist (ServiceAccount,
	// roles, bindings, admission policy), by kind and name.
	Granted []ObjectRef `json:"granted"`
	// NeverGranted marks a consumer cluster that heartbeats here without
	// a grant: its Leases are in no granted consumer's namespace (it
	// connected with credentials kubectl kbind grant did not make). Its
	// name is its consumer cluster UID; its status is connected or stale.
	NeverGranted bool `json:"neverGranted,omitempty"`
	// Left names what is left of a revoked consumer.
	Left     []string `json:"left,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// Heartbeat is the newest renewal of a consumer's Leases.
type Heartbeat struct {
	// LastRenewal is the newest spec.renewTime; absent without Leases.
	LastRenewal *time.Time `json:"lastRenewal,omitempty"`
	// Stale: no Lease renews (each is older than its duration, or the
	// backend marked it stale).
	Stale bool `json:"stale"`
}

// Token is what the konnectors say of the consumer's credential.
type Token struct {
	// Kind is the credential kind of the Lease the rest is read from.
	Kind string `json:"kind,omitempty"`
	// ExpiresAt is the earliest expiry of a credential that does not
	// renew; absent when none expires (or none says).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Renews: the konnector renews it (and nothing else expires).
	Renews bool `json:"renews,omitempty"`
}

// Lease is one heartbeat Lease of a consumer, with what its konnector
// wrote on it.
type Lease struct {
	Namespace          string     `json:"namespace"`
	Name               string     `json:"name"`
	Holder             string     `json:"holder,omitempty"`
	ConsumerClusterUID string     `json:"consumerClusterUID,omitempty"`
	Connection         string     `json:"connection,omitempty"`
	RenewTime          *time.Time `json:"renewTime,omitempty"`
	DurationSeconds    int32      `json:"durationSeconds"`
	// StaleSince is the backend's mark, when set.
	StaleSince       string     `json:"staleSince,omitempty"`
	Stale            bool       `json:"stale"`
	KonnectorVersion string     `json:"konnectorVersion,omitempty"`
	APIVersion       string     `json:"apiVersion,omitempty"`
	ProviderUser     string     `json:"providerUser,omitempty"`
	CredentialKind   string     `json:"credentialKind,omitempty"`
	CredentialExpiry *time.Time `json:"credentialExpiry,omitempty"`
	CredentialRenews bool       `json:"credentialRenews,omitempty"`
}

// CopyCount is how many provider copies of one API a consumer holds in
// one namespace ("" for cluster-scoped copies).
type CopyCount struct {
	API       string `json:"api"`
	Namespace string `json:"namespace,omitempty"`
	Count     int    `json:"count"`
}

// ObjectRef names an object grant made.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// defaultLeaseDuration is the konnector's (engine/heartbeat) when a Lease
// says none.
const defaultLeaseDuration = 60 * time.Second

// leaseStale: older than its duration, or marked stale by the backend.
func leaseStale(l Lease, now time.Time) bool {
	if l.StaleSince != "" || l.RenewTime == nil {
		return true
	}
	d := time.Duration(l.DurationSeconds) * time.Second
	if d <= 0 {
		d = defaultLeaseDuration
	}
	return now.Sub(*l.RenewTime) > d
}

// heartbeatOf is the newest renewal of leases, stale when none is live.
func heartbeatOf(leases []Lease) Heartbeat {
	h := Heartbeat{Stale: true}
	for _, l := range leases {
		if l.RenewTime != nil && (h.LastRenewal == nil || l.RenewTime.After(*h.LastRenewal)) {
			t := *l.RenewTime
			h.LastRenewal = &t
		}
		if !l.Stale {
			h.Stale = false
		}
	}
	if len(leases) == 0 {
		h.Stale = false
	}
	return h
}

// statusOf decides a consumer's status: revoked once its ServiceAccount is
// gone, granted while it has no Lease, connected while one renews.
func statusOf(hasServiceAccount bool, leases []Lease) Status {
	switch {
	case !hasServiceAccount:
		return StatusRevoked
	case len(leases) == 0:
		return StatusGranted
	case heartbeatOf(leases).Stale:
		return StatusStale
	}
	return StatusConnected
}

// tokenOf: the earliest expiry of a credential that does not renew wins
// (it is the one to act on); else "renews" when a konnector renews it.
func tokenOf(leases []Lease) Token {
	var t Token
	for _, l := range leases {
		if l.CredentialRenews || l.CredentialExpiry == nil {
			continue
		}
		if t.ExpiresAt == nil || l.CredentialExpiry.Before(*t.ExpiresAt) {
			e := *l.CredentialExpiry
			t = Token{Kind: l.CredentialKind, ExpiresAt: &e}
		}
	}
	if t.ExpiresAt != nil {
		return t
	}
	for _, l := range leases {
		if l.CredentialRenews {
			return Token{Kind: l.CredentialKind, Renews: true}
		}
	}
	for _, l := range leases {
		if l.CredentialKind != "" {
			return Token{Kind: l.CredentialKind}
		}
	}
	return t
}

// versionsOf are the distinct konnector versions of leases.
func versionsOf(leases []Lease) []string {
	out := []string{}
	for _, l := range leases {
		v := l.KonnectorVersion
		if v == "" {
			v = "unknown"
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// notAPIGroups are the groups of grant's rules that are no bound API: the
// provider identity and namespaces, Events and related kinds (core), the
// heartbeat (coordination) and the CRD reads.
var notAPIGroups = []string{"", "coordination.k8s.io", "apiextensions.k8s.io"}

// apisOf reads the granted APIs (<plural>.<group>) and related kinds from
// a consumer's Role and ClusterRole rules.
func apisOf(rules []rbacv1.PolicyRule) (apis, related []string) {
	apis, related = []string{}, nil
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				switch {
				case strings.Contains(res, "/"):
				case g == "" && (res == "secrets" || res == "configmaps"):
					if !slices.Contains(related, res) {
						related = append(related, res)
					}
				case !slices.Contains(notAPIGroups, g):
					if name := res + "." + g; !slices.Contains(apis, name) {
						apis = append(apis, name)
					}
				}
			}
		}
	}
	sort.Strings(apis)
	sort.Strings(related)
	return apis, related
}

// claims reports whether a consumer's isolation places copies in namespace
// ns: its own namespace (Namespace), one of its prefix's (Prefixed). None
// (and an unknown mode) claims no namespace in particular.
func claims(c Consumer, ns string) bool {
	switch kbindv1alpha1.IsolationMode(c.Mode) {
	case kbindv1alpha1.IsolationNamespace:
		return ns == c.Namespace
	case kbindv1alpha1.IsolationPrefixed:
		return c.Prefix != "" && access.Covers(c.Prefix, ns)
	}
	return false
}

// ownersOf picks, among the consumers whose Leases carry a copy's consumer
// cluster UID (one consumer cluster may be onboarded as several
// consumers), the ones the copy belongs to: those whose isolation claims
// its namespace, else all of them (a None consumer's copies are anywhere).
func ownersOf(candidates []*Consumer, ns string) []*Consumer {
	if len(candidates) < 2 {
		return candidates
	}
	var out []*Consumer
	for _, c := range candidates {
		if claims(*c, ns) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return candidates
	}
	return out
}

// leftOf names what is left of a revoked consumer.
func leftOf(c Consumer, namespaces []string) []string {
	var out []string
	for _, ns := range namespaces {
		out = append(out, "namespace "+ns)
	}
	if n := len(c.Leases); n > 0 {
		out = append(out, plural(n, "Lease"))
	}
	for _, r := range c.Granted {
		out = append(out, r.Kind+" "+placeString(r.Namespace, r.Name))
	}
	if c.Objects != nil && *c.Objects > 0 {
		out = append(out, plural(*c.Objects, "copy"))
	} else if c.Objects == nil {
		out = append(out, "copies uncounted")
	}
	return out
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return strconv.Itoa(n) + " " + strings.TrimSuffix(noun, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func placeString(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
