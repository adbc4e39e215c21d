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

// Package flagconfig loads a binary's configuration from its flags, its
// environment variables and an optional YAML file. Every option has one name
// used three ways: flag --a-b, environment variable PREFIX_A_B, file key a-b.
// Precedence: flag, then environment, then file, then default. An unknown
// file key or a value that does not parse is an error naming it.
//
// It owns only the loading and the help text; each binary declares its own
// flags, maps the values into its own configuration and validates it. The
// engine reads no configuration and does not import this.
package flagconfig

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// ConfigFlag names the optional YAML file (flag --config, PREFIX_CONFIG).
const ConfigFlag = "config"

// VersionFlag prints the binary's version (flag --version only: no
// environment variable or file key, so a stray KONNECTOR_VERSION never
// turns a Pod into one that prints and exits).
const VersionFlag = "version"

// ErrHelp is returned by Load when help was asked for.
var ErrHelp = pflag.ErrHelp

// ErrVersion is returned by Load when --version was given.
var ErrVersion = errors.New("version requested")

// Command is what a binary's command line shares across its options: how
// its environment variables are named and what its help text says it does.
type Command struct {
	// EnvPrefix prefixes every environment variable.
	EnvPrefix string
	// Summary says what the binary does, under the help text's usage line.
	Summary string
	// Version is the --version line (buildinfo.Get().String(name)).
	Version string
}

// NewFlagSet returns a flag set that returns parse errors instead of
// exiting, with --config and --version declared; configExample is a line of
// such a file for its help text (e.g. "qps: 50").
func NewFlagSet(name, configExample string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.String(ConfigFlag, "", "Optional YAML config file; keys are the flag names (e.g. "+configExample+").")
	fs.Bool(VersionFlag, false, "Print the version and exit.")
	return fs
}

// commandLineOnly are flags that have no environment variable or file key.
func commandLineOnly(flag string) bool { return flag == VersionFlag }

// EnvName returns the environment variable of a flag: upper case, - as _,
// prefixed.
func (c Command) EnvName(flag string) string {
	return c.EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Usage writes the help text: every flag with its default and its
// environment variable. The usage line names the program fs.Name().
func (c Command) Usage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\n", fs.Name(), c.Summary)
	fmt.Fprintf(w, "Every flag can also be set as an environment variable (%s_<FLAG>, upper case, - as _)\n", c.EnvPrefix)
	fmt.Fprintf(w, "or as a key of the --%s file. Precedence: flag, environment, file, default.\n\nFlags:\n", ConfigFlag)
	// Copies carry the environment variable, so fs's own help strings stay
	// as declared however often this runs.
	annotated := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
	annotated.SortFlags = fs.SortFlags
	fs.VisitAll(func(f *pflag.Flag) {
		cp := *f
		if !commandLineOnly(f.Name) {
			cp.Usage = fmt.Sprintf("%s [env %s]", f.Usage, c.EnvName(f.Name))
		}
		annotated.AddFlag(&cp)
	})
	fmt.Fprint(w, annotated.FlagUsages())
}

// Load parses args (without the program name) into fs, sets every flag not
// given from its environment variable (lookupEnv is os.LookupEnv in
// production; tests pass their own), then reads the --config file, if any,
// for what neither set. -h and --help write the help text to usage and
// return ErrHelp; --version writes c.Version and returns ErrVersion.
func (c Command) Load(fs *pflag.FlagSet, args []string, lookupEnv func(string) (string, bool), usage io.Writer) (*Values, error) {
	fs.Usage = func() { c.Usage(usage, fs) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if v, err := fs.GetBool(VersionFlag); err == nil && v {
		fmt.Fprintln(usage, c.Version)
		return nil, ErrVersion
	}
	if err := c.setFromEnv(fs, lookupEnv); err != nil {
		return nil, err
	}
	v := viper.New()
	var bindErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if !commandLineOnly(f.Name) && bindErr == nil {
			bindErr = v.BindPFlag(f.Name, f)
		}
	})
	if bindErr != nil {
		return nil, fmt.Errorf("binding flags: %w", bindErr)
	}
	if file := v.GetString(ConfigFlag); file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("reading config file %s: %w", file, err)
		}
		if err := checkKeys(v.AllKeys(), fs); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
	}
	return &Values{v: v}, nil
}

// setFromEnv treats an environment variable as its flag when the flag was
// not given, so it is parsed (and rejected) exactly like the flag and wins
// over the config file (which --config itself may come from).
func (c Command) setFromEnv(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if commandLineOnly(f.Name) {
			return
		}
		if val, ok := lookupEnv(c.EnvName(f.Name)); ok && !f.Changed {
			if err := fs.Set(f.Name, val); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", c.EnvName(f.Name), val, err))
			}
		}
	})
	return errors.Join(errs...)
}

// checkKeys rejects config file keys that are not flags, so a typo fails
// loudly instead of being ignored.
func checkKeys(keys []string, fs *pflag.FlagSet) error {
	var unknown []string
	for _, k := range keys {
		if fs.Lookup(k) == nil || commandLineOnly(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown option(s) %s; see --help", strings.Join(unknown, ", "))
	}
	return nil
}

// Values are the loaded options, read by flag name.
type Values struct {
	v *viper.Viper
}

// String returns a string option.
func (v *Values) String(flag string) string { return v.v.GetString(flag) }

// Bool returns a boolean option.
func (v *Values) Bool(flag string) bool { return v.v.GetBool(flag) }

// Int returns an integer option.
func (v *Values) Int(flag string) int { return v.v.GetInt(flag) }

// Float32 returns a float option.
func (v *Values) Float32(flag string) float32 { return float32(v.v.GetFloat64(flag)) }

// Duration returns a duration option.
func (v *Values) Duration(flag string) time.Duration { return v.v.GetDuration(flag) }

// Strings returns a list option: a list (flag, YAML list) or a
// comma-separated string (environment variable, YAML scalar), with blank
// entries dropped.
func (v *Values) Strings(flag string) []string { return stringSlice(v.v.Get(flag)) }

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
