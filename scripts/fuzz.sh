#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz/ and runs each for N seconds.
#   scripts/fuzz.sh [SECONDS (default 60)] [TARGET...]
# Targets: the weight readers fuzz_gguf fuzz_safetensors fuzz_hf_config, and where requests arrive:
# fuzz_grpc_request (Generate's raw bytes -> validation -> tokenizer / chat template),
# fuzz_openai_request (OpenAI JSON bodies), fuzz_chat_template (runtime/jinja), fuzz_tokenizer.
# fuzz_grpc_request and fuzz_tokenizer need the default model (scripts/fetch-model.sh); without it
# they are skipped. FUZZ_JOBS=N runs N targets side by side (default 1).
# Each target starts from the committed seeds (tests/fuzz/corpus/<target>) plus what earlier runs
# found (build-fuzz/fuzz-corpus/<target>), with tests/fuzz/dict/<target>.dict when there is one.
# A crash leaves its input in build-fuzz/fuzz-artifacts/<target>/ and the log in
# build-fuzz/fuzz-logs/<target>.log; copy the input into tests/fuzz/corpus/<target>/ once fixed,
# so that the corpus tests replay it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-60}"
if [ $# -gt 0 ]; then shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_safetensors fuzz_hf_config fuzz_grpc_request
                                      fuzz_openai_request fuzz_chat_template fuzz_tokenizer)
jobs="${FUZZ_JOBS:-1}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_GPU=off \
  -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
  -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)"

# Runs one target; its output goes to build-fuzz/fuzz-logs/<target>.log. Exit status: 0 clean,
# 77 skipped (no default model), other: a finding.
run_target() {
  local t="$1" corpus="$build/fuzz-corpus/$1" artifacts="$build/fuzz-artifacts/$1"
  local dict="$root/tests/fuzz/dict/$1.dict" log="$build/fuzz-logs/$1.log"
  mkdir -p "$corpus" "$artifacts" "$build/fuzz-logs"
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=20
              -artifact_prefix="$artifacts/" -print_final_stats=1)
  [ -f "$dict" ] && args+=(-dict="$dict")
  # New inputs go to the first directory (the build's corpus); the seeds are read only.
  "$build/tests/fuzz/$t" "$corpus" "$root/tests/fuzz/corpus/$t" "${args[@]}" >"$log" 2>&1
}

failed=()
skipped=()
pids=()
names=()
finish() {  # waits for the oldest running target
  local rc=0
  wait "${pids[0]}" || rc=$?
  case $rc in
    0) echo "== ${names[0]}: no findings ($(grep -m1 'stat::number_of_executed_units' \
         "$build/fuzz-logs/${names[0]}.log" | awk '{print $2}') execs)" ;;
    77) skipped+=("${names[0]}"); echo "== ${names[0]}: skipped (no default model)" ;;
    *) failed+=("${names[0]}"); echo "== ${names[0]}: FAILED; see $build/fuzz-logs/${names[0]}.log" ;;
  esac
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for t in "${targets[@]}"; do
  [ ${#pids[@]} -lt "$jobs" ] || finish
  echo "== $t: ${seconds}s"
  run_target "$t" &
  pids+=($!)
  names+=("$t")
done
while [ ${#pids[@]} -gt 0 ]; do finish; done
[ ${#skipped[@]} -eq 0 ] || echo "fuzz: skipped ${skipped[*]}: the default model is absent" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]}; inputs are in $build/fuzz-artifacts/" >&2
  exit 1
fi
echo "fuzz: no failures"
