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
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The end-to-end tests run the tool on a temporary git repository holding a
// copy of the real api module: its first commit is the baseline, the
// working tree is what each test edits. Loading the packages needs only the
// module cache the build already filled (GOFLAGS=-mod=mod for the baseline).

const (
	typesFile = "api/core/v1alpha1/connection_types.go"
	crdFile   = "api/crds/core.kbind.io_connections.yaml"
	autoBind  = "\tAutoBind bool `json:\"autoBind,omitempty\"`\n"
)

// newRepo commits a copy of ../../api and returns the repository and the
// commit, which hack/api-compat/baseline names.
func newRepo(t *testing.T) (repo, commit string) {
	t.Helper()
	repo = t.TempDir()
	if err := os.CopyFS(filepath.Join(repo, "api"), os.DirFS("../../api")); err != nil {
		t.Fatal(err)
	}
	mustGit(t, repo, "init", "-q")
	mustGit(t, repo, "add", "api")
	mustGit(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "baseline")
	commit = mustGit(t, repo, "rev-parse", "HEAD")
	writeRepoFile(t, repo, "hack/api-compat/baseline", "# the baseline\n"+commit+"\n")
	writeRepoFile(t, repo, "hack/api-compat/exceptions.yaml", "exceptions: []\n")
	return repo, commit
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeRepoFile(t *testing.T, repo, path, content string) {
	t.Helper()
	path = filepath.Join(repo, path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// removeAutoBind removes the exported field ConnectionSpec.AutoBind from the
// Go types and regenerates nothing.
func removeAutoBind(t *testing.T, repo string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, typesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(autoBind)) {
		t.Fatalf("%s no longer has %q: pick another field for this test", typesFile, autoBind)
	}
	writeRepoFile(t, repo, typesFile, strings.Replace(string(data), autoBind, "", 1))
}

// dropSecretNamespace removes .spec.kubeconfigSecretRef.namespace from the
// Connection CRD's v1alpha1 schema.
func dropSecretNamespace(t *testing.T, repo string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, crdFile))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	ref := spec.Properties["kubeconfigSecretRef"]
	if _, ok := ref.Properties["namespace"]; !ok {
		t.Fatalf("%s has no .spec.kubeconfigSecretRef.namespace: pick another property for this test", crdFile)
	}
	delete(ref.Properties, "namespace")
	spec.Properties["kubeconfigSecretRef"] = ref
	root.Properties["spec"] = spec
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	writeRepoFile(t, repo, crdFile, string(out))
}

func runTool(t *testing.T, repo string) (ok bool, out string) {
	t.Helper()
	var buf bytes.Buffer
	ok, err := run(options{repo: repo, module: "api", baseline: "hack/api-compat/baseline", exceptions: "hack/api-compat/exceptions.yaml"}, &buf)
	t.Logf("output:\n%s", buf.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return ok, buf.String()
}

const (
	goRemoved  = "go: ./core/v1alpha1.ConnectionSpec.AutoBind: removed"
	crdRemoved = "connections.core.kbind.io v1alpha1: .spec.kubeconfigSecretRef.namespace: removed"
)

func TestGateUnmodifiedPasses(t *testing.T) {
	repo, commit := newRepo(t)
	ok, out := runTool(t, repo)
	if !ok || !strings.Contains(out, "api-compat: ok") {
		t.Errorf("an unmodified copy did not pass")
	}
	if !strings.Contains(out, commit[:12]+" (hack/api-compat/baseline;") {
		t.Errorf("the output does not name the baseline commit %s from the baseline file", commit)
	}

	// An added exported name is compatible: printed, and the gate passes.
	writeRepoFile(t, repo, "api/core/v1alpha1/added.go", "package v1alpha1\n\n// AddedForTest is new.\nconst AddedForTest = 1\n")
	ok, out = runTool(t, repo)
	if !ok || !strings.Contains(out, "  + go: ./core/v1alpha1.AddedForTest: added\n") {
		t.Errorf("an added constant: want a pass listing it as a compatible change")
	}
}

func TestGateFailsOnRemovedGoField(t *testing.T) {
	repo, _ := newRepo(t)
	removeAutoBind(t, repo)
	ok, out := runTool(t, repo)
	if ok || !strings.Contains(out, "  - "+goRemoved+"\n") {
		t.Errorf("removing ConnectionSpec.AutoBind: want a failure naming %q", goRemoved)
	}
}

func TestGateFailsOnDroppedCRDProperty(t *testing.T) {
	repo, _ := newRepo(t)
	dropSecretNamespace(t, repo)
	ok, out := runTool(t, repo)
	if ok || !strings.Contains(out, "  - "+crdRemoved+"\n") {
		t.Errorf("dropping the property: want a failure naming %q", crdRemoved)
	}
	if strings.Contains(out, "go: ") {
		t.Errorf("the Go API did not change, yet the output mentions it")
	}
}

func TestGateExceptions(t *testing.T) {
	repo, _ := newRepo(t)
	removeAutoBind(t, repo)
	dropSecretNamespace(t, repo)
	writeRepoFile(t, repo, "hack/api-compat/exceptions.yaml", `exceptions:
- message: "`+goRemoved+`"
  reason: test
  issue: 39
- message: "`+crdRemoved+`"
  reason: test
  issue: 39
`)
	if ok, out := runTool(t, repo); !ok || !strings.Contains(out, "~ "+goRemoved+" (#39: test)") {
		t.Errorf("both changes accepted: want a pass listing them as accepted")
	}

	// The Go field is back: its exception matches nothing any more.
	mustGit(t, repo, "checkout", "-q", "--", typesFile)
	if ok, out := runTool(t, repo); ok || !strings.Contains(out, "? "+goRemoved+" (#39)") {
		t.Errorf("a stale exception: want a failure naming it")
	}
}

func TestResolveBaseline(t *testing.T) {
	repo := t.TempDir()
	mustGit(t, repo, "init", "-q")
	commit := func(msg string) string {
		writeRepoFile(t, repo, "f", msg)
		mustGit(t, repo, "add", "f")
		mustGit(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", "commit", "-q", "-m", msg)
		return mustGit(t, repo, "rev-parse", "HEAD")
	}
	first, second, head := commit("one"), commit("two"), commit("three")
	writeRepoFile(t, repo, "baseline", first+"\n")

	resolve := func() (baseline, error) { return resolveBaseline(repo, "baseline") }
	if b, err := resolve(); err != nil || b.commit != first || !strings.HasPrefix(b.source, "baseline;") {
		t.Errorf("no tag: got %+v, %v; want the file's %s", b, err, first)
	}
	mustGit(t, repo, "tag", "v0.1.0", first)
	mustGit(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "tag.gpgsign=false", "tag", "-a", "-m", "v0.2.0", "v0.2.0", second)
	mustGit(t, repo, "tag", "v0.3.0", head)
	mustGit(t, repo, "tag", "not-a-release", head)
	if b, err := resolve(); err != nil || b.commit != second || b.source != "release tag v0.2.0" {
		t.Errorf("tags: got %+v, %v; want the annotated v0.2.0 at %s (v0.3.0 is HEAD's own)", b, err, second)
	}

	for _, tag := range []string{"v0.1.0", "v0.2.0", "v0.3.0"} {
		mustGit(t, repo, "tag", "-d", tag)
	}
	writeRepoFile(t, repo, "baseline", "7184c3e\n")
	if _, err := resolve(); err == nil || !strings.Contains(err.Error(), "not a full commit sha") {
		t.Errorf("an abbreviated sha: got %v, want an error asking for the full sha", err)
	}
	writeRepoFile(t, repo, "baseline", strings.Repeat("ab", 20)+"\n")
	if _, err := resolve(); err == nil || !strings.Contains(err.Error(), "is not in this clone") {
		t.Errorf("a commit not in the clone: got %v", err)
	}

	// A shallow clone of the last commit lacks the baseline commit.
	shallow := filepath.Join(t.TempDir(), "shallow")
	mustGit(t, repo, "clone", "-q", "--depth=1", "file://"+repo, shallow)
	writeRepoFile(t, shallow, "baseline", first+"\n")
	if _, err := resolveBaseline(shallow, "baseline"); err == nil || !strings.Contains(err.Error(), "is not in this clone: it is a shallow clone; run `git fetch --unshallow --tags`") {
		t.Errorf("a shallow clone without the baseline commit: got %v, want an error saying so and to run git fetch --unshallow", err)
	}
	// Even with the commit present, a shallow clone may hide release tags.
	writeRepoFile(t, shallow, "baseline", head+"\n")
	if _, err := resolveBaseline(shallow, "baseline"); err == nil || !strings.Contains(err.Error(), "this is a shallow clone") {
		t.Errorf("a shallow clone: got %v, want an error saying to run git fetch --unshallow", err)
	}
}

// TestExtract checks that the baseline copy is the committed module, not the
// working tree.
func TestExtract(t *testing.T) {
	repo, commit := newRepo(t)
	removeAutoBind(t, repo)
	dst := t.TempDir()
	if err := extract(repo, commit, "api", dst); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dst, typesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(autoBind)) {
		t.Errorf("the extracted %s is not the committed one", typesFile)
	}
	var files int
	_ = fs.WalkDir(os.DirFS(dst), ".", func(_ string, d fs.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			files++
		}
		return nil
	})
	if want := strings.Count(mustGit(t, repo, "ls-files", "api"), "\n") + 1; files != want {
		t.Errorf("extracted %d files, want the %d committed", files, want)
	}
}
