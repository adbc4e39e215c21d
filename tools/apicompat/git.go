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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kbind/kbind/tools/apicompat/compat"
)

// baseline is the commit the working tree is compared with, and where that
// choice came from.
type baseline struct {
	commit string
	source string
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// resolveBaseline applies the baseline rule (docs/versioning.md, "The
// compatibility gate"): the newest release tag v*.*.* reachable from HEAD that
// does not point at HEAD, else the commit in baselineFile. The commit must be
// in the clone, and the clone must not be shallow (a shallow clone hides the
// tags and commits the rule needs).
func resolveBaseline(repo, baselineFile string) (baseline, error) {
	head, err := git(repo, "rev-parse", "HEAD")
	if err != nil {
		return baseline{}, err
	}
	tags, err := reachableTags(repo)
	if err != nil {
		return baseline{}, err
	}
	var b baseline
	if t, ok := compat.PreviousRelease(tags, head); ok {
		b = baseline{commit: t.Commit, source: "release tag " + t.Name}
	} else {
		commit, err := readBaselineFile(filepath.Join(repo, baselineFile))
		if err != nil {
			return baseline{}, err
		}
		b = baseline{commit: commit, source: baselineFile + "; no release tag v*.*.* reachable from HEAD"}
	}
	shallow, err := git(repo, "rev-parse", "--is-shallow-repository")
	if err != nil {
		return baseline{}, err
	}
	_, missing := git(repo, "cat-file", "-e", b.commit+"^{commit}")
	switch {
	case missing != nil && shallow == "true":
		return baseline{}, fmt.Errorf("the baseline commit %s (%s) is not in this clone: it is a shallow clone; run `git fetch --unshallow --tags` and run again", b.commit, b.source)
	case missing != nil:
		return baseline{}, fmt.Errorf("the baseline commit %s (%s) is not in this clone: fetch it (`git fetch origin %s`, or `git fetch --unshallow --tags` in a shallow clone) and run again", b.commit, b.source, b.commit)
	case shallow == "true":
		return baseline{}, fmt.Errorf("this is a shallow clone: the baseline (the newest release tag reachable from HEAD, else %s) cannot be trusted without the history; run `git fetch --unshallow --tags` and run again", baselineFile)
	}
	return b, nil
}

// reachableTags lists the tags merged into HEAD with the commits they point at
// (an annotated tag peeled to its commit).
func reachableTags(repo string) ([]compat.Tag, error) {
	out, err := git(repo, "for-each-ref", "--merged", "HEAD", "--format=%(refname:strip=2) %(objectname) %(*objectname)", "refs/tags/")
	if err != nil {
		return nil, err
	}
	var tags []compat.Tag
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		t := compat.Tag{Name: fields[0], Commit: fields[1]}
		if len(fields) == 3 {
			t.Commit = fields[2]
		}
		tags = append(tags, t)
	}
	return tags, nil
}

// readBaselineFile returns the full commit sha in path: the first line that
// is neither blank nor a # comment.
func readBaselineFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the baseline commit: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !fullSHA.MatchString(line) {
			return "", fmt.Errorf("%s: %q is not a full commit sha: write the 40 hex digits `git rev-parse <commit>` prints", path, line)
		}
		return line, nil
	}
	return "", fmt.Errorf("%s names no commit: write the full sha of the baseline commit on a line of its own", path)
}

// extract writes dir of commit (git archive) into dst, so dst/dir is the
// module as it was at commit. Nothing is fetched.
func extract(repo, commit, dir, dst string) error {
	cmd := exec.Command("git", "-C", repo, "archive", "--format=tar", commit, "--", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	untarErr := untar(stdout, dst)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive %s -- %s: %w: %s", commit, dir, err, strings.TrimSpace(stderr.String()))
	}
	return untarErr
}

func untar(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading git archive: %w", err)
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("git archive: unexpected path %q", h.Name)
		}
		target := filepath.Join(dst, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeFile(target, tr)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func git(repo string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
