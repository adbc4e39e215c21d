// Package config turns the backend's flags, KBIND_BACKEND_* environment
// variables and optional config file into one validated Config. Every option
// has the same name in all three places: flag --stale-after, environment
// KBIND_BACKEND_STALE_AFTER, config file key stale-after. Precedence: flag,
// then environment, then file, then default.
//
// Requirement ids in comments (such as BE-1) refer to docs/requirements.md.
package config

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
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
	keyConfig                  = "config"
	keyKubeconfig              = "kubeconfig"
	keyNamespace               = "namespace"
	keyStaleAfter              = "stale-after"
	keyReap                    = "reap"
	keyDryRun                  = "dry-run"
	keyReapInterval            = "reap-interval"
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

// DefaultStaleAfter is the stale window of spec BE-1.
const DefaultStaleAfter = 30 * time.Minute

// FlagSet declares every option with its default and help text.
func FlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.String(keyConfig, "", "Optional YAML config file; keys are the flag names (e.g. stale-after: 1h).")
	fs.String(keyKubeconfig, "", "Kubeconfig of the provider cluster. Empty: in-cluster configuration.")
	fs.String(keyNamespace, DefaultNamespace, "Namespace the backend runs in (leader election).")
	fs.Duration(keyStaleAfter, DefaultStaleAfter, "A heartbeat Lease whose renewTime the backend has not seen change for this long is stale. Keep it well above the konnector's 30s renewal interval.")
	fs.Bool(keyReap, false, "Delete what stale consumers left on the provider. Off: report only (annotation, Events, metrics).")
	fs.Bool(keyDryRun, false, "Observe the Leases for --stale-after, print every object reaping would delete (one line each) and exit without changing anything.")
	fs.Duration(keyReapInterval, 30*time.Second, "How often a consumer being reaped is re-checked while provider finalizers hold its objects or a deletion was refused.")
	fs.Float32(keyQPS, 50, "Queries per second of the provider client.")
	fs.Int(keyBurst, 100, "Burst of the provider client.")
	fs.Duration(keyTimeout, 30*time.Second, "Timeout of each provider request.")
	fs.String(keyMetricsAddr, ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.String(keyProbeAddr, ":8081", "Address of /healthz and /readyz.")
	fs.Bool(keyLeaderElect, false, "Elect a leader (Lease backend.kbind.io) so that only one replica acts.")
	fs.String(keyLeaderElectionNamespace, "", "Namespace of the leader election Lease. Empty: the backend namespace.")
	return fs
}

// EnvName returns the environment variable of an option key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// Usage writes the help text: every option with its default and its
// environment variable.
func Usage(w io.Writer, name string, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n", name)
	fmt.Fprintf(w, "kbind backend: runs against a provider cluster, reports consumers whose heartbeat Leases went\n")
	fmt.Fprintf(w, "stale and, with --reap, deletes what they left behind.\n\n")
	fmt.Fprintf(w, "Every flag can also be set as an environment variable (%s_<FLAG>, upper case, - as _)\n", EnvPrefix)
	fmt.Fprintf(w, "or as a key of the --config file. Precedence: flag, environment, file, default.\n\nFlags:\n")
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage = fmt.Sprintf("%s [env %s]", f.Usage, EnvName(f.Name))
	})
	fmt.Fprint(w, fs.FlagUsages())
}

// ErrHelp is returned by Load when help was asked for.
var ErrHelp = pflag.ErrHelp

// Load parses args (without the program name) against the environment
// lookup function (os.LookupEnv in production) and returns the validated
// configuration.
func Load(name string, args []string, lookupEnv func(string) (string, bool), usage io.Writer) (*Config, error) {
	fs := FlagSet(name)
	fs.Usage = func() { Usage(usage, name, fs) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	// An environment variable counts as its flag when the flag was not
	// given, so it is parsed (and rejected) exactly like the flag and wins
	// over the config file.
	var envErrs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if val, ok := lookupEnv(EnvName(f.Name)); ok && !f.Changed {
			if err := fs.Set(f.Name, val); err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: %w", EnvName(f.Name), val, err))
			}
		}
	})
	if err := errors.Join(envErrs...); err != nil {
		return nil, err
	}
	v := viper.New()
	if err := v.BindPFlags(fs); err != nil {
		return nil, fmt.Errorf("binding flags: %w", err)
	}
	if file := v.GetString(keyConfig); file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("reading config file %s: %w", file, err)
		}
		if err := checkKeys(v.AllKeys(), fs); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
	}

	c := &Config{
		Kubeconfig:              v.GetString(keyKubeconfig),
		Namespace:               v.GetString(keyNamespace),
		StaleAfter:              v.GetDuration(keyStaleAfter),
		Reap:                    v.GetBool(keyReap),
		DryRun:                  v.GetBool(keyDryRun),
		ReapInterval:            v.GetDuration(keyReapInterval),
		QPS:                     float32(v.GetFloat64(keyQPS)),
		Burst:                   v.GetInt(keyBurst),
		Timeout:                 v.GetDuration(keyTimeout),
		MetricsAddr:             v.GetString(keyMetricsAddr),
		ProbeAddr:               v.GetString(keyProbeAddr),
		LeaderElect:             v.GetBool(keyLeaderElect),
		LeaderElectionNamespace: v.GetString(keyLeaderElectionNamespace),
	}
	if c.LeaderElectionNamespace == "" {
		c.LeaderElectionNamespace = c.Namespace
	}
	return c, c.validate()
}

// checkKeys rejects config file keys that are not options, so a typo fails
// loudly instead of being ignored.
func checkKeys(keys []string, fs *pflag.FlagSet) error {
	var unknown []string
	for _, k := range keys {
		if fs.Lookup(k) == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown option(s) %s; see --help", strings.Join(unknown, ", "))
	}
	return nil
}

func (c *Config) validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", keyNamespace))
	}
	if c.StaleAfter < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyStaleAfter))
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
