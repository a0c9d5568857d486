// The GEMM tuning of one device: its results (loaded from its results file at start), the
// mode's rules, and the GemmSolutionSource its backend's linear() asks.
//
//   off     solution_for answers nothing (the backend's untuned choice); the file is not read.
//   use     answers what the file has (hit) or nothing (miss); never tunes.
//   tune    as use, but a miss is tuned on the calling thread (the engine's, on a backend's
//           linear()), then saved. While a warmup holds this device's tuner, a miss answers the
//           untuned choice instead of waiting, and is tuned on a later call.
//   warmup  as tune; the daemon also tunes the warmup plan before serving (warmup_job.h).
//
// A results file whose validators differ from the device's (TunableGemm::validators) is ignored
// with a warning naming the key; the first save then replaces it. Saves are atomic
// (atomic_file.h) and happen after every newly tuned GEMM.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tuning/gemm_tuner.h"
#include "runtime/tuning/results_file.h"
#include "runtime/backend/tunable_gemm.h"
#include "runtime/tuning/tuning_config.h"
#include "runtime/tuning/tuning_results.h"

namespace tessera {

// What happened to one GEMM asked for by tune().
enum class GemmTuneOutcome {
  kTuned,    // tuned now
  kCached,   // a result was there already (not forced)
  kFailed,   // tuning failed; `message` says why
  kSkipped,  // not attempted (a warmup's time budget ran out, or it was cancelled)
};
const char* gemm_tune_outcome_name(GemmTuneOutcome outcome);  // "tuned", "cached", ...

struct GemmTuneReport {
  int device = 0;
  GemmSignature signature;
  std::string used_by;  // the projections that run it, when it came from a warmup plan
  GemmTuneOutcome outcome = GemmTuneOutcome::kTuned;
  std::string solution;   // the kept solution (kTuned, kCached)
  double avg_ms = 0;      // its mean ms per call (0 when the file gave none)
  double default_ms = 0;  // the default's (0 when not timed in this process)
  double gain = 0;        // default_ms / avg_ms; 0 when not known
  std::string message;    // why it failed or was skipped
};

// Cumulative counters of one device, for metrics.
struct GemmTuningCounters {
  uint64_t hits = 0;          // solution_for answered a tuned solution
  uint64_t misses = 0;        // solution_for found nothing (answered none, or tuned it)
  uint64_t shapes_tuned = 0;  // GEMMs tuned in this process
  double tuning_seconds = 0;  // time spent tuning them
  TunePhases phases;          // ...and where it went
  uint64_t candidates = 0;    // candidates listed for them
  uint64_t rough_timed = 0;   // of which rough-timed (the rest skipped, see TuneHistory)
};

class TuningContext final : public GemmSolutionSource {
 public:
  // `gemm` (not owned) must outlive the context. Reads the device's results file
  // (results_path_for_device: `kind` and `ordinal` name it) unless the mode is off; warnings are
  // logged and kept. An unreadable file (not a missing one) is an error naming the path.
  static absl::StatusOr<std::unique_ptr<TuningContext>> create(const TuningConfig& config,
                                                               TuningDeviceKind kind, int ordinal,
                                                               TunableGemm* gemm);

  // GemmSolutionSource. Thread-safe. The version moves only when tuning changes a solution
  // already answered (tuning_results.h), not with every GEMM a warmup tunes.
  std::optional<std::string> solution_for(const GemmSignature& sig) override;
  uint64_t version() const override { return results_.version(); }

  // Tunes `sig` on the calling thread (waiting for the device's tuner when a warmup or another
  // caller holds it), unless it has a result and `force` is false; saves the file after tuning.
  // Tunes in any mode: the caller decides whether tuning is wanted.
  // `next` (may be null): the signature the caller tunes after this one; unless it has a result
  // and `force` is false, the device lists its candidates in the background
  // (TunableGemm::prefetch_candidates) while `sig` is timed.
  GemmTuneReport tune(const GemmSignature& sig, bool force, const GemmSignature* next = nullptr);

  int ordinal() const { return ordinal_; }
  const std::string& path() const { return path_; }
  const Validators& validators() const { return validators_; }
  // What loading the file reported (validator mismatches, skipped lines).
  const std::vector<std::string>& load_warnings() const { return load_warnings_; }

  TunedEntries results() const { return results_.snapshot(); }
  GemmTuningCounters counters() const;
  // default / tuned time of each GEMM tuned in this process.
  std::map<GemmSignature, double> gains() const;

 private:
  TuningContext(const TuningConfig& config, TuningDeviceKind kind, int ordinal, TunableGemm* gemm);
  absl::Status load();
  // Tunes `sig` with tuner_mu_ held.
  GemmTuneReport tune_locked(const GemmSignature& sig, const GemmSignature* next = nullptr);

  const TuningConfig config_;
  const int ordinal_;
  const std::string path_;
  TunableGemm* const gemm_;
  Validators validators_;
  std::vector<std::string> load_warnings_;
  TuningResults results_;

  // One tuning at a time per device: the TunableGemm holds one signature's operands.
  std::mutex tuner_mu_;
  std::set<GemmSignature> failed_;  // tune-on-miss failures, not retried (tuner_mu_)
  TuneHistory history_;             // rough timings so far, by GEMM family (tuner_mu_)

  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  mutable std::mutex stats_mu_;
  GemmTuningCounters tuned_;  // shapes_tuned, tuning_seconds, phases, candidates, rough_timed
  std::map<GemmSignature, double> gains_;
};

}  // namespace tessera
