// Package config turns the konnector's flags, KBIND_* environment variables
// and optional config file into one validated Config. Every option has the
// same name in all three places: flag --provider-qps, environment
// KBIND_PROVIDER_QPS, config file key provider-qps. Precedence: flag, then
// environment, then file, then default.
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
	ConsumerQPS     float32
	ConsumerBurst   int

	DiscoveryInterval time.Duration
	BindingResync     time.Duration
	HeartbeatInterval time.Duration
	Workers           int

	MetricsAddr string
	ProbeAddr   string
	PprofAddr   string

	LeaderElect             bool
	LeaderElectionNamespace string
}

// option keys; flag names, config file keys and (upper-cased, - → _,
// prefixed) environment variable names.
const (
	keyConfig                  = "config"
	keyKubeconfig              = "kubeconfig"
	keyNamespace               = "namespace"
	keySecretNamespaces        = "secret-namespaces"
	keyProviderQPS             = "provider-qps"
	keyProviderBurst           = "provider-burst"
	keyProviderTimeout         = "provider-timeout"
	keyConsumerQPS             = "consumer-qps"
	keyConsumerBurst           = "consumer-burst"
	keyDiscoveryInterval       = "discovery-interval"
	keyBindingResync           = "binding-resync"
	keyHeartbeatInterval       = "heartbeat-interval"
	keyWorkers                 = "workers"
	keyMetricsAddr             = "metrics-bind-address"
	keyProbeAddr               = "health-probe-bind-address"
	keyPprofAddr               = "pprof-bind-address"
	keyLeaderElect             = "leader-elect"
	keyLeaderElectionNamespace = "leader-election-namespace"
)

// DefaultNamespace is the konnector's namespace when none is configured.
const DefaultNamespace = "kbind"

// FlagSet declares every option with its default and help text.
func FlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.String(keyConfig, "", "Optional YAML config file; keys are the flag names (e.g. provider-qps: 50).")
	fs.String(keyKubeconfig, "", "Kubeconfig of the consumer cluster. Empty: in-cluster configuration.")
	fs.String(keyNamespace, DefaultNamespace, "Namespace the konnector runs in (leader election, Events).")
	fs.StringSlice(keySecretNamespaces, nil, "Namespaces kubeconfig Secrets may be read from; Secrets are cached only there. Empty: the konnector namespace.")
	fs.Float32(keyProviderQPS, 100, "Queries per second of each provider client.")
	fs.Int(keyProviderBurst, 200, "Burst of each provider client.")
	fs.Duration(keyProviderTimeout, 30*time.Second, "Timeout of each provider request.")
	fs.Float32(keyConsumerQPS, 100, "Queries per second of the consumer client.")
	fs.Int(keyConsumerBurst, 200, "Burst of the consumer client.")
	fs.Duration(keyDiscoveryInterval, 30*time.Second, "How often each Connection re-reads the provider's exported APIs.")
	fs.Duration(keyBindingResync, 30*time.Second, "How often every ClusterBinding and Binding is re-checked, as a backstop to watches.")
	fs.Duration(keyHeartbeatInterval, 30*time.Second, "How often each Connection's heartbeat Lease on the provider is renewed (leaseDurationSeconds stays 60).")
	fs.Int(keyWorkers, 4, "Sync workers per bound API.")
	fs.String(keyMetricsAddr, ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.String(keyProbeAddr, ":8081", "Address of /healthz and /readyz.")
	fs.String(keyPprofAddr, "0", "Address of Go's /debug/pprof endpoints, for profiling; 0 disables them.")
	fs.Bool(keyLeaderElect, false, "Elect a leader (Lease konnector.kbind.io) so that only one replica syncs.")
	fs.String(keyLeaderElectionNamespace, "", "Namespace of the leader election Lease. Empty: the konnector namespace.")
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
	fmt.Fprintf(w, "kbind konnector: syncs the APIs a provider cluster exports into this consumer cluster.\n\n")
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
	// over the config file. Lookups are explicit so tests pass their own
	// environment.
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
		SecretNamespaces:        stringSlice(v.Get(keySecretNamespaces)),
		ProviderQPS:             float32(v.GetFloat64(keyProviderQPS)),
		ProviderBurst:           v.GetInt(keyProviderBurst),
		ProviderTimeout:         v.GetDuration(keyProviderTimeout),
		ConsumerQPS:             float32(v.GetFloat64(keyConsumerQPS)),
		ConsumerBurst:           v.GetInt(keyConsumerBurst),
		DiscoveryInterval:       v.GetDuration(keyDiscoveryInterval),
		BindingResync:           v.GetDuration(keyBindingResync),
		HeartbeatInterval:       v.GetDuration(keyHeartbeatInterval),
		Workers:                 v.GetInt(keyWorkers),
		MetricsAddr:             v.GetString(keyMetricsAddr),
		ProbeAddr:               v.GetString(keyProbeAddr),
		PprofAddr:               v.GetString(keyPprofAddr),
		LeaderElect:             v.GetBool(keyLeaderElect),
		LeaderElectionNamespace: v.GetString(keyLeaderElectionNamespace),
	}
	if len(c.SecretNamespaces) == 0 {
		c.SecretNamespaces = []string{c.Namespace}
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

// stringSlice accepts a list (flag, YAML list) or a comma-separated string
// (environment variable, YAML scalar).
func stringSlice(v any) []string {
	var raw []string
	switch t := v.(type) {
	case []string:
		raw = t
	case []any:
		for _, e := range t {
			raw = append(raw, fmt.Sprint(e))
		}
	case string:
		raw = strings.Split(t, ",")
	}
	var out []string
	for _, s := range raw {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
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
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", keyWorkers))
	}
	if c.HeartbeatInterval < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyHeartbeatInterval))
	}
	if c.BindingResync < time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at least 1s", keyBindingResync))
	}
	return errors.Join(errs...)
}
