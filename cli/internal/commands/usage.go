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

package commands

import (
	"encoding/csv"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Usage errors, in one place: every mistake in the command line exits 2
// (docs/cli.md). Cobra reports some of them itself, each its own way:
// a flag that does not parse (FlagErrorFunc), an unknown command (the
// root's Args), a required flag not set (ValidateRequiredFlags, checked
// here before cobra does); positional arguments go through exactArgs or a
// command's own Args returning usageError.

// enumFlags are the flags whose value is one of a fixed set, by flag name,
// in their canonical spelling. A value is taken in any case and stored
// canonical (`--isolation prefixed` is Prefixed); any other value is a
// usage error naming the set. -o's set is the union of the commands'
// formats: a command that takes fewer says so itself.
var enumFlags = map[string][]string{
	"isolation":     {string(kbindv1alpha1.IsolationNamespace), string(kbindv1alpha1.IsolationPrefixed), string(kbindv1alpha1.IsolationNone)},
	"schema-source": {string(kbindv1alpha1.SchemaSourceAuto), string(kbindv1alpha1.SchemaSourceCRD), string(kbindv1alpha1.SchemaSourceOpenAPI)},
	"related":       {string(kbindv1alpha1.RelatedResourceSecrets), string(kbindv1alpha1.RelatedResourceConfigMaps)},
	"output":        {"yaml", "json"},
}

// canonical returns the value of values v spells in any case.
func canonical(v string, values []string) (string, bool) {
	for _, c := range values {
		if strings.EqualFold(v, c) {
			return c, true
		}
	}
	return "", false
}

// enumValue wraps a flag's value: Set canonicalizes each value (a
// comma-separated list for a slice flag) before the flag stores it.
type enumValue struct {
	pflag.Value
	values []string
	list   bool
}

func (v *enumValue) Set(s string) error {
	items := []string{s}
	if v.list {
		r, err := csv.NewReader(strings.NewReader(s)).Read()
		if err != nil {
			return err
		}
		items = r
	}
	for i, item := range items {
		c, ok := canonical(strings.TrimSpace(item), v.values)
		if !ok {
			return fmt.Errorf("want %s", orList(v.values))
		}
		items[i] = c
	}
	return v.Value.Set(strings.Join(items, ","))
}

// orList is "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// outputFormats are -o's values of the commands that take fewer than
// enumFlags says.
var outputFormats = map[string][]string{"doctor": {"json"}}

// canonicalEnums wraps every enumFlags flag of cmd and its subcommands.
func canonicalEnums(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		values, ok := enumFlags[f.Name]
		if !ok {
			return
		}
		if formats, ok := outputFormats[cmd.Name()]; ok && f.Name == "output" {
			values = formats
		}
		if _, done := f.Value.(*enumValue); !done {
			f.Value = &enumValue{Value: f.Value, values: values, list: strings.HasSuffix(f.Value.Type(), "Slice")}
		}
	})
	for _, sub := range cmd.Commands() {
		canonicalEnums(sub)
	}
}

// usageChecks makes every usage mistake cobra reports a usageError: set
// on the root after the commands are added.
func usageChecks(root *cobra.Command) {
	canonicalEnums(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// A word that is no command: cobra's own check returns a plain error,
	// and a root without Run would print the help and exit 0.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown command %q for %q; see --help", args[0], cmd.CommandPath())}
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	// Required flags, before cobra checks them (after this hook) with a
	// plain error.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return usageError{err}
		}
		if err := cmd.ValidateFlagGroups(); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d; see --help", cmd.CommandPath(), n, len(args))}
		}
		return nil
	}
}
