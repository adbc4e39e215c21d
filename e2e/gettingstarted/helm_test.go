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

package gettingstarted

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"

	"github.com/kbind/kbind/e2e/harness"
)

// The page's helm commands run through this: the test binary, linked as
// `helm` into the PATH of the page's blocks, is Helm's own install and
// uninstall code (the Helm SDK, helm.sh/helm/v3/pkg/action, and Helm's
// --set parser, pkg/strvals) behind the command line the page uses. No
// helm binary is built: the helm CLI needs modules e2e does not require
// (kustomize). Any command or flag the page uses that this does not know
// fails the step, naming it.

// isHelm says whether the test binary was started as helm.
func isHelm() bool { return filepath.Base(os.Args[0]) == "helm" }

// helmMain runs `helm <args>` and returns its exit code.
func helmMain(args []string, out, errOut io.Writer) int {
	if err := helm(args, out); err != nil {
		fmt.Fprintln(errOut, "Error:", err)
		return 1
	}
	return 0
}

type helmFlags struct {
	kubeContext, kubeconfig, namespace string
	createNamespace                    bool
	set                                []string
	positional                         []string
}

// parseHelmFlags reads the flags the page's helm commands use.
func parseHelmFlags(args []string) (helmFlags, error) {
	f := helmFlags{namespace: "default"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, inline := strings.Cut(a, "=")
		takes := map[string]*string{"--kube-context": &f.kubeContext, "--kubeconfig": &f.kubeconfig, "-n": &f.namespace, "--namespace": &f.namespace}
		switch {
		case takes[name] != nil || name == "--set":
			if !inline {
				if i+1 == len(args) {
					return f, fmt.Errorf("flag needs an argument: %s", name)
				}
				i++
				value = args[i]
			}
			if name == "--set" {
				f.set = append(f.set, value)
			} else {
				*takes[name] = value
			}
		case a == "--create-namespace":
			f.createNamespace = true
		case strings.HasPrefix(a, "-"):
			return f, fmt.Errorf("unknown flag: %s (the test's helm, e2e/gettingstarted, knows --kube-context, --kubeconfig, -n, --create-namespace and --set)", a)
		default:
			f.positional = append(f.positional, a)
		}
	}
	return f, nil
}

func helm(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("no command (the test's helm knows install and uninstall)")
	}
	f, err := parseHelmFlags(args[1:])
	if err != nil {
		return err
	}
	cfg, err := harness.HelmConfig(f.kubeconfig, f.kubeContext, f.namespace)
	if err != nil {
		return err
	}
	switch args[0] {
	case "install":
		if len(f.positional) != 2 {
			return fmt.Errorf("\"helm install\" requires 2 arguments (NAME CHART), got %q", f.positional)
		}
		values := map[string]any{}
		for _, s := range f.set {
			if err := strvals.ParseInto(s, values); err != nil {
				return fmt.Errorf("failed parsing --set data: %w", err)
			}
		}
		chrt, err := loader.Load(f.positional[1])
		if err != nil {
			return err
		}
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = f.positional[0], f.namespace, f.createNamespace
		rel, err := install.Run(chrt, values)
		if err != nil {
			return fmt.Errorf("INSTALLATION FAILED: %w", err)
		}
		fmt.Fprintf(out, "NAME: %s\nNAMESPACE: %s\nSTATUS: %s\nREVISION: %d\nNOTES:\n%s\n", rel.Name, rel.Namespace, rel.Info.Status, rel.Version, rel.Info.Notes)
		return nil
	case "uninstall":
		if len(f.positional) != 1 {
			return fmt.Errorf("\"helm uninstall\" requires 1 argument (NAME), got %q", f.positional)
		}
		res, err := action.NewUninstall(cfg).Run(f.positional[0])
		if err != nil {
			return fmt.Errorf("uninstall: %w", err)
		}
		if res != nil && res.Info != "" {
			fmt.Fprintln(out, res.Info)
		}
		fmt.Fprintf(out, "release %q uninstalled\n", f.positional[0])
		return nil
	default:
		return fmt.Errorf("unknown command %q for the test's helm (it knows install and uninstall)", args[0])
	}
}
