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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// buildInfoPkg is where the binaries keep their version (make build
// stamps the same variables).
const buildInfoPkg = "github.com/kbind/kbind/flagconfig/buildinfo"

// binary is one Go program the release builds: its module directory in
// the repository, its main package and the platform.
type binary struct {
	name, module, pkg string
	goos, goarch      string
}

func (b binary) file() string {
	if b.goos == "windows" {
		return b.name + ".exe"
	}
	return b.name
}

// build compiles b into dir with -trimpath and the version stamped, and
// returns the file's path. Two builds of one commit with one Go toolchain
// give the same bytes: paths are trimmed, the build id is a hash of the
// inputs, the VCS stamp is the commit's.
func build(ctx context.Context, repo, dir, version, revision string, b binary) (string, error) {
	out := filepath.Join(dir, b.goos+"_"+b.goarch, b.file())
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", buildInfoPkg, version, buildInfoPkg, revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, b.pkg)
	cmd.Dir = filepath.Join(repo, b.module)
	// GOWORK is cleared: make release runs this tool with GOWORK=off, and
	// the binaries are built in the workspace like make build builds them.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+b.goos, "GOARCH="+b.goarch, "GOFLAGS=", "GOWORK=")
	if outp, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s for %s/%s: %w\n%s", b.name, b.goos, b.goarch, err, outp)
	}
	return out, nil
}

// binaryVersion runs file --version and returns the version it prints
// ("<name> <version> (revision …)"). Go does not record -ldflags in the
// build information of a -trimpath build, so running the binary is the
// one way to see its stamp; only binaries of this machine's platform can
// be run, and the others are built by the same call with the same flags.
func binaryVersion(ctx context.Context, file string) (string, error) {
	out, err := exec.CommandContext(ctx, file, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", file, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		return "", fmt.Errorf("%s --version printed %q, not \"<name> <version> …\"", file, out)
	}
	return fields[1], nil
}

// runnable says whether this machine can run a binary built for goos/goarch.
func runnable(goos, goarch string) bool { return goos == runtime.GOOS && goarch == runtime.GOARCH }
