#!/usr/bin/env bash
# The main command: sets up a fresh machine, fetches the default model, builds, and starts
# tesserad on it (gRPC on 0.0.0.0:50051, admin HTTP on 127.0.0.1:8002). Extra arguments go to
# tesserad, e.g. scripts/serve.sh --listen 127.0.0.1:50052 --max-num-seqs 64
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/fetch-model.sh"
"$root/scripts/build.sh"
cd "$root"
exec "${TESSERA_BUILD_DIR:-$root/build}/server/tesserad" --config "$root/config/tessera.yaml" \
  --model "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$@"
