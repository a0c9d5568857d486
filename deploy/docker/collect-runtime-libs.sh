#!/usr/bin/env bash
# Copies the shared libraries that the given binaries load into DEST, so that the runtime stage
# of a Dockerfile needs no -dev packages. Left out: glibc (the runtime image has the same one)
# and any library whose path matches $EXCLUDE_REGEX (what the runtime image provides itself:
# the CUDA or ROCm libraries).
#   EXCLUDE_REGEX='^/opt/rocm' deploy/docker/collect-runtime-libs.sh /out/lib build/server/tesserad
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DEST BINARY..." >&2; exit 2; }
dest="$1"; shift
glibc='/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-[^/]*)\.so'
mkdir -p "$dest"
for bin in "$@"; do
  if ldd "$bin" | grep -q 'not found'; then
    echo "collect-runtime-libs: $bin has unresolved libraries:" >&2
    ldd "$bin" | grep 'not found' >&2
    exit 1
  fi
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  if [[ "$lib" =~ $glibc ]]; then continue; fi
  if [ -n "${EXCLUDE_REGEX:-}" ] && [[ "$lib" =~ $EXCLUDE_REGEX ]]; then continue; fi
  cp -L "$lib" "$dest/"
  echo "collect-runtime-libs: $lib"
done
