#!/usr/bin/env bash
# gRPC vs the OpenAI HTTP API on one tesserad (CPU backend, default model): `tessera bench serve`
# with --api grpc and --api openai at concurrency 1 and 64, the same workload (token-id prompts,
# ignore_eos, greedy). Prints throughput and TTFT from the bench JSON, and the server's CPU
# seconds per 1,000 generated tokens (process_cpu_seconds_total and
# tessera_generation_tokens_total from /metrics around each run). JSON goes to
# ${OUT:-bench-results}/api_<api>_c<N>.json. Needs a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${TESSERA_BUILD_DIR:-$root/build}"
out="${OUT:-$root/bench-results}"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
grpc_port=50081 http_port=8081 admin_port=8082
mkdir -p "$out"
echo "== $(date -u '+%F %H:%M') $(lscpu | sed -n 's/^Model name: *//p') x$(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/server/tesserad" --model "$model" --listen 127.0.0.1:$grpc_port \
  --openai-listen 127.0.0.1:$http_port --admin-listen 127.0.0.1:$admin_port \
  --log-level warn --kv-cache-bytes 1GiB &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 200); do
  curl -fs "127.0.0.1:$http_port/health" >/dev/null 2>&1 && break
  sleep 0.2
done
metric() {
  curl -fs "127.0.0.1:$admin_port/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
printf '| api | concurrency | requests | output tok/s | TTFT p50 ms | TTFT p99 ms | server CPU s / 1k tokens |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for c in 1 64; do
  n=$(( c == 1 ? 8 : c ))
  for api in grpc openai; do
    cpu0=$(metric process_cpu_seconds_total); tok0=$(metric tessera_generation_tokens_total)
    target=(--api grpc)
    [ "$api" = openai ] && target=(--api openai --openai-server 127.0.0.1:$http_port)
    "$build/tools/tessera" bench serve "${target[@]}" --server 127.0.0.1:$grpc_port \
      --concurrency $c --num-requests $n \
      --prompt-len 64 --output-len 16 --seed 1 --json "$out/api_${api}_c$c.json" >/dev/null
    cpu1=$(metric process_cpu_seconds_total); tok1=$(metric tessera_generation_tokens_total)
    python3 - "$out/api_${api}_c$c.json" "$api" "$c" "$n" "$cpu0" "$cpu1" "$tok0" "$tok1" <<'PY'
import json, sys
path, api, c, n, cpu0, cpu1, tok0, tok1 = sys.argv[1:]
r = json.load(open(path))
cpu_per_1k = (float(cpu1) - float(cpu0)) / max(float(tok1) - float(tok0), 1) * 1000
assert r["requests"]["failed"] == 0 and r["requests"]["wrong_output_length"] == 0, r["requests"]
print("| %s | %s | %s | %.1f | %.0f | %.0f | %.2f |" % (
    api, c, n, r["throughput"]["output_tokens_per_s"], r["ttft_ms"]["p50"], r["ttft_ms"]["p99"],
    cpu_per_1k))
PY
  done
done
