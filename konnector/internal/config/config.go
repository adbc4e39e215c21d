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

// Package config turns the konnector's flags, KBIND_* environment variables
// and optional config file into one validated Config. Every option has the
// same name in all three places: flag --provider-qps, environment
// KBIND_PROVIDER_QPS, config file key provider-qps. Precedence: flag, then
// environment, then file, then default. The loading itself (precedence, the
// file's unknown keys, the help text) is flagconfig's; this package declares
// the options, maps them into Config, completes and validates it.
package config

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/flagconfig"
	"github.com/kbind/kbind/flagconfig/buildinfo"
)

// EnvPrefix prefixes every environment variable.
const EnvPrefix = "KBIND"

// Config is the konnector's configuration.
type Config struct {
	// Kubeconfig of the consumer cluster; empty means in-cluster config.
	Kubeconfig string
	// Namespace the konnector runs in (leader election Lease, Events).
	Namespace string
	// SecretNamespaces are the only namespaces kubeconfig Secrets are read
	// from (and the only ones whose Secrets are cached).
	SecretNamespaces []string

	ProviderQPS     float32
	ProviderBurst   int
	ProviderTimeout time.Duration
	// ProviderCompression asks the provider for gzip-compressed responses.
	ProviderCompression bool
	ConsumerQPS         float32
	ConsumerBurst       int

	DiscoveryInterval time.Duration
	RecheckInterval   time.Duration
	BindingResync     time.Duration
	HeartbeatInterval time.Duration
	// CredentialExpiryWarning is how long before a credential that is not
	// renewed expires the Connection warns.
	CredentialExpiryWarning time.Duration
	Workers                 int
	// RelatedWatchesPerNamespace bounds the related-resource watches of
	// one consumer namespace's bindings.
	RelatedWatchesPerNamespace int

	MetricsAddr string
	ProbeAddr   string
	PprofAddr   string

	LeaderElect             bool
	LeaderElectionNamespace string

	// LogVerbosity is how much the konnector logs (--log-level): 0 what an
	// operator acts on (info), 1 every sync decision (debug), more above.
	LogVerbosity int
}

// option keys; flag names, config file keys and (upper-cased, - → _,
// prefixed) environment variable names.
const (
	keyKubeconfig              = "kubeconfig"
	keyNamespace               = "namespace"
	keySecretNamespaces        = "secret-namespaces"
	keyProviderQPS             = "provider-qps"
	keyProviderBurst           = "provider-burst"
	keyProviderTimeout         = "provider-timeout"
	keyProviderCompression     = "provider-compression"
	keyConsumerQPS             = "consumer-qps"
	keyConsumerBurst           = "consumer-burst"
	keyDiscoveryInterval       = "discovery-interval"
	keyRecheckInterval         = "recheck-interval"
	keyBindingResync           = "binding-resync"
	keyHeartbeatInterval       = "heartbeat-interval"
	keyCredentialExpiryWarning = "credential-expiry-warning"
	keyWorkers                 = "workers"
	keyRelatedWatches          = "related-watches-per-namespace"
	keyMetricsAddr             = "metrics-bind-address"
	keyProbeAddr               = "health-probe-bind-address"
	keyPprofAddr               = "pprof-bind-address"
	keyLeaderElect             = "leader-elect"
	keyLeaderElectionNamespace = "leader-election-namespace"
	keyLogLevel                = "log-level"
)

// DefaultNamespace is the konnector's namespace when none is configured.
const DefaultNamespace = "kbind"

// FlagSet declares every option with its default and help text; the
// engine's options default to the engine's own defaults (engine.Default*).
func FlagSet(name string) *pflag.FlagSet {
	fs := flagconfig.NewFlagSet(name, "provider-qps: 50")
	fs.String(keyKubeconfig, "", "Kubeconfig of the consumer cluster. Empty: in-cluster configuration.")
	fs.String(keyNamespace, DefaultNamespace, "Namespace the konnector runs in (leader election, Events).")
	fs.StringSlice(keySecretNamespaces, nil, "Namespaces kubeconfig Secrets may be read from; Secrets are cached only there. Empty: the konnector namespace.")
	fs.Float32(keyProviderQPS, engine.DefaultProviderQPS, "Queries per second of each provider client.")
	fs.Int(keyProviderBurst, engine.DefaultProviderBurst, "Burst of each provider client.")
	fs.Duration(keyProviderTimeout, engine.DefaultProviderTimeout, "Timeout of each provider request.")
	fs.Bool(keyProviderCompression, true, "Accept gzip-compressed responses from the provider (lists and streamed watch lists): less bandwidth across a WAN, more CPU on both sides. false where the provider is near.")
	fs.Float32(keyConsumerQPS, 100, "Queries per second of the consumer client.")
	fs.Int(keyConsumerBurst, 200, "Burst of the consumer client.")
	fs.Duration(keyDiscoveryInterval, engine.DefaultDiscoveryInterval, "How often each Connection re-reads the provider's exported APIs (from a watch for the CRD source, without a request).")
	fs.Duration(keyRecheckInterval, engine.DefaultRecheckInterval, "How often a working Connection re-reads the provider's identity and lists its exports directly, as a backstop to the watches (a failed heartbeat re-reads the identity at once).")
	fs.Duration(keyBindingResync, engine.DefaultBindingResync, "How often every ClusterBinding and Binding is re-checked, as a backstop to watches; also how long a deselection persists before it is released (twice this) and how long an imported object's absence lasts before its copy goes.")
	fs.Duration(keyHeartbeatInterval, engine.DefaultHeartbeatInterval, "How often each Connection's heartbeat Lease on the provider is renewed (leaseDurationSeconds stays 60).")
	fs.Duration(keyCredentialExpiryWarning, engine.DefaultCredentialExpiryWarning, "How long before a provider credential the konnector does not renew (a client certificate, a token that is not a ServiceAccount token, a renewal that keeps failing) expires the Connection reports CredentialsExpiring=True and an Event; at the latest when a fifth of its lifetime is left.")
	fs.Int(keyWorkers, engine.DefaultWorkers, "Sync workers per bound API.")
	fs.Int(keyRelatedWatches, engine.DefaultRelatedWatchesPerNamespace, "Most related-resource watches the bindings of one namespace may hold (the ClusterBindings count as one namespace): a label selector is one, each name or referenced object one; an entry over it copies nothing, and its binding says so.")
	fs.String(keyMetricsAddr, ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.String(keyProbeAddr, ":8081", "Address of /healthz and /readyz.")
	fs.String(keyPprofAddr, "0", "Address of Go's /debug/pprof endpoints, for profiling; 0 disables them.")
	fs.Bool(keyLeaderElect, false, "Elect a leader (Lease konnector.kbind.io) so that only one replica syncs.")
	fs.String(keyLeaderElectionNamespace, "", "Namespace of the leader election Lease. Empty: the konnector namespace.")
	fs.String(keyLogLevel, "info", "How much to log: info (what an operator acts on), debug (every sync decision: which copy was applied, released, kept, marked or deleted, and why), or a verbosity number (0 is info, 1 debug, higher more). Logs never hold Secret contents or kubeconfigs.")
	return fs
}

// command names the konnector's environment variables and says what it
// does in the help text.
var command = flagconfig.Command{
	EnvPrefix: EnvPrefix,
	Summary:   "kbind konnector: syncs the APIs a provider cluster exports into this consumer cluster.",
}

// EnvName returns the environment variable of an option key.
func EnvName(key string) string { return command.EnvName(key) }

// ErrHelp is returned by Load when help was asked for.
var ErrHelp = flagconfig.ErrHelp

// ErrVersion is returned by Load when --version was given.
var ErrVersion = flagconfig.ErrVersion

// Load parses args (without the program name) against the environment
// lookup function (os.LookupEnv in production) and returns the validated
// configuration.
func Load(name string, args []string, lookupEnv func(string) (string, bool), usage io.Writer) (*Config, error) {
	cmd := command
	cmd.Version = buildinfo.Get().String(name)
	values, err := cmd.Load(FlagSet(name), args, lookupEnv, usage)
	if err != nil {
		return nil, err
	}
	c := &Config{
		Kubeconfig:                 values.String(keyKubeconfig),
		Namespace:                  values.String(keyNamespace),
		SecretNamespaces:           values.Strings(keySecretNamespaces),
		ProviderQPS:                values.Float32(keyProviderQPS),
		ProviderBurst:              values.Int(keyProviderBurst),
		ProviderTimeout:            values.Duration(keyProviderTimeout),
		ProviderCompression:        values.Bool(keyProviderCompression),
		ConsumerQPS:                values.Float32(keyConsumerQPS),
		ConsumerBurst:              values.Int(keyConsumerBurst),
		DiscoveryInterval:          values.Duration(keyDiscoveryInterval),
		RecheckInterval:            values.Duration(keyRecheckInterval),
		BindingResync:              values.Duration(keyBindingResync),
		HeartbeatInterval:          values.Duration(keyHeartbeatInterval),
		CredentialExpiryWarning:    values.Duration(keyCredentialExpiryWarning),
		Workers:                    values.Int(keyWorkers),
		RelatedWatchesPerNamespace: values.Int(keyRelatedWatches),
		MetricsAddr:                values.String(keyMetricsAddr),
		ProbeAddr:                  values.String(keyProbeAddr),
		PprofAddr:                  values.String(keyPprofAddr),
		LeaderElect:                values.Bool(keyLeaderElect),
		LeaderElectionNamespace:    values.String(keyLeaderElectionNamespace),
	}
	c.complete()
	verbosity, err := parseLogLevel(values.String(keyLogLevel))
	c.LogVerbosity = verbosity
	return c, errors.Join(err, c.validate())
}

// complete fills the options whose default is another option.
func (c *Config) complete() {
	if len(c.SecretNamespaces) == 0 {
		c.SecretNamespaces = []string{c.Namespace}
	}
	if c.LeaderElectionNamespace == "" {
		c.LeaderElectionNamespace = c.Namespace
	}
}

// parseLogLevel reads --log-level: info (0), debug (1) or a verbosity
// number from 0 up.
func parseLogLevel(level string) (int, error) {
	switch strings.ToLower(level) {
	case "info":
		return 0, nil
	case "debug":
		return 1, nil
	}
	if v, err := strconv.Atoi(level); err == nil && v >= 0 {
		return v, nil
	}
	return 0, fmt.Errorf("--%s %q: want info, debug or a verbosity number from 0 up", keyLogLevel, level)
}

func (c *Config) validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", keyNamespace))
	}
	if c.ProviderQPS <= 0 || c.ConsumerQPS <= 0 {
		errs = append(errs, fmt.Errorf("--%s and --%s must be positive", keyProviderQPS, keyConsumerQPS))
	}
	if c.ProviderBurst < 1 || c.ConsumerBurst < 1 {
		errs = append(errs, fmt.Errorf("--%s and --%s must be at least 1", keyProviderBurst, keyConsumerBurst))
	}
	if c.ProviderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", keyProviderTimeout))
	}
	if c.DiscoveryInterval < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyDiscoveryInterval))
	}
	if c.RecheckInterval < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyRecheckInterval))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", keyWorkers))
	}
	if c.RelatedWatchesPerNamespace < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", keyRelatedWatches))
	}
	if c.CredentialExpiryWarning <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", keyCredentialExpiryWarning))
	}
	if c.HeartbeatInterval < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyHeartbeatInterval))
	}
	if c.BindingResync < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyBindingResync))
	}
	return errors.Join(errs...)
}
