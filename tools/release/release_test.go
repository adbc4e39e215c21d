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
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestReleaseIsReproducible builds a release of this machine's platform
// twice, from the real repository, into two directories: every file must
// be the same bytes (SHA256SUMS equal), and the artifacts must be what
// they claim (versions, image config, SBOM contents). make release does
// the same for every platform.
func TestReleaseIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kbind's binaries")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command(filepath.Join(repo, "hack/base-image/build.sh"), "--rootfs", rootfs).CombinedOutput(); err != nil {
		t.Fatalf("base rootfs: %v\n%s", err, out)
	}
	o := options{
		repo: repo, version: "0.0.0-dev+test", revision: "test", epoch: 1700000000,
		registry: "registry.example.com/kbind", arch: runtime.GOARCH, platforms: runtime.GOOS + "/" + runtime.GOARCH,
		krewBaseURL: "https://downloads.example.com/kbind", baseRootfs: rootfs,
	}
	var sums [2][]byte
	for i := range sums {
		o.out = filepath.Join(t.TempDir(), "dist")
		var log bytes.Buffer
		if err := run(context.Background(), o, &log); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
		t.Logf("release %d:\n%s", i+1, log.String())
		if sums[i], err = os.ReadFile(filepath.Join(o.out, "SHA256SUMS")); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Fatalf("two releases of one commit differ:\n%s\n---\n%s", sums[0], sums[1])
	}

	// Every plugin archive carries the LICENSE (krew-index requires it),
	// the README and the plugin's documentation next to the binary.
	archives, err := filepath.Glob(filepath.Join(o.out, "kubectl-kbind_*.tar.gz"))
	if err != nil || len(archives) == 0 {
		t.Fatalf("no plugin archive in the release: %v", err)
	}
	license, err := os.ReadFile(filepath.Join(repo, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range archives {
		files := untarGz(t, a)
		if !bytes.Equal(files["LICENSE"], license) {
			t.Errorf("%s: LICENSE missing or not the repository's (%d bytes)", filepath.Base(a), len(files["LICENSE"]))
		}
		for _, want := range []string{"README.md", "cli.md"} {
			if _, ok := files[want]; !ok {
				t.Errorf("%s lacks %s", filepath.Base(a), want)
			}
		}
	}

	// The konnector image: loadable as an OCI layout and by docker load,
	// the binary on the stand-in base, run as nonroot.
	dir := untar(t, filepath.Join(o.out, "images", "konnector_0.0.0-dev_test_linux_"+runtime.GOARCH+".oci.tar"))
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index: %v, %+v", err, m)
	}
	if ref := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != "registry.example.com/kbind/konnector:0.0.0-dev_test" {
		t.Errorf("the image is named %q", ref)
	}
	digests, err := os.ReadFile(filepath.Join(o.out, "images", "DIGESTS"))
	if err != nil || !strings.Contains(string(digests), "registry.example.com/kbind/konnector:0.0.0-dev_test@"+m.Manifests[0].Digest.String()) {
		t.Errorf("DIGESTS does not name the archive's digest %s: %s %v", m.Manifests[0].Digest, digests, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/konnector" || cf.Created.Unix() != o.epoch ||
		cf.Config.Labels["org.opencontainers.image.version"] != o.version {
		t.Errorf("image config: user %q, entrypoint %q, created %s, labels %v", cf.Config.User, cf.Config.Entrypoint, cf.Created, cf.Config.Labels)
	}
	var dockerManifest []struct{ Config string }
	if data, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err != nil || json.Unmarshal(data, &dockerManifest) != nil || len(dockerManifest) != 1 {
		t.Fatalf("manifest.json: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, dockerManifest[0].Config)); err != nil {
		t.Errorf("manifest.json's config: %v", err)
	}

	// The image's SBOM: the base's CA package (when this machine's
	// dpkg knows it), the binary and what it was built from.
	data, err := os.ReadFile(filepath.Join(o.out, "sbom", "konnector-image_linux_"+runtime.GOARCH+".cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	sbom := string(data)
	for _, want := range []string{`"pkg:golang/github.com/kbind/kbind/konnector@v0.0.0-dev%2Btest"`, `"pkg:golang/sigs.k8s.io/controller-runtime@`, `"timestamp": "2023-11-14T22:13:20Z"`} {
		if !strings.Contains(sbom, want) {
			t.Errorf("the image SBOM lacks %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(rootfs, "var/lib/dpkg/status.d/ca-certificates")); err == nil && !strings.Contains(sbom, `"pkg:deb/debian/ca-certificates@`) {
		t.Errorf("the image SBOM lacks the base's ca-certificates package")
	}
}

// TestReleaseRefusesATagOfAnotherVersion: nothing is built when HEAD's
// tag and the release disagree.
func TestReleaseRefusesATagOfAnotherVersion(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dist")
	err := run(context.Background(), options{repo: "../..", out: out, version: "0.2.0", tag: "v0.3.0", epoch: 1}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "HEAD is tagged v0.3.0 but the release is 0.2.0") {
		t.Fatalf("run = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused release wrote %s", out)
	}
}

func untar(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// untarGz reads a .tar.gz into memory, regular files by name.
func untarGz(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}
