// Tunes one GEMM on one device: the selection loop over a TunableGemm's candidates.
//
//   1. The default algorithm runs once on operand set 0; its output is kept (on the device) as
//      the reference.
//   2. A rough timing (kRoughIterations calls, after one untimed call that loads its kernels)
//      estimates every candidate's cost, all candidates in one pass (TunableGemm::time_each: on
//      a GPU, launched back to back with no wait between candidates). With a TuneHistory, a
//      candidate whose rough time was more than kHistoryPruneFactor x the best at a GEMM of the
//      same family (the same signature but for n, the tokens) with n within kHistoryReach of
//      this one's is skipped: successive halving across the token counts of one projection,
//      where the slow candidates cost most of the device time. Each candidate's verdict there
//      ages: past kHistoryReach it is timed again.
//   3. The default gets a full timing: timed_iterations(config, rough ms) calls -- bounded by
//      the config's duration and iteration caps -- rotating over operand sets so that the sets
//      together exceed the device's last-level cache (see rotating_copies).
//   4. The others, fastest rough timing first: one more than kPruneFactor x the best full timing
//      so far, or past the kMaxFullTimings fastest, is pruned. Each remaining candidate runs
//      once on set 0 and is rejected when any element is outside the config's tolerance for the
//      input dtype (|x - ref| <= atol + rtol * |ref|, compared where the output is: on the
//      device for a GPU; logged with the largest error; skipped when numerical_check is off); a
//      candidate that passes gets a full timing.
//   5. The fastest candidate is kept; the default stays unless another is strictly faster.
// Every candidate that can be kept has been checked; the order keeps the costly steps (checks,
// full timings) to the few candidates that can win, so that a GPU's hundreds of candidates per
// GEMM tune in well under a second.
#pragma once

#include <cstddef>
#include <map>
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

// A candidate whose rough time at a GEMM of the same family was more than this many times the
// best rough time there is not timed at a neighbouring token count (TuneHistory)...
inline constexpr double kHistoryPruneFactor = 1.5;
// ...where neighbouring means max(n, n') / min(n, n') <= this. Decode buckets, a factor of 2
// apart up to 128 tokens, are never pruned so; prefill shapes 64 tokens apart are.
inline constexpr double kHistoryReach = 1.5;

enum class CandidateVerdict {
  kTimed,     // fully timed
  kRejected,  // output outside the tolerance
  kPruned,    // rough timing more than kPruneFactor x the best so far
  kFailed,    // the device refused to run it
  kSkipped,   // not timed: slow at a neighbouring GEMM of its family (TuneHistory)
};

// The rough timings of the GEMMs tuned so far on one device, by family (a signature with n, the
// token count, left out): per candidate, its rough time over the best rough time of that GEMM,
// and that GEMM's n. Not thread-safe (a device tunes one GEMM at a time).
class TuneHistory {
 public:
  // Whether `solution` may be left out of `sig`'s rough timings: it was slower than
  // kHistoryPruneFactor x the best (or failed) at a GEMM of the family within kHistoryReach.
  // `why` gets the reason.
  bool skips(const GemmSignature& sig, const std::string& solution, std::string* why) const;
  // `solution`'s rough time at `sig` over the best there (infinity: it failed).
  void record(const GemmSignature& sig, const std::string& solution, double ratio);

 private:
  struct Seen {
    double ratio = 1;
    int64_t n = 0;
  };
  static GemmSignature family(const GemmSignature& sig);
  std::map<GemmSignature, std::map<std::string, Seen>> families_;
};

// Where one GEMM's tuning time went, in seconds.
struct TunePhases {
  double list = 0;     // listing the candidates
  double prepare = 0;  // operand sets, the default's reference
  double rough = 0;    // the rough timings
  double final = 0;    // numerics checks and full timings
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
  int rough_timed = 0;    // candidates given a rough timing (the rest were skipped)
  TunePhases phases;

  // default_ms / best_ms: 1 when the default was kept, > 1 for a faster solution.
  double gain() const { return best_ms > 0 ? default_ms / best_ms : 1.0; }
};

// Operand sets to rotate over: ceil(pool / operand_bytes), where pool is the config's rotating
// buffer (-1: `cache_bytes`, 0: no rotation -> 1 set, > 0: that many MiB); at least 1.
int rotating_copies(const TuningConfig& config, size_t operand_bytes, size_t cache_bytes);

// Runs the loop above; `history` (may be null: every candidate is timed) is read and then
// updated with this GEMM's rough timings. `next` (may be null): the GEMM tuned after this one,
// whose candidates the device may list in the background (TunableGemm::prefetch_candidates) once
// this one has listed its own. Errors (naming the signature): an invalid signature, a
// candidate list that does not start with the default, operands that cannot be prepared, or a
// default that fails to run or time. A failing non-default candidate is reported, not an error.
absl::StatusOr<TuneOutcome> tune_gemm(TunableGemm& gemm, const GemmSignature& sig,
                                      const TuningConfig& config, TuneHistory* history = nullptr,
                                      const GemmSignature* next = nullptr);

}  // namespace tessera
