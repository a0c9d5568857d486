#include "runtime/tuning/tuning_context.h"

#include <chrono>

#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

const char* gemm_tune_outcome_name(GemmTuneOutcome outcome) {
  switch (outcome) {
    case GemmTuneOutcome::kTuned:
      return "tuned";
    case GemmTuneOutcome::kCached:
      return "cached";
    case GemmTuneOutcome::kFailed:
      return "failed";
    case GemmTuneOutcome::kSkipped:
      return "skipped";
  }
  return "unknown";
}

TuningContext::TuningContext(const TuningConfig& config, TuningDeviceKind kind, int ordinal,
                             TunableGemm* gemm)
    : config_(config),
      ordinal_(ordinal),
      path_(results_path_for_device(config, kind, ordinal)),
      gemm_(gemm) {}

absl::StatusOr<std::unique_ptr<TuningContext>> TuningContext::create(const TuningConfig& config,
                                                                     TuningDeviceKind kind,
                                                                     int ordinal,
                                                                     TunableGemm* gemm) {
  std::unique_ptr<TuningContext> ctx(new TuningContext(config, kind, ordinal, gemm));
  for (auto& [key, value] : gemm->validators()) ctx->validators_[key] = value;
  if (reads_results(config.mode)) {
    if (absl::Status s = ctx->load(); !s.ok()) return s;
  }
  return ctx;
}

absl::Status TuningContext::load() {
  absl::StatusOr<LoadedResults> loaded = ResultsFile::load(path_, validators_);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        str_cat("tuning results of device ", ordinal_, ": ",
                                loaded.status().message()));
  }
  load_warnings_ = loaded->warnings;
  for (const std::string& w : load_warnings_) spdlog::warn("tuning: {}", w);
  if (!loaded->exists) {
    spdlog::info("tuning: device {}: no results file at {} yet ({} mode)", ordinal_, path_,
                 tuning_mode_name(config_.mode));
  } else if (!loaded->validators_match) {
    spdlog::warn("tuning: device {}: {} is from another build or device and is ignored{}", ordinal_,
                 path_,
                 tunes_on_miss(config_.mode) ? "; GEMMs are re-tuned and the file replaced" : "");
  } else {
    spdlog::info("tuning: device {}: {} tuned GEMMs from {} ({} mode)", ordinal_,
                 loaded->entries.size(), path_, tuning_mode_name(config_.mode));
  }
  results_.merge(loaded->entries);
  return absl::OkStatus();
}

std::optional<std::string> TuningContext::solution_for(const GemmSignature& sig) {
  if (config_.mode == TuningMode::kOff) return std::nullopt;
  // A miss is tuned before it is answered: nobody holds the miss then, so storing the result
  // does not move version() (tuning_results.h) and no other shape's cached answer is dropped.
  const bool miss = tunes_on_miss(config_.mode) && !results_.find(sig);
  if (miss) {
    // Never wait behind a warmup: the untuned choice serves until the tuner is free.
    std::unique_lock<std::mutex> lock(tuner_mu_, std::try_to_lock);
    if (lock.owns_lock() && failed_.count(sig) == 0) {
      const GemmTuneReport report = tune_locked(sig);
      if (report.outcome == GemmTuneOutcome::kFailed) {
        failed_.insert(sig);
        spdlog::warn("tuning: device {}: {}; {} runs the default", ordinal_, report.message,
                     sig.key());
      }
    }
  }
  const std::optional<TunedSolution> answer = results_.answer(sig);
  const bool hit = answer.has_value() && !miss;
  (hit ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
  if (!answer) return std::nullopt;
  return answer->solution;
}

GemmTuneReport TuningContext::tune(const GemmSignature& sig, bool force,
                                   const GemmSignature* next) {
  std::lock_guard<std::mutex> lock(tuner_mu_);
  if (next != nullptr && !force && results_.find(*next)) next = nullptr;  // nothing to list
  if (!force) {
    if (std::optional<TunedSolution> have = results_.find(sig)) {
      if (next != nullptr) gemm_->prefetch_candidates(*next);
      GemmTuneReport r;
      r.device = ordinal_;
      r.signature = sig;
      r.outcome = GemmTuneOutcome::kCached;
      r.solution = have->solution;
      r.avg_ms = have->avg_ms.value_or(0);
      std::lock_guard<std::mutex> stats(stats_mu_);
      if (auto it = gains_.find(sig); it != gains_.end()) {
        r.gain = it->second;
        if (r.avg_ms > 0) r.default_ms = r.gain * r.avg_ms;
      }
      return r;
    }
  }
  return tune_locked(sig, next);
}

GemmTuneReport TuningContext::tune_locked(const GemmSignature& sig, const GemmSignature* next) {
  GemmTuneReport r;
  r.device = ordinal_;
  r.signature = sig;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<TuneOutcome> outcome = tune_gemm(*gemm_, sig, config_, &history_, next);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!outcome.ok()) {
    r.outcome = GemmTuneOutcome::kFailed;
    r.message = std::string(outcome.status().message());
    return r;
  }
  r.outcome = GemmTuneOutcome::kTuned;
  r.solution = outcome->best;
  r.avg_ms = outcome->best_ms;
  r.default_ms = outcome->default_ms;
  r.gain = outcome->gain();
  results_.insert(sig, TunedSolution{outcome->best, outcome->best_ms});
  {
    std::lock_guard<std::mutex> stats(stats_mu_);
    ++tuned_.shapes_tuned;
    tuned_.tuning_seconds += seconds;
    tuned_.phases.list += outcome->phases.list;
    tuned_.phases.prepare += outcome->phases.prepare;
    tuned_.phases.rough += outcome->phases.rough;
    tuned_.phases.final += outcome->phases.final;
    tuned_.candidates += outcome->candidates.size();
    tuned_.rough_timed += static_cast<uint64_t>(outcome->rough_timed);
    gains_[sig] = r.gain;
  }
  if (absl::Status s = ResultsFile::save(path_, validators_, results_.snapshot()); !s.ok()) {
    spdlog::warn("tuning: device {}: cannot save the results: {}", ordinal_,
                 std::string(s.message()));
  }
  return r;
}

GemmTuningCounters TuningContext::counters() const {
  GemmTuningCounters c;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    c = tuned_;
  }
  c.hits = hits_.load(std::memory_order_relaxed);
  c.misses = misses_.load(std::memory_order_relaxed);
  return c;
}

std::map<GemmSignature, double> TuningContext::gains() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return gains_;
}

}  // namespace tessera
