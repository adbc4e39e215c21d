#!/usr/bin/env bash
# Copyright The kbind Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
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
