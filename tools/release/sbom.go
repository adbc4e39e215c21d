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
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// kbindModule prefixes kbind's own modules: inside the workspace they
// have no version of their own ("(devel)"); in a release they are the
// release.
const kbindModule = "github.com/kbind/kbind"

// bomSerial is a UUID derived from the subject's digest (RFC 4122
// version 5 layout), so the same release has the same serial number.
func bomSerial(digest []byte) string {
	u := sha256.Sum256(append([]byte("kbind-sbom:"), digest...))
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func newBOM(subject cdx.Component, components []cdx.Component, digest []byte, version string, epoch time.Time) *cdx.BOM {
	sort.Slice(components, func(i, j int) bool { return components[i].BOMRef < components[j].BOMRef })
	refs := make([]string, 0, len(components))
	for _, c := range components {
		refs = append(refs, c.BOMRef)
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = bomSerial(digest)
	bom.Metadata = &cdx.Metadata{
		Timestamp: epoch.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "kbind tools/release", Version: version,
			Description: "make release; the BOM is written with github.com/CycloneDX/cyclonedx-go",
		}}},
		Component: &subject,
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: subject.BOMRef, Dependencies: &refs}}
	return bom
}

// goPURL is a Go module's package URL.
func goPURL(module, version string) string {
	return "pkg:golang/" + module + "@" + purlVersion(version)
}

// purlVersion percent-encodes what the package URL spec requires of a
// version among what Go and Debian versions hold ("+").
func purlVersion(v string) string { return strings.ReplaceAll(v, "+", "%2B") }

// binaryBOM lists what a Go binary was built from, read from the build
// information the Go linker embeds: the main module, every module
// linked in (replacements resolved) and the standard library.
func binaryBOM(name, file, version string, epoch time.Time) (*cdx.BOM, cdx.Component, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, cdx.Component{}, err
	}
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, cdx.Component{}, fmt.Errorf("reading the build information of %s: %w", file, err)
	}
	sum := sha256.Sum256(data)
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	components := []cdx.Component{{
		BOMRef: goPURL("stdlib", "go"+goVersion), Type: cdx.ComponentTypeLibrary, Name: "stdlib",
		Version: "go" + goVersion, PackageURL: goPURL("stdlib", "go"+goVersion), Description: "the Go standard library",
	}}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		v := d.Version
		if strings.HasPrefix(d.Path, kbindModule) && (v == "" || v == "(devel)") {
			v = "v" + version
		}
		c := cdx.Component{BOMRef: goPURL(d.Path, v), Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: v, PackageURL: goPURL(d.Path, v)}
		if d.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "golang:module:h1", Value: d.Sum}}
		}
		components = append(components, c)
	}
	var props []cdx.Property
	for _, s := range bi.Settings {
		if s.Key == "-ldflags" {
			continue // the version stamp, already the component's version
		}
		props = append(props, cdx.Property{Name: "golang:build:" + s.Key, Value: s.Value})
	}
	props = append(props, cdx.Property{Name: "golang:main-package", Value: bi.Path}, cdx.Property{Name: "golang:version", Value: bi.GoVersion})
	subject := cdx.Component{
		BOMRef: goPURL(bi.Main.Path, "v"+version), Type: cdx.ComponentTypeApplication, Name: name, Version: version,
		PackageURL: goPURL(bi.Main.Path, "v"+version),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
		Properties: &props,
	}
	return newBOM(subject, components, sum[:], version, epoch), subject, nil
}

// debPackages reads the Debian packages an image's file system records
// (/var/lib/dpkg/status and the status.d/ files distroless writes) from
// its flattened layers.
func debPackages(img v1.Image) ([]cdx.Component, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var out []cdx.Component
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the image's file system: %w", err)
		}
		name := path.Clean("/" + h.Name)
		if h.Typeflag != tar.TypeReg || (name != "/var/lib/dpkg/status" && path.Dir(name) != "/var/lib/dpkg/status.d") || strings.HasSuffix(name, ".md5sums") {
			continue
		}
		for _, p := range controlParagraphs(tr) {
			if p["Package"] == "" || p["Version"] == "" {
				continue
			}
			purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", p["Package"], purlVersion(p["Version"]), p["Architecture"])
			out = append(out, cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: p["Package"], Version: p["Version"], PackageURL: purl})
		}
	}
	return out, nil
}

// controlParagraphs parses Debian control paragraphs (Key: value lines,
// continuation lines starting with a space, paragraphs separated by
// blank lines); only the first line of a field is kept.
func controlParagraphs(r io.Reader) []map[string]string {
	var out []map[string]string
	cur := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = map[string]string{}
		case line[0] == ' ' || line[0] == '\t':
		default:
			if k, v, ok := strings.Cut(line, ":"); ok {
				cur[k] = strings.TrimSpace(v)
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// imageBOM lists an image's contents: the kbind binary (with what it was
// built from) and the base image's Debian packages.
func imageBOM(img v1.Image, ref string, app cdx.Component, appBOM *cdx.BOM, version string, epoch time.Time) (*cdx.BOM, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	debs, err := debPackages(img)
	if err != nil {
		return nil, err
	}
	repo, _, _ := strings.Cut(ref, ":")
	purl := fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s&tag=%s", path.Base(repo), digest, repo, imageTag(version))
	subject := cdx.Component{
		BOMRef: purl, Type: cdx.ComponentTypeContainer, Name: repo, Version: imageTag(version), PackageURL: purl,
		Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest.Hex}},
	}
	app.Components = appBOM.Components
	raw, err := hex.DecodeString(digest.Hex)
	if err != nil {
		return nil, err
	}
	return newBOM(subject, append(debs, app), raw, version, epoch), nil
}

func writeBOM(bom *cdx.BOM, file string) error {
	var b bytes.Buffer
	if err := cdx.NewBOMEncoder(&b, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return fmt.Errorf("encoding %s: %w", file, err)
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}

// sbomComponents counts the components of an encoded SBOM (nested ones
// included), -1 when it does not decode.
func sbomComponents(data []byte) int {
	bom := cdx.NewBOM()
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(bom); err != nil {
		return -1
	}
	return countComponents(bom.Components)
}

// countComponents counts a BOM's components, nested ones included.
func countComponents(cs *[]cdx.Component) int {
	if cs == nil {
		return 0
	}
	n := len(*cs)
	for _, c := range *cs {
		n += countComponents(c.Components)
	}
	return n
}
