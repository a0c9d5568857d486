#!/usr/bin/env bash
# The CPU figures in docs/perf.md, in one run: tessera beside transformers (prefill/decode tok/s,
# ratios), the engine's host time per step, and `tessera bench serve` against tesserad at
# concurrency 1, 8 and 64. JSON goes to ${OUT:-bench-results}/. Needs a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_BUILD_DIR:-$root/build}"
out="${OUT:-$root/bench-results}"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
threads="$(nproc)"
mkdir -p "$out"
echo "== $(date -u +%F) $(lscpu | sed -n 's/^Model name: *//p') x$threads, load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== tessera vs transformers (same weights, fp32, $threads threads)"
python3 "$root/tests/bench/cpu_vs_transformers.py" "$model" "$build/tools/tessera" --threads "$threads" \
  --json "$out/cpu_vs_transformers.json"

echo "== engine host time per step (model doing no work)"
"$build/tests/bench/bench_engine_step" --json "$out/engine_step.json"

echo "== tessera bench serve"
port=50071
"$build/server/tesserad" --model "$model" --listen 127.0.0.1:$port --admin-listen 127.0.0.1:0 \
  --log-level warn --kv-cache-bytes 1GiB &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  "$build/tools/tessera" models --server 127.0.0.1:$port >/dev/null 2>&1 && break
  sleep 0.2
done
for c in 1 8 64; do
  n=$(( c == 1 ? 8 : c * 2 ))
  echo "-- concurrency $c, $n requests, prompt 128, output 32"
  "$build/tools/tessera" bench serve --server 127.0.0.1:$port --concurrency $c --num-requests $n \
    --prompt-len 128 --output-len 32 --seed 1 --json "$out/serve_c$c.json"
done
