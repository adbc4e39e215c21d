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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbind/kbind/cli/internal/doctor"
)

func newStatus(e *env) *cobra.Command {
	var output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One screen: Connections, their bindings, APIs and object counts, heartbeat age",
		Long: `Show every Connection of the consumer cluster (the current context) with its readiness, isolation,
the age of its heartbeat (read from the provider with the Connection's own credentials) and its
exported API count; then each binding's APIs with the objects it routes through its Connection
(namespaces, selectors) and their counts: total, synced, pending, failed and conflicts; and the
provider copies a binding's deletion protection kept instead of deleting (status.keptCopies: per
API, how many and where; kubectl kbind kept lists them, --delete deletes them). kubectl kbind
doctor explains anything that is not well.`,
		Example: `  kubectl kbind status
  kubectl kbind status -o yaml`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.status(cmd.Context(), output, timeout)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json (default: tables)")
	cmd.Flags().DurationVar(&timeout, "request-timeout-provider", 10*time.Second, "the timeout of each request to a provider")
	return cmd
}

func (e *env) status(ctx context.Context, output string, timeout time.Duration) error {
	if output != "" && output != "yaml" && output != "json" {
		return usageError{fmt.Errorf("-o %q: want yaml or json", output)}
	}
	c, _, err := e.client()
	if err != nil {
		return err
	}
	conns, err := doctor.Status(ctx, c, timeout, time.Now())
	if err != nil {
		return err
	}
	wrongCluster := ""
	if len(conns) == 0 {
		wrongCluster = doctor.WrongCluster(ctx, c)
	}
	if wrongCluster != "" && output != "" {
		fmt.Fprintln(e.err, "warning:", wrongCluster)
	}
	return printData(e, output, conns, func(w *tabwriter.Writer) {
		if wrongCluster != "" {
			fmt.Fprintln(w, "No Connections on this cluster: "+wrongCluster+".")
			return
		}
		statusTables(w, conns)
	})
}

// statusTables writes the Connections table and, below it, the bindings'
// APIs table.
func statusTables(w *tabwriter.Writer, conns []doctor.ConnectionSummary) {
	if len(conns) == 0 {
		fmt.Fprintln(w, "No Connections on this cluster (kubectl kbind grant on a provider prints one to apply).")
		return
	}
	fmt.Fprintln(w, "CONNECTION\tREADY\tISOLATION\tHEARTBEAT\tEXPORTED APIS")
	for _, c := range conns {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", c.Name, withReason(c.Ready, c.Reason), c.Isolation, c.Heartbeat, c.Exported)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CONNECTION\tBINDING\tREADY\tAPI\tROUTES\tOBJECTS\tSYNCED\tPENDING\tFAILED\tCONFLICTS\tDELETING\tIMPORTED")
	for _, c := range conns {
		for _, b := range c.Bindings {
			name := b.Kind + "/" + b.Name
			if b.Namespace != "" {
				name = b.Kind + "/" + b.Namespace + "/" + b.Name
			}
			if len(b.APIs) == 0 {
				fmt.Fprintf(w, "%s\t%s\t%s\t-\t\t\t\t\t\t\t\t\n", c.Name, name, withReason(b.Ready, b.Reason))
			}
			for _, a := range b.APIs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Name, name, withReason(b.Ready, b.Reason), apiName(a), a.Routes,
					a.Total, a.Synced, a.Pending, a.Failed, a.Conflicts, a.Deleting, a.Imported)
			}
		}
	}
	keptTable(w, conns)
}

// keptTable writes, when a binding's deletion protection kept provider
// copies, how many per API and where, with the command that lists and
// deletes them.
func keptTable(w *tabwriter.Writer, conns []doctor.ConnectionSummary) {
	header := false
	for _, c := range conns {
		for _, b := range c.Bindings {
			for _, k := range b.Kept {
				if !header {
					fmt.Fprintln(w)
					fmt.Fprintln(w, "CONNECTION\tBINDING\tKEPT COPIES OF\tCOUNT\tPROVIDER NAMESPACES\tLIST (--delete: DELETE) THEM")
					header = true
				}
				name, ref := b.Kind+"/"+b.Name, "clusterbinding/"+b.Name
				if b.Namespace != "" {
					name, ref = b.Kind+"/"+b.Namespace+"/"+b.Name, "binding/"+b.Name+" -n "+b.Namespace
				}
				api := k.Name
				if k.ProviderAPI != "" {
					api += "←" + k.ProviderAPI
				}
				namespaces := strings.Join(k.Namespaces, ",")
				if namespaces == "" {
					namespaces = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\tkubectl kbind kept %s\n", c.Name, name, api, k.Count, namespaces, ref)
			}
		}
	}
}

func withReason(status, reason string) string {
	if reason == "" {
		return status
	}
	return strings.Join([]string{status, "(" + reason + ")"}, " ")
}

// apiName is the consumer API, and the provider's it is projected from:
// "acmewidgets.acme.io←widgets.example.org".
func apiName(a doctor.APISummary) string {
	if a.Provider == "" {
		return a.Name
	}
	return a.Name + "←" + a.Provider
}
