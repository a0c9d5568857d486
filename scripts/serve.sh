#!/usr/bin/env bash
# The main command: sets up a fresh machine, fetches the default model, builds, and runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/fetch-model.sh"
"$root/scripts/build.sh"
exec "${TESSERA_BUILD_DIR:-$root/build}/tools/tessera" run --model "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" --chat "${@:-Write a haiku about the sea.}"
