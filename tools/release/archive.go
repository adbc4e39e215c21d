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
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"
)

// entry is one file or directory of a reproducible tar stream: the bytes
// depend only on the entries, never on the machine, the clock or the
// order the file system lists a directory in.
type entry struct {
	name     string // slash-separated, relative
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// tarBytes writes entries (sorted by name) with every timestamp set to
// mtime and no user or group names.
func tarBytes(entries []entry, mtime time.Time) ([]byte, error) {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, e := range sorted {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data)),
		}
		if e.dir {
			h.Name, h.Typeflag, h.Size = e.name+"/", tar.TypeDir, 0
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", e.name, err)
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// gzipBytes compresses with a header that carries no name and no time.
func gzipBytes(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// dirEntries reads the tree under root as entries below prefix. Modes
// keep only the permission bits; ownership is root's unless owner names
// a uid:gid for a path (and everything below it).
func dirEntries(root, prefix string, owner map[string][2]int) ([]entry, error) {
	var out []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{name: path.Join(prefix, rel), mode: int64(info.Mode().Perm()), dir: d.IsDir()}
		if info.Mode()&fs.ModeSticky != 0 {
			e.mode |= 01000
		}
		for p := rel; p != "."; p = path.Dir(p) {
			if ids, ok := owner[p]; ok {
				e.uid, e.gid = ids[0], ids[1]
				break
			}
		}
		if !d.IsDir() {
			if !info.Mode().IsRegular() {
				return fmt.Errorf("%s: only regular files and directories can be archived", p)
			}
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out = append(out, e)
		return nil
	})
	return out, err
}
