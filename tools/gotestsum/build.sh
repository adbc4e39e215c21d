#!/usr/bin/env bash
# Builds (once) the pinned gotestsum from this module's go.mod through the
# Go module proxy into a versioned user cache and prints its path on
# stdout; progress goes to stderr. GOWORK=off: its dependencies never mix
# with the project's modules. `make test` runs go test through it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(cd "$here" && GOWORK=off go list -m -f '{{.Version}}' gotest.tools/gotestsum)
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/kbind/tools/gotestsum-$version-$stamp
if [ ! -x "$bin" ]; then
  echo "gotestsum: building $version" >&2
  mkdir -p "$(dirname "$bin")"
  # A temporary name of this process's own, renamed into place: make
  # targets that run side by side (.ci/run) may build it at the same time.
  (cd "$here" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$bin.tmp.$$" gotest.tools/gotestsum)
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
