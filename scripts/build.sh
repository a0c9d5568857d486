#!/usr/bin/env bash
# Configures and builds tessera into build/ (TESSERA_GPU=off by default here; pass -DTESSERA_GPU=cuda).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_BUILD_DIR:-$root/build}"
# ccache keys on relative paths below the checkout, so every clone (CI's too) shares the cache.
export CCACHE_BASEDIR="$root"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DTESSERA_GPU="${TESSERA_GPU:-off}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
