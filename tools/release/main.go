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

// Command release builds one kbind release into a directory (make release
// VERSION=x.y.z writes dist/): both images as OCI archives with their
// digests, the three Helm charts packaged, the kubectl-kbind plugin
// archives with a krew manifest, a CycloneDX SBOM per binary and per
// image, the release's CHANGELOG section and SHA256SUMS over all of it.
//
// The same commit, Go toolchain, base image and SOURCE_DATE_EPOCH give
// the same bytes on every machine: every archive, layer and chart is
// written with the release's timestamp and no owner names, the base image
// is built from files or pinned by digest, the SBOMs' timestamps and
// serial numbers come from the inputs. Nothing is pushed anywhere:
// docs/releasing.md says how to publish each artifact.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

type options struct {
	repo, out, version, revision, tag  string
	epoch                              int64
	registry, arch, krewBaseURL        string
	platforms                          string
	baseRootfs, baseLayout, baseDigest string
}

func main() {
	var o options
	flag.StringVar(&o.repo, "repo", "../..", "the repository's root")
	flag.StringVar(&o.out, "out", "dist", "the directory to write the release into (emptied first)")
	flag.StringVar(&o.version, "version", "", "the release version, MAJOR.MINOR.PATCH[-pre][+build] (required)")
	flag.StringVar(&o.revision, "revision", "unknown", "the commit the release is built from (stamped into the binaries and images)")
	flag.StringVar(&o.tag, "tag", "", "the version tag HEAD carries (v-prefixed), if any: the release must be its version")
	flag.Int64Var(&o.epoch, "source-date-epoch", 0, "every timestamp of the release, in Unix seconds (the commit's time; SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.registry, "registry", "ghcr.io/kbind", "the registry and namespace the images are named for")
	flag.StringVar(&o.arch, "arch", "amd64", "the images' architecture")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64", "the kubectl-kbind plugin's platforms")
	flag.StringVar(&o.krewBaseURL, "krew-base-url", "", "where the plugin archives will be downloaded from (the krew manifest's URIs)")
	flag.StringVar(&o.baseRootfs, "base-rootfs", "", "build the images on a base made of this root file system (hack/base-image/build.sh --rootfs)")
	flag.StringVar(&o.baseLayout, "base-layout", "", "build the images on the base image in this OCI image layout (with --base-digest)")
	flag.StringVar(&o.baseDigest, "base-digest", "", "the base image's manifest (or index) digest in --base-layout")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	if err := checkVersion(o.version, o.tag); err != nil {
		return err
	}
	if o.epoch <= 0 {
		return errors.New("--source-date-epoch is required (make release passes the commit's time)")
	}
	if (o.baseRootfs == "") == (o.baseLayout == "") {
		return errors.New("give exactly one base: --base-rootfs DIR, or --base-layout DIR with --base-digest sha256:…")
	}
	if o.krewBaseURL == "" {
		return errors.New("--krew-base-url is required")
	}
	changelog, err := os.ReadFile(filepath.Join(o.repo, "CHANGELOG.md"))
	if err != nil {
		return fmt.Errorf("reading CHANGELOG.md: %w", err)
	}
	section, err := changelogSection(string(changelog), o.version)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	for _, d := range []string{"", "charts", "images", "sbom", "krew"} {
		if err := os.MkdirAll(filepath.Join(o.out, d), 0o755); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "kbind-release-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	if err := os.WriteFile(filepath.Join(o.out, "CHANGELOG-"+o.version+".md"), []byte(section), 0o644); err != nil {
		return err
	}

	r := &releaser{options: o, epoch: time.Unix(o.epoch, 0).UTC(), work: work}
	for _, phase := range []func(context.Context) error{r.plugin, r.charts, r.images} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	if err := consistent(o.version, r.found); err != nil {
		return err
	}
	listing, err := writeSums(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kbind %s (revision %s, SOURCE_DATE_EPOCH %d) in %s:\n%s", o.version, o.revision, o.epoch, o.out, listing)
	return nil
}

// releaser builds a release's parts into options.out.
type releaser struct {
	options
	epoch time.Time
	work  string    // where binaries are built
	found []stamped // what each artifact says its version is
}

// build compiles b and checks its --version where it can run here.
func (r *releaser) build(ctx context.Context, b binary) (string, error) {
	file, err := build(ctx, r.repo, r.work, r.version, r.revision, b)
	if err != nil || !runnable(b.goos, b.goarch) {
		return file, err
	}
	v, err := binaryVersion(ctx, file)
	r.found = append(r.found, stamped{b.name + " --version", v})
	return file, err
}

// plugin writes one kubectl-kbind archive and SBOM per platform, and the
// krew manifest of the archives.
func (r *releaser) plugin(ctx context.Context) error {
	var archives []pluginArchive
	for _, p := range strings.Fields(r.platforms) {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q is not os/arch", p)
		}
		b := binary{name: "kubectl-kbind", module: "cli", pkg: "./cmd/kubectl-kbind", goos: goos, goarch: goarch}
		file, err := r.build(ctx, b)
		if err != nil {
			return err
		}
		bom, _, err := binaryBOM(b.name, file, r.version, r.epoch)
		if err != nil {
			return err
		}
		if err := writeBOM(bom, filepath.Join(r.out, "sbom", fmt.Sprintf("%s_%s_%s.cdx.json", b.name, b.goos, b.goarch))); err != nil {
			return err
		}
		a, err := r.pluginArchive(b, file)
		if err != nil {
			return err
		}
		archives = append(archives, a)
	}
	manifest, err := krewManifest(r.version, r.krewBaseURL, archives)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, "krew", "kbind.yaml"), manifest, 0o644)
}

// charts packages every chart with the release's version and image tag.
func (r *releaser) charts(context.Context) error {
	for _, c := range chartNames {
		file, err := packageChart(filepath.Join(r.repo, "charts", c), filepath.Join(r.out, "charts"), r.version, imageTag(r.version), r.epoch)
		if err != nil {
			return err
		}
		v, err := chartVersions(file, c)
		if err != nil {
			return err
		}
		r.found = append(r.found, v...)
	}
	return nil
}

// images builds each image on the base, writes it as an OCI archive with
// its digest in images/DIGESTS, and an SBOM of its binary and of it.
func (r *releaser) images(ctx context.Context) error {
	base, err := r.baseImage()
	if err != nil {
		return err
	}
	var digests []string
	for _, im := range kbindImages {
		b := binary{name: im.name, module: im.name, pkg: "./cmd/" + im.name, goos: "linux", goarch: r.arch}
		file, err := r.build(ctx, b)
		if err != nil {
			return err
		}
		appBOM, app, err := binaryBOM(b.name, file, r.version, r.epoch)
		if err != nil {
			return err
		}
		if err := writeBOM(appBOM, filepath.Join(r.out, "sbom", fmt.Sprintf("%s_linux_%s.cdx.json", b.name, r.arch))); err != nil {
			return err
		}
		img, err := buildImage(base, im, file, r.version, r.revision, r.epoch)
		if err != nil {
			return fmt.Errorf("image %s: %w", im.name, err)
		}
		ref := r.registry + "/" + im.name + ":" + imageTag(r.version)
		digest, err := writeOCIArchive(img, ref, filepath.Join(r.out, "images", fmt.Sprintf("%s_%s_linux_%s.oci.tar", im.name, imageTag(r.version), r.arch)), r.epoch)
		if err != nil {
			return err
		}
		digests = append(digests, fmt.Sprintf("%s@%s", ref, digest))
		imgBOM, err := imageBOM(img, ref, app, appBOM, r.version, r.epoch)
		if err != nil {
			return fmt.Errorf("SBOM of image %s: %w", im.name, err)
		}
		if err := writeBOM(imgBOM, filepath.Join(r.out, "sbom", fmt.Sprintf("%s-image_linux_%s.cdx.json", im.name, r.arch))); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(r.out, "images", "DIGESTS"), []byte(strings.Join(digests, "\n")+"\n"), 0o644)
}

func (r *releaser) baseImage() (v1.Image, error) {
	if r.baseLayout != "" {
		return pinnedBase(r.baseLayout, r.baseDigest, r.arch)
	}
	return localBase(r.baseRootfs, r.arch, r.epoch)
}

// pluginArchive packs the plugin binary with the LICENSE (krew-index
// requires it in every archive), the README and the plugin's
// documentation, as krew installs it.
func (r *releaser) pluginArchive(b binary, file string) (pluginArchive, error) {
	bin, err := os.ReadFile(file)
	if err != nil {
		return pluginArchive{}, err
	}
	entries := []entry{{name: b.file(), mode: 0o755, data: bin}}
	for _, doc := range []string{"LICENSE", "README.md", "docs/cli.md"} {
		data, err := os.ReadFile(filepath.Join(r.repo, doc))
		if err != nil {
			return pluginArchive{}, err
		}
		entries = append(entries, entry{name: filepath.Base(doc), mode: 0o644, data: data})
	}
	t, err := tarBytes(entries, r.epoch)
	if err != nil {
		return pluginArchive{}, err
	}
	gz, err := gzipBytes(t)
	if err != nil {
		return pluginArchive{}, err
	}
	name := fmt.Sprintf("kubectl-kbind_%s_%s.tar.gz", b.goos, b.goarch)
	if err := os.WriteFile(filepath.Join(r.out, name), gz, 0o644); err != nil {
		return pluginArchive{}, err
	}
	sum := sha256.Sum256(gz)
	return pluginArchive{goos: b.goos, goarch: b.goarch, file: name, sha256: hex.EncodeToString(sum[:])}, nil
}

// writeSums writes SHA256SUMS (sha256sum's format, every file of the
// release by its path in it) and returns a listing with sizes.
func writeSums(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err == nil && rel != "SHA256SUMS" {
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	var sums, listing strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&sums, "%x  %s\n", sum, f)
		note := ""
		if strings.HasSuffix(f, ".cdx.json") {
			note = fmt.Sprintf("  (%d components)", sbomComponents(data))
		}
		fmt.Fprintf(&listing, "  %10d  %x  %s%s\n", len(data), sum[:8], f, note)
	}
	return listing.String(), os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o644)
}
