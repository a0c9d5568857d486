#!/usr/bin/env bash
# The test command: sets up a fresh machine, fetches the default model, builds, runs every test.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/fetch-model.sh"
"$root/scripts/build.sh"
cd "${TESSERA_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
