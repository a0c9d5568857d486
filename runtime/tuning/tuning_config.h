// What the GEMM tuner does (mode), where its results live, how long it may spend per candidate,
// and how token counts are bucketed -- from config, then overridden by the environment with
// PyTorch TunableOp's variables (so that a ROCm image set up for PyTorch tunes tessera too) and
// tessera's own.
//
// Environment (an unset or empty variable leaves the setting as it was; an empty TESSERA_ one
// falls back to its PYTORCH_ twin):
//
//   TESSERA_TUNABLEOP_MODE                off | use | tune | warmup
//   TESSERA_TUNABLEOP_ENABLED             0 | 1      PYTORCH_TUNABLEOP_ENABLED
//   TESSERA_TUNABLEOP_TUNING              0 | 1      PYTORCH_TUNABLEOP_TUNING
//   TESSERA_TUNABLEOP_FILENAME            path       PYTORCH_TUNABLEOP_FILENAME
//   TESSERA_TUNABLEOP_VERBOSE             0..3       PYTORCH_TUNABLEOP_VERBOSE
//   TESSERA_TUNABLEOP_MAX_TUNING_DURATION_MS  >= 0   PYTORCH_TUNABLEOP_MAX_TUNING_DURATION_MS
//   TESSERA_TUNABLEOP_MAX_TUNING_ITERATIONS   >= 0   PYTORCH_TUNABLEOP_MAX_TUNING_ITERATIONS
//   TESSERA_TUNABLEOP_ROTATING_BUFFER_SIZE    MiB    PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE
//   TESSERA_TUNABLEOP_NUMERICAL_CHECK     0 | 1      PYTORCH_TUNABLEOP_NUMERICAL_CHECK
//
// Booleans are 0/1 (also true/false, any case). Where both names of a setting are set, the
// TESSERA_ one wins, each setting on its own (TESSERA_TUNABLEOP_ENABLED=0 with
// PYTORCH_TUNABLEOP_TUNING=1 reads as enabled=0, tuning=1).
//
// The mode, in this order:
//   1. TESSERA_TUNABLEOP_MODE, when set, decides it; ENABLED and TUNING are still checked for
//      bad values but do not change it.
//   2. Otherwise ENABLED, as in PyTorch: 0 -> off; 1 -> tune, or use when TUNING=0 (TUNING
//      defaults to 1). A config mode of warmup stays warmup under ENABLED=1 (warmup is tune plus
//      an upfront pass) unless TUNING=0 (-> use).
//   3. Otherwise (ENABLED unset) TUNING alone: 0 turns tune/warmup into use, 1 turns use into
//      tune; off stays off (PyTorch: tuning without TunableOp enabled does nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend/gemm_signature.h"
#include "runtime/tuning/token_buckets.h"

namespace tessera {

enum class TuningMode {
  kOff,     // default BLAS heuristic; the results file is not read
  kUse,     // read the results file and use what it has; never tune
  kTune,    // use the file; tune a GEMM the first time it misses, and save the file
  kWarmup,  // kTune, plus tune every GEMM of the warmup plan before serving
};

std::string_view tuning_mode_name(TuningMode mode);  // "off", "use", "tune", "warmup"
// Parses one of the names above (exactly, lower case); the error names the text and the choices.
absl::StatusOr<TuningMode> parse_tuning_mode(std::string_view text);

inline bool reads_results(TuningMode m) {
  return m != TuningMode::kOff;
}
inline bool tunes_on_miss(TuningMode m) {
  return m == TuningMode::kTune || m == TuningMode::kWarmup;
}
inline bool tunes_upfront(TuningMode m) {
  return m == TuningMode::kWarmup;
}

// A candidate passes the numerics check when, element-wise against the default algorithm's
// result, |x - ref| <= atol + rtol * |ref|.
struct NumericsTolerance {
  double rtol = 0;
  double atol = 0;
};

struct TuningConfig {
  TuningMode mode = TuningMode::kOff;
  // The results file, one per device (results_path_for_device puts the ordinal in the name).
  // Empty: the device kind's default -- PyTorch's on a GPU, tessera's own on the CPU.
  std::string filename;
  int verbose = 0;  // 0 quiet, 1 basic, 2 tuning status, 3 full trace (PyTorch's levels)
  // Each candidate runs for at most this long or this many iterations, whichever comes first;
  // 0 means no limit of that kind (not both 0). PyTorch's defaults.
  int64_t max_tuning_duration_ms = 30;
  int64_t max_tuning_iterations = 100;
  // Pool of rotated operand copies while timing, so that candidates are timed with cold caches:
  // -1 (any negative in the environment) = the device's L2 cache size (auto), 0 = off (the same
  // operands every iteration), > 0 = that many MiB.
  int64_t rotating_buffer_size_mb = -1;
  // Check each candidate's result against the default algorithm's before timing it.
  bool numerical_check = true;
  // By the GEMM's input dtype.
  NumericsTolerance bf16_tolerance{1e-2, 1e-2};
  NumericsTolerance f16_tolerance{1e-3, 1e-3};
  NumericsTolerance f32_tolerance{1e-5, 1e-5};
  // Scaled FP8 GEMMs (bf16 or fp16 output), twice bf16's: the inputs are exact, but the tensor
  // cores' FP8 products accumulate with fewer bits than fp32 inside a k block (Hopper), so
  // candidates that block or split k differently differ by more than bf16 GEMMs do. The tuner's
  // operands are quantized from values whose products sum to O(1) outputs (as bf16's are), so
  // atol means the same as there.
  NumericsTolerance fp8_tolerance{2e-2, 2e-2};
  // Decode buckets and prefill padding, for the scheduler, graphs and the warmup plan.
  TokenBuckets buckets;

  // Cross-field checks: durations non-negative and not both limits 0, verbose 0..3, tolerances
  // non-negative, valid buckets. Names the field and value.
  absl::Status validate() const;

  const NumericsTolerance& tolerance(GemmDType input_dtype) const;
};

// Environment lookup: returns the value or nullptr when unset (std::getenv's contract).
using GetEnv = std::function<const char*(const char*)>;

// Overrides `config` from the environment as the file comment describes, then validates it.
// A bad value -> InvalidArgument naming the variable and its value; `config` may then be
// partly updated (callers fail on error).
absl::Status apply_environment(const GetEnv& getenv, TuningConfig* config);

// What kind of device a results file belongs to: it decides the default file name.
enum class TuningDeviceKind { kGpu, kCpu };

// The file names an empty TuningConfig::filename stands for. A GPU takes PyTorch's
// (tunableop_results0.csv for GPU 0); the CPU backend takes a name of its own, so that a CPU and
// a GPU daemon started in one directory keep apart: on one file, each would find the other's
// validators wrong, re-tune everything and overwrite it.
inline constexpr std::string_view kGpuResultsFilename = "tunableop_results.csv";
inline constexpr std::string_view kCpuResultsFilename = "tunableop_results_cpu.csv";

// The results file of one device: the configured filename, else the kind's default above. "%d"
// in it is replaced by the ordinal; otherwise the ordinal goes before the file name's last '.'
// ("results.csv" -> "results0.csv"), or at the end when the file name has none. Only the last
// path component is looked at for the '.'.
std::string results_path_for_device(const TuningConfig& config, TuningDeviceKind kind,
                                    int ordinal);

// How many timed iterations one candidate gets, given one warm iteration took
// `ms_per_iteration`: the iteration cap, and as many as fit the duration cap; at least 1.
int64_t timed_iterations(const TuningConfig& config, double ms_per_iteration);

}  // namespace tessera
