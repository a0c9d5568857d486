#!/usr/bin/env bash
# HIP drift check, run by CI: compiles every GPU kernel source (kernels/*.cu, kernels/gemm/*.cu) as HIP with Debian's
# hipcc (ROCm 5.2, clang 15) for gfx90a (MI200) and gfx940 (the MI300 family's first target; this
# clang does not know gfx942) into object files, so that CUDA-only code cannot slip into the shared
# kernel sources unnoticed.
# Covers: the kernels and kernels/gpu.h's HIP branch (types, runtime names, shuffles, bf16 shims).
# Cannot cover: linking or running (no ROCm device here), the host code against hipBLASLt (not
# packaged for Debian: kernels/gemm/*.cc and gpu_backend.cc are not compiled), or gfx942.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v hipcc > /dev/null; then
  echo "hip-check: hipcc not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for src in "$root"/kernels/*.cu "$root"/kernels/gemm/*.cu; do
  name=$(basename "$src" .cu)
  if hipcc -std=c++20 -O2 -I"$root" -DTESSERA_GPU_HIP=1 --offload-arch=gfx90a --offload-arch=gfx940 \
      -Werror=return-type -c "$src" -o "$tmp/$name.o" > "$tmp/$name.log" 2>&1; then
    echo "hip-check: $name.cu ok (gfx90a, gfx940)"
  else
    echo "hip-check: $name.cu FAILED" >&2
    cat "$tmp/$name.log" >&2
    status=1
  fi
done
exit $status
