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
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is the uid and gid both images run as (distroless' nonroot).
const nonroot = 65532

// image describes one of kbind's images: the binary at /<name>, run as
// nonroot, labelled as the Dockerfile labels them.
type image struct {
	name, title, description, docs string
}

var kbindImages = []image{
	{"konnector", "kbind konnector", "kbind's agent: syncs the APIs a provider cluster exports into the consumer cluster it runs in.", "docs/installation.md"},
	{"backend", "kbind backend", "kbind's optional provider-side backend: reports and reaps what stale consumers left behind.", "docs/backend.md"},
}

// layerFromEntries is an OCI layer of a reproducible tar (gzip with no
// name and no time).
func layerFromEntries(entries []entry, mtime time.Time) (v1.Layer, error) {
	data, err := tarBytes(entries, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(9))
}

// localBase is the stand-in for the distroless base built from the root
// file system hack/base-image/build.sh --rootfs prepares: one layer, the
// home of nonroot owned by it, every time the release's.
func localBase(rootfs, arch string, mtime time.Time) (v1.Image, error) {
	entries, err := dirEntries(rootfs, "", map[string][2]int{"home/nonroot": {nonroot, nonroot}})
	if err != nil {
		return nil, fmt.Errorf("reading the base root file system %s: %w", rootfs, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return appendLayer(img, entries, mtime, "kbind: hack/base-image (CA certificates, passwd, group, /tmp, /home/nonroot)", func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture = "linux", arch
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
		cf.Config.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
		cf.Config.WorkingDir = "/home/nonroot"
	})
}

// appendLayer adds a layer of entries to img, recorded in its history as
// createdBy, and edits a copy of its configuration.
func appendLayer(img v1.Image, entries []entry, mtime time.Time, createdBy string, edit func(*v1.ConfigFile)) (v1.Image, error) {
	layer, err := layerFromEntries(entries, mtime)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: mtime}, CreatedBy: createdBy}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	edit(cf)
	return mutate.ConfigFile(img, cf)
}

// pinnedBase is a base image read from an OCI image layout (crane pull
// --format=oci writes one) that must be exactly the manifest digest
// given: a release never builds on a tag that can move.
func pinnedBase(dir, digest, arch string) (v1.Image, error) {
	want, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("base image digest %q: %w (give sha256:<64 hex>)", digest, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the base image layout %s: %w", dir, err)
	}
	if img, err := idx.Image(want); err == nil {
		return img, nil
	}
	// The digest may name an index (a multi-platform base): take its
	// image for linux/arch.
	sub, err := idx.ImageIndex(want)
	if err != nil {
		return nil, fmt.Errorf("the base image layout %s holds no image or index %s", dir, want)
	}
	m, err := sub.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			return sub.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the base image index %s has no linux/%s image", want, arch)
}

// buildImage puts the binary at /<name> on base, with the entrypoint,
// user and labels of the Dockerfile and every time the release's.
func buildImage(base v1.Image, im image, binaryFile, version, revision string, mtime time.Time) (v1.Image, error) {
	data, err := os.ReadFile(binaryFile)
	if err != nil {
		return nil, err
	}
	return appendLayer(base, []entry{{name: im.name, mode: 0o755, data: data}}, mtime, "kbind: COPY "+im.name+" /"+im.name, func(cf *v1.ConfigFile) {
		cf.Created = v1.Time{Time: mtime}
		cf.Config.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
		cf.Config.Entrypoint, cf.Config.Cmd = []string{"/" + im.name}, nil
		labels := map[string]string{}
		for k, v := range cf.Config.Labels {
			labels[k] = v
		}
		for k, v := range map[string]string{
			"org.opencontainers.image.title":         im.title,
			"org.opencontainers.image.description":   im.description,
			"org.opencontainers.image.source":        "https://github.com/kbind/kbind",
			"org.opencontainers.image.documentation": "https://github.com/kbind/kbind/blob/main/" + im.docs,
			"org.opencontainers.image.version":       version,
			"org.opencontainers.image.revision":      revision,
		} {
			labels[k] = v
		}
		cf.Config.Labels = labels
	})
}

// writeOCIArchive writes img as a tar of an OCI image layout whose index
// names it ref (docker load and crane/skopeo/oras read it), and returns
// the image's manifest digest.
func writeOCIArchive(img v1.Image, ref, file string, mtime time.Time) (v1.Hash, error) {
	dir, err := os.MkdirTemp("", "kbind-oci-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("writing %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	entries, err := dirEntries(dir, "", nil)
	if err != nil {
		return v1.Hash{}, err
	}
	manifest, err := dockerManifest(img, ref)
	if err != nil {
		return v1.Hash{}, err
	}
	entries = append(entries, entry{name: "manifest.json", data: manifest})
	for i := range entries {
		if !entries[i].dir {
			entries[i].mode = 0o644
		} else {
			entries[i].mode = 0o755
		}
	}
	data, err := tarBytes(entries, mtime)
	if err != nil {
		return v1.Hash{}, err
	}
	return digest, os.WriteFile(filepath.Clean(file), data, 0o644)
}

// dockerManifest is the manifest.json of `docker save`, pointing into the
// OCI layout's blobs: with it the same archive loads into Docker engines
// that predate OCI layouts (docker load of Debian's docker.io 20.10).
func dockerManifest(img v1.Image, ref string) ([]byte, error) {
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(layers))
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		paths = append(paths, "blobs/"+d.Algorithm+"/"+d.Hex)
	}
	return json.Marshal([]map[string]any{{
		"Config":   "blobs/" + cfg.Algorithm + "/" + cfg.Hex,
		"RepoTags": []string{ref},
		"Layers":   paths,
	}})
}
