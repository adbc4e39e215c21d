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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestPinnedBase: a base image is taken from an OCI layout only by the
// digest it is pinned to; a layout without that digest, or a digest that
// is not one, is refused.
func TestPinnedBase(t *testing.T) {
	rootfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte("nonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := localBase(rootfs, "amd64", time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(base); err != nil {
		t.Fatal(err)
	}
	digest, err := base.Digest()
	if err != nil {
		t.Fatal(err)
	}

	got, err := pinnedBase(dir, digest.String(), "amd64")
	if err != nil {
		t.Fatalf("pinned to the layout's digest: %v", err)
	}
	if d, _ := got.Digest(); d != digest {
		t.Errorf("pinnedBase gave %s, want %s", d, digest)
	}
	for _, tc := range []struct{ digest, want string }{
		{"sha256:" + strings.Repeat("0", 64), "holds no image or index sha256:000"},
		{"latest", `base image digest "latest"`},
	} {
		if _, err := pinnedBase(dir, tc.digest, "amd64"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pinnedBase(%s) = %v, want an error containing %q", tc.digest, err, tc.want)
		}
	}
}
