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
	"errors"
	"time"

	"github.com/kbind/kbind/engine/credentials"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/related"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/syncer"
)

// The defaults of Options, filled in by Setup for every field left zero
// (or negative). A package that is also an entry point of its own takes its
// defensive default from the same constant, so the value is written once.
const (
	DefaultProviderQPS                = 100
	DefaultProviderBurst              = 200
	DefaultProviderTimeout            = 30 * time.Second
	DefaultDiscoveryInterval          = 30 * time.Second
	DefaultRecheckInterval            = session.DefaultRecheck
	DefaultHeartbeatInterval          = heartbeat.Interval
	DefaultBindingResync              = 30 * time.Second
	DefaultWorkers                    = syncer.DefaultWorkers
	DefaultRelatedWatchesPerNamespace = related.DefaultWatchesPerNamespace
	DefaultCredentialExpiryWarning    = credentials.DefaultExpiryWarning
	DefaultVersion                    = "dev"
)

// Options configure the engine. Setup completes them (defaults), and the
// packages it wires receive complete values: the reconcilers default
// nothing; syncer.New and related.NewCopier, entry points of their own,
// keep a defensive default from the same constants.
type Options struct {
	// SecretNamespaces are the only namespaces kubeconfig Secrets are read
	// (and cached) from. Required.
	SecretNamespaces []string

	// ProviderQPS is the queries per second of every provider client.
	// Defaults to 100 (DefaultProviderQPS).
	ProviderQPS float32
	// ProviderBurst is the burst of every provider client. Defaults to 200
	// (DefaultProviderBurst).
	ProviderBurst int
	// ProviderTimeout bounds every provider request. Defaults to 30s
	// (DefaultProviderTimeout).
	ProviderTimeout time.Duration
	// DisableProviderCompression refuses gzip-compressed provider
	// responses (lists, streamed watch lists): more bandwidth, less CPU on
	// both sides, for a provider that is near. Defaults to false.
	DisableProviderCompression bool

	// DiscoveryInterval is how often each Connection re-reads its exports
	// (from a watch for the CRD source). Defaults to 30s
	// (DefaultDiscoveryInterval).
	DiscoveryInterval time.Duration
	// RecheckInterval is how often a working Connection re-reads the
	// provider's identity and lists its exports directly. Defaults to 10m
	// (DefaultRecheckInterval).
	RecheckInterval time.Duration
	// HeartbeatInterval is how often Leases are renewed. Defaults to 30s
	// (DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// BindingResync is how often every binding is re-checked. Defaults to
	// 30s (DefaultBindingResync).
	BindingResync time.Duration
	// Workers is the number of sync workers per bound API. Defaults to 4
	// (DefaultWorkers).
	Workers int
	// RelatedWatchesPerNamespace bounds the related-resource watches (source
	// informers) the bindings of one consumer namespace hold, the
	// ClusterBindings counting as one namespace; an entry over it copies
	// nothing and its binding says so. Defaults to 512
	// (DefaultRelatedWatchesPerNamespace).
	RelatedWatchesPerNamespace int

	// InCluster is true when the konnector runs in a Pod; it sharpens
	// messages about loopback provider addresses. Defaults to false.
	InCluster bool

	// CredentialExpiryWarning is how long before a credential that is not
	// renewed expires the Connection reports it (CredentialsExpiring, an
	// Event; at the latest when a fifth of its lifetime is left). Defaults
	// to 7 days (DefaultCredentialExpiryWarning).
	CredentialExpiryWarning time.Duration
	// Version is the konnector's version, written on each Connection's
	// status and heartbeat Lease. Defaults to "dev" (DefaultVersion).
	Version string
}

// defaults fills every field left zero (or negative) with its default,
// the only place the engine defaults its options; it fails on a missing
// required field.
func (o *Options) defaults() error {
	if len(o.SecretNamespaces) == 0 {
		return errors.New("engine: at least one Secret namespace is required")
	}
	orDefault(&o.ProviderQPS, DefaultProviderQPS)
	orDefault(&o.ProviderBurst, DefaultProviderBurst)
	orDefault(&o.ProviderTimeout, DefaultProviderTimeout)
	orDefault(&o.DiscoveryInterval, DefaultDiscoveryInterval)
	orDefault(&o.RecheckInterval, DefaultRecheckInterval)
	orDefault(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	orDefault(&o.BindingResync, DefaultBindingResync)
	orDefault(&o.Workers, DefaultWorkers)
	orDefault(&o.RelatedWatchesPerNamespace, DefaultRelatedWatchesPerNamespace)
	orDefault(&o.CredentialExpiryWarning, DefaultCredentialExpiryWarning)
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	return nil
}

// orDefault sets *v to def when it is zero or negative.
func orDefault[T ~int | ~int64 | ~float32](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
