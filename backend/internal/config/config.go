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

// Package config turns the backend's flags, KBIND_BACKEND_* environment
// variables and optional config file into one validated Config. Every option
// has the same name in all three places: flag --stale-after, environment
// KBIND_BACKEND_STALE_AFTER, config file key stale-after. Precedence: flag,
// then environment, then file, then default. The loading itself (precedence,
// the file's unknown keys, the help text) is flagconfig's; this package
// declares the options, maps them into Config, completes and validates it.
//
// Requirement ids in comments (such as BE-1) refer to docs/requirements.md.
package config

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/kbind/kbind/flagconfig"
	"github.com/kbind/kbind/flagconfig/buildinfo"
)

// EnvPrefix prefixes every environment variable.
const EnvPrefix = "KBIND_BACKEND"

// Config is the backend's configuration.
type Config struct {
	// Kubeconfig of the provider cluster; empty means in-cluster config.
	Kubeconfig string
	// Namespace the backend runs in (leader election Lease).
	Namespace string

	// StaleAfter is how long the backend must not see a heartbeat Lease's
	// renewTime change before it calls the Lease stale (BE-1).
	StaleAfter time.Duration
	// Reap enables deleting what stale consumers left behind (BE-3). Off:
	// report only.
	Reap bool
	// DryRun observes the Leases for StaleAfter, prints what reaping would
	// delete, and exits without writing anything.
	DryRun bool
	// ReapInterval is how often a consumer being reaped is re-checked while
	// provider finalizers hold its objects or a deletion was refused.
	ReapInterval time.Duration
	// ReapGrace is how long the reaper's mark on a stale consumer's copy
	// must survive before the copy is deleted (BE-3): a live konnector
	// clears the mark, so a consumer whose Lease renewals are refused while
	// it syncs is never reaped.
	ReapGrace time.Duration

	QPS     float32
	Burst   int
	Timeout time.Duration

	MetricsAddr string
	ProbeAddr   string

	LeaderElect             bool
	LeaderElectionNamespace string
}

// option keys; flag names, config file keys and (upper-cased, - → _,
// prefixed) environment variable names.
const (
	keyKubeconfig              = "kubeconfig"
	keyNamespace               = "namespace"
	keyStaleAfter              = "stale-after"
	keyReap                    = "reap"
	keyDryRun                  = "dry-run"
	keyReapInterval            = "reap-interval"
	keyReapGrace               = "reap-grace"
	keyQPS                     = "qps"
	keyBurst                   = "burst"
	keyTimeout                 = "timeout"
	keyMetricsAddr             = "metrics-bind-address"
	keyProbeAddr               = "health-probe-bind-address"
	keyLeaderElect             = "leader-elect"
	keyLeaderElectionNamespace = "leader-election-namespace"
)

// DefaultNamespace is the backend's namespace when none is configured.
const DefaultNamespace = "kbind"

// DefaultReapGrace is how long a reap mark must survive before the copy
// goes (BE-3): twenty times the konnector's 30s binding resync, and its
// 10m recheck interval.
const DefaultReapGrace = 10 * time.Minute

// DefaultStaleAfter is the stale window of spec BE-1.
const DefaultStaleAfter = 30 * time.Minute

// FlagSet declares every option with its default and help text.
func FlagSet(name string) *pflag.FlagSet {
	fs := flagconfig.NewFlagSet(name, "stale-after: 1h")
	fs.String(keyKubeconfig, "", "Kubeconfig of the provider cluster. Empty: in-cluster configuration.")
	fs.String(keyNamespace, DefaultNamespace, "Namespace the backend runs in (leader election).")
	fs.Duration(keyStaleAfter, DefaultStaleAfter, "A heartbeat Lease whose renewTime the backend has not seen change for this long is stale. Keep it well above the konnector's 30s renewal interval.")
	fs.Bool(keyReap, false, "Delete what stale consumers left on the provider. Off: report only (annotation, Events, metrics).")
	fs.Bool(keyDryRun, false, "Observe the Leases for --stale-after, print every object reaping would delete (one line each) and exit without changing anything.")
	fs.Duration(keyReapInterval, 30*time.Second, "How often a consumer being reaped is re-checked while provider finalizers hold its objects or a deletion was refused.")
	fs.Duration(keyReapGrace, DefaultReapGrace, "How long the reaper's mark (core.kbind.io/reap-marked-at) on a stale consumer's copy must survive before the copy is deleted. A live konnector clears the mark within seconds; keep it well above the konnector's 30s binding resync.")
	fs.Float32(keyQPS, 50, "Queries per second of the provider client.")
	fs.Int(keyBurst, 100, "Burst of the provider client.")
	fs.Duration(keyTimeout, 30*time.Second, "Timeout of each provider request.")
	fs.String(keyMetricsAddr, ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.String(keyProbeAddr, ":8081", "Address of /healthz and /readyz.")
	fs.Bool(keyLeaderElect, false, "Elect a leader (Lease backend.kbind.io) so that only one replica acts.")
	fs.String(keyLeaderElectionNamespace, "", "Namespace of the leader election Lease. Empty: the backend namespace.")
	return fs
}

// command names the backend's environment variables and says what it does
// in the help text.
var command = flagconfig.Command{
	EnvPrefix: EnvPrefix,
	Summary: "kbind backend: runs against a provider cluster, reports consumers whose heartbeat Leases went\n" +
		"stale and, with --reap, deletes what they left behind.",
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
		Kubeconfig:              values.String(keyKubeconfig),
		Namespace:               values.String(keyNamespace),
		StaleAfter:              values.Duration(keyStaleAfter),
		Reap:                    values.Bool(keyReap),
		DryRun:                  values.Bool(keyDryRun),
		ReapInterval:            values.Duration(keyReapInterval),
		ReapGrace:               values.Duration(keyReapGrace),
		QPS:                     values.Float32(keyQPS),
		Burst:                   values.Int(keyBurst),
		Timeout:                 values.Duration(keyTimeout),
		MetricsAddr:             values.String(keyMetricsAddr),
		ProbeAddr:               values.String(keyProbeAddr),
		LeaderElect:             values.Bool(keyLeaderElect),
		LeaderElectionNamespace: values.String(keyLeaderElectionNamespace),
	}
	c.complete()
	return c, c.validate()
}

// complete fills the options whose default is another option.
func (c *Config) complete() {
	if c.LeaderElectionNamespace == "" {
		c.LeaderElectionNamespace = c.Namespace
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", keyNamespace))
	}
	if c.StaleAfter < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyStaleAfter))
	}
	if c.ReapGrace < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyReapGrace))
	}
	if c.ReapInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--%s must be at least 100ms", keyReapInterval))
	}
	if c.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", keyQPS))
	}
	if c.Burst < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", keyBurst))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", keyTimeout))
	}
	return errors.Join(errs...)
}
