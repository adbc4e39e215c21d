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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"konnector": 0o755, "backend": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	const konnector = "github.com/kbind/kbind/konnector/cmd/konnector"
	for _, c := range []struct {
		name, dir, pkg, tags string
		want                 string // the path; "" when built
		wantErr              string
	}{
		{"unset: built", "", konnector, "", "", ""},
		{"set: the made binary", dir, konnector, "", filepath.Join(dir, "konnector"), ""},
		{"tagged: built", dir, konnector, "kbindbench", "", ""},
		{"not one of make build's: built", dir, "github.com/kbind/kbind/e2e/cmd/bench", "", "", ""},
		{"set but missing: an error", dir, "github.com/kbind/kbind/cli/cmd/kubectl-kbind", "", "", "has no kubectl-kbind"},
		{"not executable: an error", dir, "github.com/kbind/kbind/backend/cmd/backend", "", "", "not an executable"},
		{"relative: an error", "bin", konnector, "", "", "absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := prebuilt(c.dir, c.pkg, c.tags)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (c.want != "") || got != c.want {
				t.Errorf("prebuilt = %q, %v; want %q", got, ok, c.want)
			}
		})
	}
}

// TestBuildLinksPrebuilt: with KBIND_BIN_DIR set, Build points bin at the
// made binary (replacing what was there) instead of compiling.
func TestBuildLinksPrebuilt(t *testing.T) {
	dir := t.TempDir()
	made := filepath.Join(dir, "konnector")
	if err := os.WriteFile(made, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinDirEnv, dir)
	bin := filepath.Join(t.TempDir(), "konnector")
	for range 2 { // the second time over the first's link
		if err := Build(context.Background(), bin, "github.com/kbind/kbind/konnector/cmd/konnector"); err != nil {
			t.Fatal(err)
		}
	}
	if target, err := os.Readlink(bin); err != nil || target != made {
		t.Errorf("bin links to %q (%v), want %q", target, err, made)
	}
}
