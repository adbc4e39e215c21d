#!/usr/bin/env bash
# Checks (check, the default; `make verify` runs it) or adds (fix;
# `make license`) the Apache-2.0 header on every source file of the
# repository: Go files, shell scripts, Makefiles and Dockerfiles, tracked
# or new (git's ignore rules apply; testdata is left as it is). The Go
# header is hack/boilerplate.go.txt, which controller-gen also writes into
# generated files; the others carry the same text as # comments, after a
# #! line where there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mode=${1:-check}
case $mode in check | fix) ;; *) echo "usage: $0 [check|fix]" >&2; exit 2 ;; esac

marker='Licensed under the Apache License, Version 2.0'
boilerplate=hack/boilerplate.go.txt

files() {
  git ls-files --cached --others --exclude-standard -- \
    '*.go' '*.sh' 'Makefile' '*/Makefile' 'Dockerfile' '*/Dockerfile' '.ci/run' |
    grep -v -e '/testdata/' -e '^testdata/' | sort -u |
    while read -r f; do [ -f "$f" ] && echo "$f"; done
}

# hashed is the header as # comments.
hashed() { sed -e '1d' -e '$d' "$boilerplate" | sed -e 's/^/# /' -e 's/^# $/#/'; }

add() {
  local f=$1 tmp
  tmp=$(mktemp)
  case $f in
    *.go)
      # gofmt keeps a //go:build line first: the header goes after it.
      if head -1 "$f" | grep -q '^//go:build'; then
        { head -1 "$f"; echo; cat "$boilerplate"; tail -n +2 "$f"; } >"$tmp"
      else
        { cat "$boilerplate"; echo; cat "$f"; } >"$tmp"
      fi ;;
    *)
      if head -1 "$f" | grep -q '^#!'; then
        { head -1 "$f"; hashed; echo "#"; tail -n +2 "$f"; } >"$tmp"
      else
        { hashed; echo; cat "$f"; } >"$tmp"
      fi ;;
  esac
  cat "$tmp" >"$f"
  rm -f "$tmp"
}

missing=()
while read -r f; do
  if ! head -n 20 "$f" | grep -q "$marker"; then missing+=("$f"); fi
done < <(files)

if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$mode" = check ]; then
  echo "these files lack the Apache-2.0 header; run 'make license' and commit:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi
for f in "${missing[@]}"; do add "$f"; echo "license: header added to $f"; done
