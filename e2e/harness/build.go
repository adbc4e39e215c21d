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

package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// BinDirEnv names the directory of the binaries `make build` wrote
// (konnector, backend, kubectl-kbind, quickstart): `make test` and the
// test targets that build first export it, so each binary is compiled
// once per run instead of once per test package. Unset (a plain go test),
// every binary is built from this tree, so a test never runs a stale one.
const BinDirEnv = "KBIND_BIN_DIR"

// madeBinaries are the packages `make build` compiles, by import path, and
// the file each is written to.
var madeBinaries = map[string]string{
	"github.com/kbind/kbind/konnector/cmd/konnector": "konnector",
	"github.com/kbind/kbind/backend/cmd/backend":     "backend",
	"github.com/kbind/kbind/cli/cmd/kubectl-kbind":   "kubectl-kbind",
	"github.com/kbind/kbind/e2e/cmd/quickstart":      "quickstart",
}

// Prebuilt returns the binary of pkg that `make build` wrote into
// $KBIND_BIN_DIR, when that is set and pkg, built without tags, is one of
// its binaries; ok is false otherwise (build it). A set KBIND_BIN_DIR
// without the file is an error, never a silent rebuild.
func Prebuilt(pkg, tags string) (path string, ok bool, err error) {
	return prebuilt(os.Getenv(BinDirEnv), pkg, tags)
}

func prebuilt(dir, pkg, tags string) (string, bool, error) {
	name, made := madeBinaries[pkg]
	if dir == "" || !made || tags != "" {
		return "", false, nil
	}
	if !filepath.IsAbs(dir) {
		return "", false, fmt.Errorf("%s=%s must be an absolute path (the tests run in their packages' directories)", BinDirEnv, dir)
	}
	path := filepath.Join(dir, name)
	fi, err := os.Stat(path)
	if err != nil {
		return "", false, fmt.Errorf("%s=%s has no %s (%v): run `make build`, or unset %s to build it here", BinDirEnv, dir, name, err, BinDirEnv)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", false, fmt.Errorf("%s=%s: %s is not an executable file", BinDirEnv, dir, path)
	}
	return path, true, nil
}

// Build compiles the Go package pkg (an import path, e.g.
// github.com/kbind/kbind/konnector/cmd/konnector) into bin. When
// $KBIND_BIN_DIR holds pkg's binary (Prebuilt), bin becomes a symbolic
// link to it instead.
func Build(ctx context.Context, bin, pkg string) error {
	return BuildTagged(ctx, bin, pkg, "")
}

// BuildTagged is Build with build tags (comma-separated; none when empty),
// e.g. kbindbench for the konnector of the provider-scale bench. A tagged
// build is always compiled: `make build` builds without tags.
func BuildTagged(ctx context.Context, bin, pkg, tags string) error {
	made, ok, err := Prebuilt(pkg, tags)
	if err != nil {
		return err
	}
	if ok {
		if err := os.Remove(bin); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// go build -o creates the directory; so does this.
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return err
		}
		return os.Symlink(made, bin)
	}
	out, err := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// RunWithBinaries is a TestMain body: it builds each Go package of bins (a
// map from the variable that receives the binary's path to the package's
// import path) into a temporary directory — or takes it from
// $KBIND_BIN_DIR (Prebuilt) —, runs the tests and removes the directory. A
// build failure ends the test binary before any test runs.
func RunWithBinaries(m *testing.M, bins map[*string]string) {
	tagged := map[*string]Binary{}
	for path, pkg := range bins {
		tagged[path] = Binary{Pkg: pkg}
	}
	RunWithTaggedBinaries(m, tagged)
}

// Binary is a Go package to build, with build tags (comma-separated).
type Binary struct {
	Pkg, Tags string
}

// RunWithTaggedBinaries is RunWithBinaries with build tags per binary
// (e2e/scale's konnector is built with kbindbench). A binary that
// $KBIND_BIN_DIR holds (Prebuilt) is used from there, not built.
func RunWithTaggedBinaries(m *testing.M, bins map[*string]Binary) {
	dir, err := os.MkdirTemp("", "kbind-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for path, b := range bins {
		made, ok, err := Prebuilt(b.Pkg, b.Tags)
		if ok {
			*path = made
			continue
		}
		if err == nil {
			*path = filepath.Join(dir, filepath.Base(b.Pkg))
			if b.Tags != "" {
				*path += "-" + strings.ReplaceAll(b.Tags, ",", "-")
			}
			err = BuildTagged(context.Background(), *path, b.Pkg, b.Tags)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// WriteImpersonating writes a copy of the kubeconfig src to dst in which
// every user impersonates user (e.g. a chart's ServiceAccount,
// system:serviceaccount:<namespace>:<name>), so a process run with it gets
// exactly that identity's RBAC.
func WriteImpersonating(src, dst, user string) error {
	kc, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	for _, u := range kc.AuthInfos {
		u.Impersonate = user
	}
	return clientcmd.WriteToFile(*kc, dst)
}

// FreeAddr is LoopbackAddr for a test: for a process to bind, or for a
// client to be refused.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// BuildAt builds the Go package dir (relative to the repository root,
// e.g. ./konnector/cmd/konnector) of the repository at repo as it was at
// commit rev into bin, and returns the directory holding that commit's
// tree (its api/crds, say), which the caller removes. The tree is taken
// with git archive, so the commit must be in the clone; the build uses the
// commit's own go.work and go.sum files.
func BuildAt(ctx context.Context, repo, rev, dir, bin string) (string, error) {
	tree, err := os.MkdirTemp("", "kbind-at-")
	if err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", rev)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", tree)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	extract.Stdin = pipe
	var archiveErr strings.Builder
	archive.Stderr = &archiveErr
	if err := extract.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		_ = os.RemoveAll(tree)
		return "", fmt.Errorf("git archive %s (is the commit in this clone? a shallow clone needs git fetch --unshallow): %v: %s", rev, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		_ = os.RemoveAll(tree)
		return "", fmt.Errorf("extracting %s: %w", rev, err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, dir)
	build.Dir = tree
	build.Env = append(os.Environ(), "GOWORK=", "GOFLAGS=", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tree)
		return "", fmt.Errorf("building %s at %s: %v\n%s", dir, rev, err, out)
	}
	return tree, nil
}
