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
# Builds the local test control plane (etcd, kube-apiserver, kubectl and,
# on request, kube-controller-manager) from the Go module proxy into a
# versioned user cache and prints that directory on stdout; progress goes to
# stderr. A finished build is reused. An existing KUBEBUILDER_ASSETS that
# holds the binaries wins over everything.
#
#   tools/controlplane/build.sh [component ...]
#
# Components: etcd kube-apiserver kubectl kube-controller-manager
# (default: etcd kube-apiserver kubectl).
set -euo pipefail

K8S_VERSION=v1.37.2
K8S_MINOR=37
SETUP_ENVTEST_VERSION=v0.25.1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
components=("$@")
[ ${#components[@]} -gt 0 ] || components=(etcd kube-apiserver kubectl)

log() { echo "controlplane: $*" >&2; }
fail() { echo "controlplane: ERROR: $*" >&2; exit 1; }

have_all() {
  local dir=$1 c
  for c in "${components[@]}"; do [ -x "$dir/$c" ] || return 1; done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if have_all "$KUBEBUILDER_ASSETS"; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks some of: ${components[*]}; building them instead"
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/kbind/k8s/$K8S_VERSION
mkdir -p "$cache"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# A binary is reused only when it was built from the wrapper module files it
# stamps (pinned versions and link flags); changing either rebuilds it.
module_of() {
  case $1 in
    etcd) echo "$here/etcd" ;;
    *) echo "$here/kubernetes" ;;
  esac
}
stamp_of() {
  local mod
  mod=$(module_of "$1")
  { cat "$mod/go.mod" "$mod/go.sum"; echo "$ldflags"; } | sha256sum | cut -c1-16
}
fresh() { [ -x "$cache/$1" ] && [ "$(cat "$cache/.$1.stamp" 2>/dev/null)" = "$(stamp_of "$1")" ]; }

todo=()
for c in "${components[@]}"; do
  case $c in etcd|kube-apiserver|kubectl|kube-controller-manager) ;; *) fail "unknown component $c" ;; esac
  fresh "$c" || todo+=("$c")
done
if [ ${#todo[@]} -eq 0 ]; then
  echo "$cache"
  exit 0
fi

command -v go >/dev/null || fail "go is not on PATH; install Go 1.26 (https://go.dev/dl)"

tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

build() {
  local c=$1 mod pkg start
  mod=$(module_of "$c")
  case $c in etcd) pkg=. ;; *) pkg=./cmd/$c ;; esac
  log "building $c $([ "$c" = etcd ] && grep -o 'v3\.[0-9.]*' "$mod/go.mod" | head -1 || echo "$K8S_VERSION") (first build takes minutes; later runs reuse $cache)"
  start=$SECONDS
  if ! (cd "$mod" && timeout "${KBIND_CONTROLPLANE_BUILD_TIMEOUT:-3600}" env GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/$c" "$pkg") >"$tmp/$c.log" 2>&1; then
    tail -n 40 "$tmp/$c.log" >&2
    fail "building $c failed or timed out after ${KBIND_CONTROLPLANE_BUILD_TIMEOUT:-3600}s (log tail above); check access to the Go module proxy and free disk space"
  fi
  mv -f "$tmp/$c" "$cache/$c"
  stamp_of "$c" >"$cache/.$c.stamp"
  log "built $c in $((SECONDS - start))s"
}

# The conventional route first: controller-runtime's setup-envtest download
# of the official binaries, with a short timeout. Machines without internet
# access fail it in seconds and build from source instead.
# KBIND_CONTROLPLANE_DOWNLOAD=never skips the attempt.
download() {
  local dir c
  [ "${KBIND_CONTROLPLANE_DOWNLOAD:-auto}" != never ] || return 1
  for c in "${todo[@]}"; do
    case $c in etcd|kube-apiserver|kubectl) ;; *) return 1 ;; esac
  done
  log "trying the setup-envtest download of ${K8S_VERSION#v} (timeout ${KBIND_CONTROLPLANE_DOWNLOAD_TIMEOUT:-90}s)"
  if ! dir=$(cd "$tmp" && GOWORK=off GOFLAGS=-buildvcs=false timeout "${KBIND_CONTROLPLANE_DOWNLOAD_TIMEOUT:-90}" \
      go run "sigs.k8s.io/controller-runtime/tools/setup-envtest@$SETUP_ENVTEST_VERSION" \
      use "${K8S_VERSION#v}" --bin-dir "$tmp/envtest" -p path 2>"$tmp/download.log"); then
    log "download unavailable ($(tail -n 1 "$tmp/download.log" | cut -c1-160)); building from source"
    return 1
  fi
  for c in "${todo[@]}"; do
    [ -x "$dir/$c" ] || { log "download lacks $c; building from source"; return 1; }
  done
  for c in "${todo[@]}"; do
    cp "$dir/$c" "$cache/.$c.new" && mv -f "$cache/.$c.new" "$cache/$c"
    stamp_of "$c" >"$cache/.$c.stamp"
  done
  log "downloaded ${todo[*]}"
}

download || for c in "${todo[@]}"; do build "$c"; done
echo "$cache"
