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

// Package commands implements the kubectl-kbind commands on cobra, with
// kubectl's connection flags (--kubeconfig, --context, -n, ...).
package commands

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/flagconfig/buildinfo"
)

// Exit codes: 0 done, 1 the command failed (a refusal, an API error), 2
// bad usage.
const (
	exitFailed = 1
	exitUsage  = 2
)

// usageError is a mistake in the command line.
type usageError struct{ error }

// env is what every command uses: kubectl's flags and the output streams.
type env struct {
	flags    *genericclioptions.ConfigFlags
	out, err io.Writer
}

func (e *env) restConfig() (*rest.Config, error) {
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	// client-go's default rate limit (5 requests a second, bursts of 10)
	// made revoke's SubjectAccessReview rounds take 15-20 s; kubectl-kbind
	// allows what doctor always did.
	cfg.UserAgent, cfg.QPS, cfg.Burst = "kubectl-kbind", 50, 100
	return cfg, nil
}

func (e *env) client() (client.Client, *rest.Config, error) {
	cfg, err := e.restConfig()
	if err != nil {
		return nil, nil, err
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return c, cfg, nil
}

// newScheme knows the built-in kinds, CRDs and kbind's kinds.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, kbindv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	e := &env{flags: genericclioptions.NewConfigFlags(true), out: out, err: errOut}
	root := &cobra.Command{
		Use:   "kubectl-kbind",
		Short: "kbind's kubectl plugin: onboard consumers on a provider, examine a consumer",
		Long: `kbind's kubectl plugin (docs/cli.md). On the provider cluster:

  kubectl kbind export widgets.example.org         mark a CRD as exported
  kubectl kbind grant team-a --apis widgets.example.org > team-a.yaml
                                                   onboard a consumer; apply team-a.yaml on it
  kubectl kbind revoke team-a                      take that access away again
  kubectl kbind consumers                          every consumer: mode, heartbeat, version, objects, token

On a consumer cluster:

  kubectl kbind status                             Connections, bindings, APIs and their objects
  kubectl kbind doctor                             find what is wrong, and how to fix it
  kubectl kbind unbind provider                    delete a ClusterBinding (-n: a Binding), saying what goes
  kubectl kbind kept clusterbinding/provider       the provider copies its deletion protection kept (--delete)
  kubectl kbind adopt widgets.example.org/db -n a  an imported object becomes the consumer's
  kubectl kbind release widgets.example.org/db -n a  a consumer object becomes the provider's

It uses the current kubeconfig and context, like kubectl.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version; doctor compares it with the konnectors' (docs/versioning.md).
		Version: buildinfo.Get().String("kubectl-kbind"),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(out)
	root.SetErr(errOut)
	e.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newExport(e), newGrant(e), newRevoke(e), newConsumers(e), newDoctor(e), newStatus(e), newAdopt(e), newRelease(e), newUnbind(e), newKept(e))
	usageChecks(root)
	return root
}

// Execute runs the plugin with args and returns the exit code.
func Execute(args []string, out, errOut io.Writer) int {
	root := newRoot(out, errOut)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			return int(code)
		}
		fmt.Fprintln(errOut, "error:", err)
		var u usageError
		if errors.As(err, &u) {
			return exitUsage
		}
		return exitFailed
	}
	return 0
}
