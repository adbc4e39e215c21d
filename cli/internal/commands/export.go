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
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// exportedAPI is one line of `export --list`.
type exportedAPI struct {
	Name     string   `json:"name"`
	Scope    string   `json:"scope"`
	Versions []string `json:"versions"`
}

func newExport(e *env) *cobra.Command {
	var list, remove bool
	var output string
	cmd := &cobra.Command{
		Use:   "export CRD... | export --list",
		Short: "Mark provider CRDs as exported to consumers, or list the exported ones",
		Long: `Mark CRDs on the provider as exported (the label core.kbind.io/exported=true), which the
CRD schema source reads (docs/bindings.md). --remove takes the mark away; --list shows what is exported.`,
		Example: `  kubectl kbind export widgets.example.org gadgets.example.org
  kubectl kbind export --list
  kubectl kbind export --list -o yaml
  kubectl kbind export --remove gadgets.example.org`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case list && (len(args) > 0 || remove):
				return usageError{fmt.Errorf("--list takes no CRD names and no --remove")}
			case list:
				return e.listExported(cmd.Context(), output)
			case len(args) == 0:
				return usageError{fmt.Errorf("name at least one CRD (<plural>.<group>), or use --list")}
			case output != "":
				return usageError{fmt.Errorf("-o applies to --list only")}
			}
			return e.markExported(cmd.Context(), args, !remove)
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the exported CRDs")
	cmd.Flags().BoolVar(&remove, "remove", false, "take the export mark away")
	cmd.Flags().StringVarP(&output, "output", "o", "", "with --list: yaml or json (default: a table)")
	return cmd
}

func (e *env) markExported(ctx context.Context, names []string, exported bool) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("there is no CRD %q on this cluster (name it as <plural>.<group>, e.g. widgets.example.org; kubectl get crds lists them)", name)
			}
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		base := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		verb := "exported"
		if exported {
			crd.Labels[kbindv1alpha1.ExportedLabel] = kbindv1alpha1.ExportedLabelValue
		} else {
			delete(crd.Labels, kbindv1alpha1.ExportedLabel)
			verb = "no longer exported"
		}
		if err := c.Patch(ctx, crd, base); err != nil {
			return fmt.Errorf("labelling CRD %s: %w", name, err)
		}
		fmt.Fprintf(e.out, "customresourcedefinition/%s %s\n", name, verb)
	}
	return nil
}

func (e *env) listExported(ctx context.Context, output string) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds, client.MatchingLabels{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}); err != nil {
		return fmt.Errorf("listing exported CRDs: %w", err)
	}
	apis := make([]exportedAPI, 0, len(crds.Items))
	for _, crd := range crds.Items {
		api := exportedAPI{Name: crd.Name, Scope: string(crd.Spec.Scope)}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				api.Versions = append(api.Versions, v.Name)
			}
		}
		apis = append(apis, api)
	}
	sort.Slice(apis, func(i, j int) bool { return apis[i].Name < apis[j].Name })
	return printData(e, output, apis, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tSCOPE\tVERSIONS")
		for _, a := range apis {
			fmt.Fprintf(w, "%s\t%s\t%s\n", a.Name, a.Scope, strings.Join(a.Versions, ","))
		}
	})
}

// printData prints data as -o says: yaml, json, or the table.
func printData(e *env, output string, data any, table func(*tabwriter.Writer)) error {
	switch output {
	case "json":
		enc := json.NewEncoder(e.out)
		enc.SetIndent("", "  ")
		return enc.Encode(data)
	case "yaml":
		out, err := yaml.Marshal(data)
		if err != nil {
			return err
		}
		_, err = e.out.Write(out)
		return err
	case "":
		w := tabwriter.NewWriter(e.out, 0, 4, 3, ' ', 0)
		table(w)
		return w.Flush()
	}
	return usageError{fmt.Errorf("-o %q: want yaml or json", output)}
}
