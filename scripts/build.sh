#!/usr/bin/env bash
# Configures and builds tessera into build/: with the CUDA backend when nvcc is on PATH (CI compiles
# it on every run; the tests skip what needs a GPU), else CPU only. TESSERA_GPU=off|cuda|hip
# overrides.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_BUILD_DIR:-$root/build}"
# ccache keys on relative paths below the checkout, so every clone (CI's too) shares the cache.
export CCACHE_BASEDIR="$root"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DTESSERA_GPU="${TESSERA_GPU:-$(command -v nvcc >/dev/null && echo cuda || echo off)}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
