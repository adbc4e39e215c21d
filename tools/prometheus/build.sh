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
# Builds (once) the pinned Prometheus server and promtool from this module's
# go.mod through the Go module proxy into a versioned user cache and prints
# the directory holding both on stdout; progress goes to stderr. The server
# is built without its web UI assets (its HTTP API is all kbind's tests use)
# and without service discovery plugins (tests scrape static targets).
# GOWORK=off: its dependencies never mix with the project's modules.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(cd "$here" && GOWORK=off go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
dir=${XDG_CACHE_HOME:-$HOME/.cache}/kbind/tools/prometheus-$version-$stamp
if [ ! -x "$dir/prometheus" ] || [ ! -x "$dir/promtool" ]; then
  echo "prometheus: building $version with promtool (the first build takes a few minutes)" >&2
  mkdir -p "$dir.tmp"
  (cd "$here" && GOWORK=off CGO_ENABLED=0 go build -trimpath -tags remove_all_sd,netgo \
    -ldflags "-X github.com/prometheus/common/version.Version=$version" \
    -o "$dir.tmp/" github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool)
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
