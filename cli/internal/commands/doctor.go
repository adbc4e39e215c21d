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
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kbind/kbind/cli/internal/doctor"
	"github.com/kbind/kbind/flagconfig/buildinfo"
)

// exitCode ends a command with a code and no further message (the command
// printed its result already).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit %d", int(c)) }

func newDoctor(e *env) *cobra.Command {
	var providerContext, output string
	var stuckAfter, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "doctor [CONNECTION]",
		Short: "Run the troubleshooting guide as code against a consumer and its providers",
		Long: `Examine the consumer cluster (the current context) and, with each Connection's own credentials,
its provider; print each problem with its evidence, the command that fixes it and the section of
docs/troubleshooting.md that explains it. With CONNECTION, only that Connection and its bindings.

Checks: the konnector Deployment; each Connection's Secret, kubeconfig, reachability, credentials,
identity pin, heartbeat Lease, exported APIs, and a SelfSubjectAccessReview of every verb kbind
needs on the provider; each binding's API names, exports, scope, overlap, conditions and instance
counts; bound objects with a conflict, and deletions stuck longer than --stuck-after; each
Connection's credential (expiring within 7 days without renewal, expired, renewal failing — its kind,
subject and expiry only) and the version skew between its konnector and this kubectl-kbind
(docs/versioning.md).

Exit status: 0 healthy, 1 problems found, 2 something could not be checked.`,
		Example: `  kubectl kbind doctor
  kubectl kbind doctor provider --provider-context kind-provider
  kubectl kbind doctor -o json | jq '.findings[] | select(.severity == "Error")'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("doctor takes at most one Connection name, got %d", len(args))}
			}
			if output != "" && output != "json" {
				return usageError{fmt.Errorf("-o %q: want json (default: text)", output)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := doctor.Options{StuckAfter: stuckAfter, Timeout: timeout, Now: time.Now(), Version: buildinfo.Get().Version}
			if len(args) == 1 {
				opts.Connection = args[0]
			}
			return e.doctor(cmd.Context(), opts, providerContext, output)
		},
	}
	cmd.Flags().StringVar(&providerContext, "provider-context", "", "a kubeconfig context with read access to the provider, to read what the Connection's identity cannot (e.g. the owner of a conflicting object)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for the report as data (docs/cli.md#doctor); default: text")
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", 5*time.Minute, "report a deletion as stuck when it is older than this")
	cmd.Flags().DurationVar(&timeout, "request-timeout-provider", 10*time.Second, "the timeout of each request to a provider")
	return cmd
}

func (e *env) doctor(ctx context.Context, opts doctor.Options, providerContext, output string) error {
	c, _, err := e.client()
	if err != nil {
		fmt.Fprintln(e.err, "error:", err)
		return exitCode(doctor.ExitCouldNotCheck)
	}
	opts.Commands = doctor.Commands{Consumer: kubectlFor(e.currentContext()), Provider: kubectlFor(providerContext), ProviderContext: providerContext,
		Konnector: doctor.KonnectorInstall{Context: e.currentContext()}}
	if opts.Commands.Provider == "kubectl" {
		opts.Commands.Provider = "kubectl --context=<provider>"
	}
	if providerContext != "" {
		flags := genericclioptions.NewConfigFlags(true)
		flags.KubeConfig, flags.Context = e.flags.KubeConfig, &providerContext
		pc, _, err := (&env{flags: flags}).client()
		if err != nil {
			fmt.Fprintln(e.err, "error: --provider-context:", err)
			return exitCode(doctor.ExitCouldNotCheck)
		}
		opts.Provider = pc
	}
	report := doctor.Run(ctx, c, opts)
	if output == "json" {
		err = report.WriteJSON(e.out)
	} else {
		err = report.WriteText(e.out)
	}
	if err != nil {
		return err
	}
	if code := report.Exit(); code != doctor.ExitHealthy {
		return exitCode(code)
	}
	return nil
}

// currentContext is the context kubectl would use: --context, or the
// kubeconfig's current context.
func (e *env) currentContext() string {
	if e.flags.Context != nil && *e.flags.Context != "" {
		return *e.flags.Context
	}
	raw, err := e.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return ""
	}
	return raw.CurrentContext
}

func kubectlFor(context string) string {
	if context == "" {
		return "kubectl"
	}
	return "kubectl --context=" + context
}
