// Tunes one GEMM on one device: the selection loop over a TunableGemm's candidates.
//
//   1. The default algorithm runs once on operand set 0; its output is the reference.
//   2. A rough timing (kRoughIterations calls, after one untimed call that loads its kernels)
//      estimates every candidate's cost.
//   3. The default gets a full timing: timed_iterations(config, rough ms) calls -- bounded by
//      the config's duration and iteration caps -- rotating over operand sets so that the sets
//      together exceed the device's last-level cache (see rotating_copies).
//   4. The others, fastest rough timing first: one more than kPruneFactor x the best full timing
//      so far, or past the kMaxFullTimings fastest, is pruned. Each remaining candidate runs
//      once on set 0 and is rejected when any element is outside the config's tolerance for the
//      input dtype (|x - ref| <= atol + rtol * |ref|; logged with the largest error; skipped when
//      numerical_check is off); a candidate that passes gets a full timing.
//   5. The fastest candidate is kept; the default stays unless another is strictly faster.
// Every candidate that can be kept has been checked; the order keeps the costly steps (output
// copies, full timings) to the few candidates that can win, so that a GPU's hundreds of
// candidates per GEMM tune in well under a second.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend/gemm_signature.h"
#include "runtime/backend/tunable_gemm.h"
#include "runtime/tuning/tuning_config.h"

namespace tessera {

// Calls of the rough timing that decides whether a candidate gets a full timing: one ranks the
// candidates well enough for the 2x prune and the top-kMaxFullTimings cut (the contenders are
// timed fully), and keeps a warmup of hundreds of candidates per GEMM short.
inline constexpr int64_t kRoughIterations = 1;
// A candidate whose rough time exceeds this many times the best full time so far is skipped.
inline constexpr double kPruneFactor = 2.0;
// Candidates (besides the default) that get a numerics check and a full timing, at most.
inline constexpr int kMaxFullTimings = 4;

enum class CandidateVerdict {
  kTimed,     // fully timed
  kRejected,  // output outside the tolerance
  kPruned,    // rough timing more than kPruneFactor x the best so far
  kFailed,    // the device refused to run it
};

struct CandidateReport {
  std::string solution;
  CandidateVerdict verdict = CandidateVerdict::kTimed;
  double ms = 0;         // mean ms per call: the full timing, or the rough one when pruned
  double max_error = 0;  // largest |x - ref| over the output (0 for the default)
  std::string reason;    // why it was not timed; empty when timed
};

struct TuneOutcome {
  std::string best;       // the kept solution (kDefaultSolution when nothing beat it)
  double best_ms = 0;     // its mean ms per call
  double default_ms = 0;  // the default's mean ms per call
  int copies = 1;         // operand sets rotated over
  std::vector<CandidateReport> candidates;  // in the order the device listed them

  // default_ms / best_ms: 1 when the default was kept, > 1 for a faster solution.
  double gain() const { return best_ms > 0 ? default_ms / best_ms : 1.0; }
};

// Operand sets to rotate over: ceil(pool / operand_bytes), where pool is the config's rotating
// buffer (-1: `cache_bytes`, 0: no rotation -> 1 set, > 0: that many MiB); at least 1.
int rotating_copies(const TuningConfig& config, size_t operand_bytes, size_t cache_bytes);

// Runs the loop above. Errors (naming the signature): an invalid signature, a candidate list
// that does not start with the default, operands that cannot be prepared, or a default that
// fails to run or time. A failing non-default candidate is reported, not an error.
absl::StatusOr<TuneOutcome> tune_gemm(TunableGemm& gemm, const GemmSignature& sig,
                                      const TuningConfig& config);

}  // namespace tessera
