#!/usr/bin/env bash
# Builds (once) the pinned golangci-lint from this module's go.mod through
# the Go module proxy into a versioned user cache and prints its path on
# stdout; progress goes to stderr. GOWORK=off: its dependencies never mix
# with the project's modules.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(cd "$here" && GOWORK=off go list -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2)
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/kbind/tools/golangci-lint-$version-$stamp
if [ ! -x "$bin" ]; then
  echo "golangci-lint: building $version (first build takes a few minutes)" >&2
  mkdir -p "$(dirname "$bin")"
  (cd "$here" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
