#!/usr/bin/env bash
# Runs ON the GPU host, from the repository root, with a bundle made by deploy/bundle.sh:
# the GPU kernel tests (and, when present, bundle/bw.py for context), logs under $OUT (or
# ./gpu-check-out), and a short table last.
#
# usage: scripts/gpu-check.sh [BUNDLE_DIR]        (default .bundle)
set -uo pipefail

bundle=${1:-.bundle}
out=${OUT:-gpu-check-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
if command -v cuobjdump > /dev/null; then
  cuobjdump --list-elf "$bundle/bin/gpu_kernel_tests" > "$out/elf.txt" 2>&1 || true
fi

status=0
start=$(date +%s)
"$bundle/bin/gpu_kernel_tests" --gtest_color=no > "$out/gpu_kernel_tests.log" 2>&1 || status=$?
echo "gpu_kernel_tests: exit $status in $(( $(date +%s) - start ))s"

if [[ -f "$bundle/bw.py" ]]; then
  timeout 180 python3 "$bundle/bw.py" > "$out/bw.log" 2>&1 || echo "bw.py: exit $?" >> "$out/bw.log"
fi

echo
echo "== test results"
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$out/gpu_kernel_tests.log" | sort -u | sed 's/ (.*//'
echo
echo "== errors (relative L2 vs CPU reference)"
grep '^\[ metric \]' "$out/gpu_kernel_tests.log" | sed 's/^\[ metric \] //'
echo
grep -E 'Failure|Expected|Which is|rel_err.*inf' "$out/gpu_kernel_tests.log" | head -40
[[ -f "$out/bw.log" ]] && { echo "== bw.py (context)"; tail -15 "$out/bw.log"; }
exit $status
