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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/internal/consumers"
)

func newConsumers(e *env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "consumers [NAME]",
		Short: "The provider's view of every consumer: mode, heartbeat, konnector version, APIs, objects, token expiry",
		Long: `List every consumer of this (provider) cluster, one line each: its isolation mode and namespace (or
prefix), the age of its newest heartbeat, the konnector version its heartbeat Leases carry, how many
APIs it was granted, how many provider copies it holds, when its credential expires (or "renews"), and
its status: granted (never connected), connected, stale, or revoked (with what is left of it).

With NAME, that consumer in full: granted APIs and related kinds, the objects grant made, its Leases
(holder, renewal, Connection, konnector and API version, provider user, credential kind and expiry)
and its copies per API and namespace.

It reads only what kubectl kbind grant labelled (kbind.io/consumer) and what the konnectors wrote on
their heartbeat Leases; copies are counted from metadata only. A read that fails is reported below the
table (and in "problems" with -o), and the command then exits 1. See docs/cli.md#consumers.`,
		Example: `  kubectl kbind consumers
  kubectl kbind consumers team-a
  kubectl kbind consumers -o json | jq '.consumers[] | select(.status == "stale") | .name'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("consumers takes at most one consumer name, got %d", len(args))}
			}
			if output != "" && output != "yaml" && output != "json" {
				return usageError{fmt.Errorf("-o %q: want yaml or json", output)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return e.consumers(cmd.Context(), name, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json (docs/cli.md#consumers); default: a table, or the detail of NAME")
	return cmd
}

func (e *env) consumers(ctx context.Context, name, output string) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	now := time.Now()
	list, err := consumers.Gather(ctx, c, now, name)
	if err != nil {
		return err
	}
	if len(list.Consumers) == 0 {
		if err := notAProvider(ctx, c); err != nil {
			return err
		}
	}
	switch {
	case output != "":
		err = printData(e, output, list, nil)
	case name != "":
		err = consumers.WriteDetail(e.out, list.Consumers[0], now)
		for _, p := range list.Problems {
			fmt.Fprintf(e.out, "problem: %s\n", p)
		}
	default:
		err = consumers.WriteTable(e.out, list, now)
	}
	if err != nil {
		return err
	}
	if hasProblems(list) {
		return exitCode(exitFailed)
	}
	return nil
}

// notAProvider says, for a cluster without any consumer, whether it is
// a consumer cluster rather than a provider: one that serves kbind's
// Connections (its konnector's CRDs are installed). An error when it is.
func notAProvider(ctx context.Context, c client.Client) error {
	gk := schema.GroupKind{Group: kbindv1alpha1.GroupVersion.Group, Kind: "Connection"}
	if _, err := c.RESTMapper().RESTMapping(gk, kbindv1alpha1.GroupVersion.Version); err != nil {
		return nil // not served (or unknown): a provider, or nothing of kbind's
	}
	what := "kbind's Connection API is installed"
	conns := &metav1.PartialObjectMetadataList{}
	conns.SetGroupVersionKind(kbindv1alpha1.GroupVersion.WithKind("ConnectionList"))
	if err := c.List(ctx, conns); err == nil && len(conns.Items) > 0 {
		what = fmt.Sprintf("it holds %d kbind Connection(s)", len(conns.Items))
	}
	return fmt.Errorf("this looks like a consumer cluster, not a provider: %s, and no consumer was granted here nor heartbeats here. "+
		"kubectl kbind consumers reads the provider: point it at the provider's kubeconfig (--kubeconfig, --context); on a consumer, kubectl kbind status shows its Connections", what)
}

func hasProblems(l consumers.List) bool {
	if len(l.Problems) > 0 {
		return true
	}
	for _, c := range l.Consumers {
		if len(c.Problems) > 0 {
			return true
		}
	}
	return false
}
