#!/usr/bin/env bash
# Builds the local base image (default kbind.local/static:nonroot) from
# scratch: see Dockerfile here. The CA certificates come from this machine
# (Debian's ca-certificates package).
set -euo pipefail
image=${1:-kbind.local/static:nonroot}
here=$(cd "$(dirname "$0")" && pwd)
certs=/etc/ssl/certs/ca-certificates.crt
[ -r "$certs" ] || { echo "base-image: $certs is missing; install the ca-certificates package" >&2; exit 1; }
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/home/nonroot"
chmod 1777 "$ctx/rootfs/tmp"
chmod 0700 "$ctx/home/nonroot"
cp "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
cat > "$ctx/rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat > "$ctx/rootfs/etc/group" <<'GROUP'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
GROUP
echo 'hosts: files dns' > "$ctx/rootfs/etc/nsswitch.conf"
cp "$here/Dockerfile" "$ctx/Dockerfile"
docker build -q -t "$image" "$ctx" >/dev/null
echo "$image"
