package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// Build compiles the Go package pkg (an import path, e.g.
// github.com/kbind/kbind/konnector/cmd/konnector) into bin.
func Build(ctx context.Context, bin, pkg string) error {
	return BuildTagged(ctx, bin, pkg, "")
}

// BuildTagged is Build with build tags (comma-separated; none when empty),
// e.g. kbindbench for the konnector of the provider-scale bench.
func BuildTagged(ctx context.Context, bin, pkg, tags string) error {
	out, err := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// RunWithBinaries is a TestMain body: it builds each Go package of bins (a
// map from the variable that receives the binary's path to the package's
// import path) into a temporary directory, runs the tests and removes the
// directory. A build failure ends the test binary before any test runs.
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
// (e2e/scale's konnector is built with kbindbench).
func RunWithTaggedBinaries(m *testing.M, bins map[*string]Binary) {
	dir, err := os.MkdirTemp("", "kbind-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for path, b := range bins {
		*path = filepath.Join(dir, filepath.Base(b.Pkg))
		if b.Tags != "" {
			*path += "-" + strings.ReplaceAll(b.Tags, ",", "-")
		}
		if err := BuildTagged(context.Background(), *path, b.Pkg, b.Tags); err != nil {
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
