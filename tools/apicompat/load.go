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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kbind/kbind/tools/apicompat/compat"
)

// crdDir is where a module copy keeps its generated CRDs.
const crdDir = "crds"

// compare returns every change from the module in oldDir (the baseline) to
// the one in newDir (the working tree): the Go API of each package
// (apidiff), then the CRD schemas.
func compare(oldDir, newDir string) ([]compat.Change, error) {
	oldMod, err := loadModule(oldDir, true)
	if err != nil {
		return nil, fmt.Errorf("the baseline's Go packages: %w", err)
	}
	newMod, err := loadModule(newDir, false)
	if err != nil {
		return nil, fmt.Errorf("the working tree's Go packages: %w", err)
	}
	var changes []compat.Change
	for _, c := range apidiff.ModuleChanges(oldMod, newMod).Changes {
		changes = append(changes, compat.Change{Message: "go: " + c.Message, Breaking: !c.Compatible})
	}
	oldCRDs, err := loadCRDs(filepath.Join(oldDir, crdDir))
	if err != nil {
		return nil, fmt.Errorf("the baseline's CRDs: %w", err)
	}
	newCRDs, err := loadCRDs(filepath.Join(newDir, crdDir))
	if err != nil {
		return nil, fmt.Errorf("the working tree's CRDs: %w", err)
	}
	return append(changes, compat.CompareCRDs(oldCRDs, newCRDs)...), nil
}

// loadModule type-checks every package of the module in dir, outside the
// workspace (GOWORK=off); modMod lets go fill in what the copy's go.sum
// lacks from the module cache (GOFLAGS=-mod=mod). Internal packages are not
// API and are left out.
func loadModule(dir string, modMod bool) (*apidiff.Module, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return nil, fmt.Errorf("%s/go.mod names no module", dir)
	}
	env := append(os.Environ(), "GOWORK=off")
	if modMod {
		env = append(env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: dir, Env: env}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	mod := &apidiff.Module{Path: path}
	var errs []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		if slices.Contains(strings.Split(p.PkgPath, "/"), "internal") {
			continue
		}
		mod.Packages = append(mod.Packages, p.Types)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s does not type-check:\n%s", dir, strings.Join(errs, "\n"))
	}
	if len(mod.Packages) == 0 {
		return nil, fmt.Errorf("%s holds no Go package", dir)
	}
	return mod, nil
}

// loadCRDs decodes every *.yaml in dir, keyed by CRD name.
func loadCRDs(dir string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			return nil, fmt.Errorf("%s is not a named CustomResourceDefinition", f)
		}
		out[crd.Name] = crd
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRD (*.yaml) in %s", dir)
	}
	return out, nil
}
