#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz/ and runs each for N seconds.
#   scripts/fuzz.sh [SECONDS (default 60)] [TARGET...]   (targets: fuzz_gguf fuzz_safetensors fuzz_hf_config)
# Each target starts from the committed seeds (tests/fuzz/corpus/<target>) plus what earlier runs
# found (build-fuzz/fuzz-corpus/<target>). A crash leaves its input in build-fuzz/fuzz-artifacts/;
# copy it into tests/fuzz/corpus/<target>/ once fixed, so that the corpus tests replay it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-60}"
if [ $# -gt 0 ]; then shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_safetensors fuzz_hf_config)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_GPU=off \
  -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
  -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)"

failed=()
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  echo "== $t: ${seconds}s"
  # New inputs go to the first directory (the build's corpus); the seeds are read only.
  if ! "$build/tests/fuzz/$t" "$corpus" "$root/tests/fuzz/corpus/$t" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=20 \
      -artifact_prefix="$artifacts/" -print_final_stats=1; then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]}; inputs are in $build/fuzz-artifacts/" >&2
  exit 1
fi
echo "fuzz: no failures"
