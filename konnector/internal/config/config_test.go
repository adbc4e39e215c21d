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

package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kbind/kbind/flagconfig"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestLoadPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "konnector.yaml")
	if err := os.WriteFile(file, []byte("provider-qps: 7\nprovider-burst: 9\ndiscovery-interval: 1m\nsecret-namespaces: [a, b]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c *Config)
	}{{
		name: "defaults",
		check: func(t *testing.T, c *Config) {
			want := &Config{
				Namespace: "kbind", SecretNamespaces: []string{"kbind"},
				ProviderQPS: 100, ProviderBurst: 200, ProviderTimeout: 30 * time.Second, ProviderCompression: true,
				ConsumerQPS: 100, ConsumerBurst: 200, DiscoveryInterval: 30 * time.Second, RecheckInterval: 10 * time.Minute, BindingResync: 30 * time.Second, HeartbeatInterval: 30 * time.Second, CredentialExpiryWarning: 7 * 24 * time.Hour, Workers: 4,
				RelatedWatchesPerNamespace: 512,
				MetricsAddr:                ":8080", ProbeAddr: ":8081", PprofAddr: "0", LeaderElectionNamespace: "kbind",
			}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
			}
		},
	}, {
		name: "file",
		args: []string{"--config", file},
		check: func(t *testing.T, c *Config) {
			if c.ProviderQPS != 7 || c.ProviderBurst != 9 || c.DiscoveryInterval != time.Minute {
				t.Errorf("file values not applied: %+v", c)
			}
			if !reflect.DeepEqual(c.SecretNamespaces, []string{"a", "b"}) {
				t.Errorf("secret namespaces from file = %v", c.SecretNamespaces)
			}
		},
	}, {
		name: "env over file",
		args: []string{"--config", file},
		env:  map[string]string{"KBIND_PROVIDER_QPS": "11", "KBIND_SECRET_NAMESPACES": "x, y"},
		check: func(t *testing.T, c *Config) {
			if c.ProviderQPS != 11 || c.ProviderBurst != 9 {
				t.Errorf("env should win over file for qps only: %+v", c)
			}
			if !reflect.DeepEqual(c.SecretNamespaces, []string{"x", "y"}) {
				t.Errorf("secret namespaces from env = %v", c.SecretNamespaces)
			}
		},
	}, {
		name: "flag over env",
		args: []string{"--config", file, "--provider-qps=13", "--namespace=ops"},
		env:  map[string]string{"KBIND_PROVIDER_QPS": "11", "KBIND_CONFIG": "/does/not/matter"},
		check: func(t *testing.T, c *Config) {
			if c.ProviderQPS != 13 {
				t.Errorf("flag should win: %+v", c)
			}
			if c.Namespace != "ops" || c.LeaderElectionNamespace != "ops" {
				t.Errorf("namespace defaults: %+v", c)
			}
			if !reflect.DeepEqual(c.SecretNamespaces, []string{"a", "b"}) {
				t.Errorf("secret namespaces = %v", c.SecretNamespaces)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("konnector", tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestLoadRejects(t *testing.T) {
	badFile := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badFile, []byte("provider-qsp: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--provider-qsp=1"}, nil, "unknown flag: --provider-qsp"},
		{"bad env value", nil, map[string]string{"KBIND_PROVIDER_TIMEOUT": "soon"}, `KBIND_PROVIDER_TIMEOUT="soon"`},
		{"unknown file key", []string{"--config", badFile}, nil, "unknown option(s) provider-qsp"},
		{"missing file", []string{"--config", "/nonexistent.yaml"}, nil, "reading config file /nonexistent.yaml"},
		{"zero qps", []string{"--provider-qps=0"}, nil, "--provider-qps and --consumer-qps must be positive"},
		{"tiny discovery interval", []string{"--discovery-interval=10ms"}, nil, "--discovery-interval must be at least 1s"},
		{"tiny heartbeat interval", []string{"--heartbeat-interval=100ms"}, nil, "--heartbeat-interval must be at least 1s"},
		{"no related watches", []string{"--related-watches-per-namespace=0"}, nil, "--related-watches-per-namespace must be at least 1"},
		{"unknown log level", []string{"--log-level=verbose"}, nil, `--log-level "verbose": want info, debug or a verbosity number`},
		{"negative log level", nil, map[string]string{"KBIND_LOG_LEVEL": "-1"}, `--log-level "-1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("konnector", tc.args, env(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLogLevel(t *testing.T) {
	for level, want := range map[string]int{"": 0, "info": 0, "INFO": 0, "debug": 1, "Debug": 1, "0": 0, "1": 1, "4": 4} {
		args := []string{}
		if level != "" {
			args = append(args, "--log-level="+level)
		}
		c, err := Load("konnector", args, env(nil), io.Discard)
		if err != nil {
			t.Fatalf("--log-level=%s: %v", level, err)
		}
		if c.LogVerbosity != want {
			t.Errorf("--log-level=%s: verbosity %d, want %d", level, c.LogVerbosity, want)
		}
	}
}

func TestHelpDocumentsEveryOption(t *testing.T) {
	var out strings.Builder
	_, err := Load("konnector", []string{"--help"}, env(nil), &out)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("--help returned %v", err)
	}
	FlagSet("x").VisitAll(func(f *pflag.Flag) {
		want := []string{"--" + f.Name, EnvName(f.Name)}
		if f.Name == flagconfig.VersionFlag {
			want = want[:1] // command line only
		}
		for _, want := range want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("--help lacks %s", want)
			}
		}
		if f.DefValue != "" && f.DefValue != "[]" && f.DefValue != "false" && !strings.Contains(out.String(), "(default "+f.DefValue) &&
			!strings.Contains(out.String(), `(default "`+f.DefValue+`"`) {
			t.Errorf("--help lacks the default of --%s (%s)", f.Name, f.DefValue)
		}
	})
}

func TestVersion(t *testing.T) {
	var out strings.Builder
	_, err := Load("konnector", []string{"--version"}, env(nil), &out)
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("--version returned %v", err)
	}
	if !strings.HasPrefix(out.String(), "konnector ") || !strings.Contains(out.String(), "(revision ") {
		t.Errorf("--version printed %q", out.String())
	}
}
