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

package flagconfig

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
)

var testCommand = Command{EnvPrefix: "APP", Summary: "app: does things.", Version: "app 1.2.3 (revision abc, go1.26.8)"}

// testFlags is a binary's flag set: every kind of value Values reads.
func testFlags() *pflag.FlagSet {
	fs := NewFlagSet("app", "name: x")
	fs.String("name", "default", "A string.")
	fs.Int("count", 1, "An int.")
	fs.Float32("rate", 2.5, "A float.")
	fs.Duration("wait", time.Second, "A duration.")
	fs.Bool("on", false, "A bool.")
	fs.StringSlice("list", nil, "A list.")
	return fs
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// loaded is every test flag's value after Load.
type loaded struct {
	Name  string
	Count int
	Rate  float32
	Wait  time.Duration
	On    bool
	List  []string
}

func load(args []string, vars map[string]string) (loaded, error) {
	v, err := testCommand.Load(testFlags(), args, env(vars), io.Discard)
	if err != nil {
		return loaded{}, err
	}
	return loaded{v.String("name"), v.Int("count"), v.Float32("rate"), v.Duration("wait"), v.Bool("on"), v.Strings("list")}, nil
}

func TestEnvName(t *testing.T) {
	cases := []struct{ prefix, flag, want string }{
		{"KBIND", "provider-qps", "KBIND_PROVIDER_QPS"},
		{"KBIND", "health-probe-bind-address", "KBIND_HEALTH_PROBE_BIND_ADDRESS"},
		{"KBIND_BACKEND", "stale-after", "KBIND_BACKEND_STALE_AFTER"},
		{"KBIND_BACKEND", "qps", "KBIND_BACKEND_QPS"},
		{"APP", ConfigFlag, "APP_CONFIG"},
	}
	for _, tc := range cases {
		if got := (Command{EnvPrefix: tc.prefix}).EnvName(tc.flag); got != tc.want {
			t.Errorf("EnvName(%q) with prefix %q = %q, want %q", tc.flag, tc.prefix, got, tc.want)
		}
	}
}

func TestLoadPrecedence(t *testing.T) {
	file := writeFile(t, "name: file\ncount: 3\nwait: 1m\non: true\nlist: [a, b]\n")
	other := writeFile(t, "name: other\n")
	defaults := loaded{Name: "default", Count: 1, Rate: 2.5, Wait: time.Second}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want loaded
	}{
		{"defaults", nil, nil, defaults},
		{"file over default, per key", []string{"--config", file}, nil,
			loaded{Name: "file", Count: 3, Rate: 2.5, Wait: time.Minute, On: true, List: []string{"a", "b"}}},
		{"env over file", []string{"--config", file},
			map[string]string{"APP_NAME": "env", "APP_ON": "false", "APP_LIST": "x, ,y"},
			loaded{Name: "env", Count: 3, Rate: 2.5, Wait: time.Minute, List: []string{"x", "y"}}},
		{"flag over env", []string{"--config", file, "--name=flag", "--rate=4"},
			map[string]string{"APP_NAME": "env", "APP_RATE": "3"},
			loaded{Name: "flag", Count: 3, Rate: 4, Wait: time.Minute, On: true, List: []string{"a", "b"}}},
		{"a flag given its default still wins", []string{"--count=1"},
			map[string]string{"APP_COUNT": "7"}, defaults},
		{"env names the file", nil, map[string]string{"APP_CONFIG": other},
			loaded{Name: "other", Count: 1, Rate: 2.5, Wait: time.Second}},
		{"flag names the file over env", []string{"--config", other},
			map[string]string{"APP_CONFIG": "/does/not/exist.yaml"},
			loaded{Name: "other", Count: 1, Rate: 2.5, Wait: time.Second}},
		{"other prefixes are not ours", nil, map[string]string{"NAME": "x", "OTHER_APP_NAME": "x", "APP_NAME_X": "x"}, defaults},
		{"file keys ignore case", []string{"--config", writeFile(t, "Name: upper\n")}, nil,
			loaded{Name: "upper", Count: 1, Rate: 2.5, Wait: time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := load(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"unknown flag", []string{"--nmae=x"}, nil, []string{"unknown flag: --nmae"}},
		{"bad flag value", []string{"--count=many"}, nil, []string{`invalid argument "many" for "--count" flag`}},
		{"bad env values, all named", nil, map[string]string{"APP_WAIT": "soon", "APP_COUNT": "many"},
			[]string{`APP_WAIT="soon"`, `APP_COUNT="many"`, `for "--wait" flag`}},
		{"unknown file keys, all named", []string{"--config", writeFile(t, "nmae: x\ncount: 2\nextra:\n  deep: 1\n")}, nil,
			// in the order viper lists them, which is not stable
			[]string{"config file ", "unknown option(s) ", "extra.deep", "nmae", "; see --help"}},
		{"duplicate file key", []string{"--config", writeFile(t, "count: 2\ncount: 3\n")}, nil,
			[]string{"reading config file ", `mapping key "count" already defined at line 1`}},
		{"file that is not YAML", []string{"--config", writeFile(t, "name: [\n")}, nil, []string{"reading config file "}},
		{"missing file", []string{"--config", "/nonexistent.yaml"}, nil, []string{"reading config file /nonexistent.yaml"}},
		{"missing file from env", nil, map[string]string{"APP_CONFIG": "/nonexistent.yaml"}, []string{"reading config file /nonexistent.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.args, tc.env)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

const wantUsage = `Usage: app [flags]

app: does things.

Every flag can also be set as an environment variable (APP_<FLAG>, upper case, - as _)
or as a key of the --config file. Precedence: flag, environment, file, default.

Flags:
      --config string          Optional YAML config file; keys are the flag names (e.g. name: x). [env APP_CONFIG]
      --count int              An int. [env APP_COUNT] (default 1)
      --list strings           A list. [env APP_LIST]
      --name string            A string. [env APP_NAME] (default "default")
      --on[=true|false]        A bool. [env APP_ON]
      --rate float32           A float. [env APP_RATE] (default 2.5)
      --version[=true|false]   Print the version and exit.
      --wait duration          A duration. [env APP_WAIT] (default 1s)
`

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--name=x", "--help"}} {
		var out strings.Builder
		_, err := testCommand.Load(testFlags(), args, env(map[string]string{"APP_COUNT": "many"}), &out)
		if !errors.Is(err, ErrHelp) {
			t.Errorf("%v: error %v, want ErrHelp", args, err)
		}
		if out.String() != wantUsage {
			t.Errorf("%v: help text\n%s\nwant\n%s", args, out.String(), wantUsage)
		}
	}

	// Rendering twice renders the same and leaves the flags' own help alone.
	fs := testFlags()
	var first, second strings.Builder
	testCommand.Usage(&first, fs)
	testCommand.Usage(&second, fs)
	if first.String() != wantUsage || second.String() != wantUsage {
		t.Errorf("repeated Usage differs:\n%s\n%s", first.String(), second.String())
	}
	if got := fs.Lookup("name").Usage; got != "A string." {
		t.Errorf("Usage changed the flag's help to %q", got)
	}
}

func TestStrings(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want []string
	}{
		{"unset", nil, nil},
		{"flag list", []string{"a", " b ", ""}, []string{"a", "b"}},
		{"YAML list", []any{"a", 1, " "}, []string{"a", "1"}},
		{"comma-separated", "a, b,,c ", []string{"a", "b", "c"}},
		{"empty string", "", nil},
		{"other type", 3, nil},
	}
	for _, tc := range cases {
		if got := stringSlice(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: stringSlice(%#v) = %#v, want %#v", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var out strings.Builder
	_, err := testCommand.Load(testFlags(), []string{"--name=x", "--version"}, env(nil), &out)
	if !errors.Is(err, ErrVersion) {
		t.Errorf("error %v, want ErrVersion", err)
	}
	if got, want := out.String(), "app 1.2.3 (revision abc, go1.26.8)\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	// Only the command line asks for the version: the environment variable
	// is not read and the file key is unknown.
	if _, err := load(nil, map[string]string{"APP_VERSION": "true"}); err != nil {
		t.Errorf("APP_VERSION set: %v, want it ignored", err)
	}
	if _, err := load([]string{"--config", writeFile(t, "version: true\n")}, nil); err == nil || !strings.Contains(err.Error(), "unknown option(s) version") {
		t.Errorf("version in the file: %v, want unknown option", err)
	}
}
