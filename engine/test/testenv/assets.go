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

package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// KubernetesVersion is the version of the local control plane binaries that
// tools/controlplane/build.sh builds.
const KubernetesVersion = "v1.37.2"

// AssetsEnv is the environment variable that points at a directory holding
// etcd, kube-apiserver and kubectl. It is the variable controller-runtime's
// envtest reads, so an existing setup-envtest installation works as is.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// requiredBinaries are the binaries every test control plane needs.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kubectl"}

// DefaultAssetsDir is the versioned user cache directory that
// tools/controlplane/build.sh fills.
func DefaultAssetsDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("locating the control plane cache: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "kbind", "k8s", KubernetesVersion), nil
}

// AssetsDir returns the directory holding the control plane binaries:
// KUBEBUILDER_ASSETS when set, else the default cache directory. It fails
// with an instruction when a binary is missing, instead of letting envtest
// try a download that cannot work here.
func AssetsDir() (string, error) {
	dir := os.Getenv(AssetsEnv)
	source := AssetsEnv
	if dir == "" {
		var err error
		if dir, err = DefaultAssetsDir(); err != nil {
			return "", err
		}
		source = "the kbind control plane cache"
	}
	var missing []error
	for _, bin := range requiredBinaries {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			missing = append(missing, fmt.Errorf("%s: %w", bin, err))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("control plane binaries missing in %s (%s); run `make controlplane` "+
			"(or set %s to a directory holding etcd, kube-apiserver and kubectl): %w",
			dir, source, AssetsEnv, errors.Join(missing...))
	}
	return dir, nil
}

// KubectlPath returns the path of the kubectl the project built.
func KubectlPath() (string, error) {
	dir, err := AssetsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubectl"), nil
}
