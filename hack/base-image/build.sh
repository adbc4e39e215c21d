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
# Builds the local base image (default kbind.local/static:nonroot) from
# scratch: see Dockerfile here. The CA certificates come from this machine
# (Debian's ca-certificates package, recorded as distroless records its
# packages, in /var/lib/dpkg/status.d/, so an SBOM lists it).
#
#   build.sh [IMAGE]        build the image with Docker
#   build.sh --rootfs DIR   write its root file system into DIR only (no
#                           Docker): make release builds the base from it
set -euo pipefail
umask 022
here=$(cd "$(dirname "$0")" && pwd)
certs=/etc/ssl/certs/ca-certificates.crt
[ -r "$certs" ] || { echo "base-image: $certs is missing; install the ca-certificates package" >&2; exit 1; }

# rootfs DIR: the base's files, /home/nonroot included (owned by 65532 in
# the image).
rootfs() {
  local root=$1
  mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot" "$root/var/lib/dpkg/status.d"
  chmod 1777 "$root/tmp"
  chmod 0700 "$root/home/nonroot"
  cp "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
  chmod 0644 "$root/etc/ssl/certs/ca-certificates.crt"
  cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
  cat > "$root/etc/group" <<'GROUP'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
GROUP
  echo 'hosts: files dns' > "$root/etc/nsswitch.conf"
  if command -v dpkg-query >/dev/null 2>&1 && dpkg-query -W ca-certificates >/dev/null 2>&1; then
    dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nSource: ${source:Package}\n' \
      ca-certificates > "$root/var/lib/dpkg/status.d/ca-certificates"
  fi
  chmod -R go-w "$root/etc" "$root/var"
}

if [ "${1:-}" = --rootfs ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 --rootfs DIR" >&2; exit 2; }
  rm -rf "$2" && rootfs "$2"
  echo "$2"
  exit 0
fi

image=${1:-kbind.local/static:nonroot}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
rootfs "$ctx/rootfs"
mv "$ctx/rootfs/home" "$ctx/home"
cp "$here/Dockerfile" "$ctx/Dockerfile"
docker build -q -t "$image" "$ctx" >/dev/null
echo "$image"
