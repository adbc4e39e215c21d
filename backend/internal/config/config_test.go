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
	file := filepath.Join(t.TempDir(), "backend.yaml")
	if err := os.WriteFile(file, []byte("stale-after: 1h\nqps: 7\nburst: 9\nreap: true\n"), 0o600); err != nil {
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
				Namespace: "kbind", StaleAfter: 30 * time.Minute, ReapInterval: 30 * time.Second, ReapGrace: 10 * time.Minute,
				QPS: 50, Burst: 100, Timeout: 30 * time.Second,
				MetricsAddr: ":8080", ProbeAddr: ":8081", LeaderElectionNamespace: "kbind",
			}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
			}
		},
	}, {
		name: "file",
		args: []string{"--config", file},
		check: func(t *testing.T, c *Config) {
			if c.StaleAfter != time.Hour || c.QPS != 7 || c.Burst != 9 || !c.Reap {
				t.Errorf("file values not applied: %+v", c)
			}
		},
	}, {
		name: "env over file",
		args: []string{"--config", file},
		env:  map[string]string{"KBIND_BACKEND_STALE_AFTER": "2h", "KBIND_BACKEND_REAP": "false"},
		check: func(t *testing.T, c *Config) {
			if c.StaleAfter != 2*time.Hour || c.Reap || c.QPS != 7 {
				t.Errorf("env should win over file: %+v", c)
			}
		},
	}, {
		name: "flag over env",
		args: []string{"--config", file, "--stale-after=3h", "--namespace=ops", "--dry-run"},
		env:  map[string]string{"KBIND_BACKEND_STALE_AFTER": "2h"},
		check: func(t *testing.T, c *Config) {
			if c.StaleAfter != 3*time.Hour || !c.DryRun {
				t.Errorf("flag should win: %+v", c)
			}
			if c.Namespace != "ops" || c.LeaderElectionNamespace != "ops" {
				t.Errorf("namespace defaults: %+v", c)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("backend", tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestLoadRejects(t *testing.T) {
	badFile := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badFile, []byte("stale-afer: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--stale-afer=1h"}, nil, "unknown flag: --stale-afer"},
		{"bad env value", nil, map[string]string{"KBIND_BACKEND_STALE_AFTER": "soon"}, `KBIND_BACKEND_STALE_AFTER="soon"`},
		{"konnector prefix is not ours", nil, map[string]string{"KBIND_STALE_AFTER": "soon"}, ""},
		{"unknown file key", []string{"--config", badFile}, nil, "unknown option(s) stale-afer"},
		{"missing file", []string{"--config", "/nonexistent.yaml"}, nil, "reading config file /nonexistent.yaml"},
		{"tiny stale window", []string{"--stale-after=10ms"}, nil, "--stale-after must be at least 1s"},
		{"zero qps", []string{"--qps=0"}, nil, "--qps must be positive"},
		{"zero burst", []string{"--burst=0"}, nil, "--burst must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("backend", tc.args, env(tc.env), io.Discard)
			if tc.want == "" {
				if err != nil {
					t.Errorf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestHelpDocumentsEveryOption(t *testing.T) {
	var out strings.Builder
	_, err := Load("backend", []string{"--help"}, env(nil), &out)
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
		if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(out.String(), "(default "+f.DefValue) &&
			!strings.Contains(out.String(), `(default "`+f.DefValue+`"`) {
			t.Errorf("--help lacks the default of --%s (%s)", f.Name, f.DefValue)
		}
	})
}

func TestVersion(t *testing.T) {
	var out strings.Builder
	_, err := Load("backend", []string{"--version"}, env(nil), &out)
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("--version returned %v", err)
	}
	if !strings.HasPrefix(out.String(), "backend ") || !strings.Contains(out.String(), "(revision ") {
		t.Errorf("--version printed %q", out.String())
	}
}
