#include "runtime/tuning/gemm_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

absl::Status with_sig(const GemmSignature& sig, const absl::Status& s) {
  return absl::Status(s.code(), str_cat("tuning ", sig.key(), ": ", s.message()));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GemmSignature TuneHistory::family(const GemmSignature& sig) {
  GemmSignature f = sig;
  f.n = 0;
  if (sig.trans_b) f.ldb = 0;  // ldb >= n there: it moves with the tokens too
  return f;
}

bool TuneHistory::skips(const GemmSignature& sig, const std::string& solution,
                        std::string* why) const {
  auto fam = families_.find(family(sig));
  if (fam == families_.end()) return false;
  auto it = fam->second.find(solution);
  if (it == fam->second.end() || sig.n <= 0 || it->second.n <= 0) return false;
  const Seen& seen = it->second;
  const double reach = static_cast<double>(std::max(sig.n, seen.n)) /
                       static_cast<double>(std::min(sig.n, seen.n));
  if (reach > kHistoryReach || !(seen.ratio > kHistoryPruneFactor)) return false;
  if (why != nullptr) {
    *why = std::isfinite(seen.ratio)
               ? str_cat("rough time ", seen.ratio, "x the best at n=", seen.n)
               : str_cat("failed at n=", seen.n);
  }
  return true;
}

void TuneHistory::record(const GemmSignature& sig, const std::string& solution, double ratio) {
  families_[family(sig)][solution] = Seen{ratio, sig.n};
}

int rotating_copies(const TuningConfig& config, size_t operand_bytes, size_t cache_bytes) {
  if (config.rotating_buffer_size_mb == 0 || operand_bytes == 0) return 1;
  const size_t pool = config.rotating_buffer_size_mb < 0
                          ? cache_bytes
                          : static_cast<size_t>(config.rotating_buffer_size_mb) * kMiB;
  const size_t copies = (pool + operand_bytes - 1) / operand_bytes;
  return static_cast<int>(std::clamp<size_t>(copies, 1, std::numeric_limits<int>::max()));
}

absl::StatusOr<TuneOutcome> tune_gemm(TunableGemm& gemm, const GemmSignature& sig,
                                      const TuningConfig& config, TuneHistory* history,
                                      const GemmSignature* next) {
  if (absl::Status s = sig.validate(); !s.ok()) return with_sig(sig, s);
  auto t0 = std::chrono::steady_clock::now();
  TuneOutcome outcome;
  absl::StatusOr<std::vector<std::string>> candidates = gemm.candidates(sig);
  if (!candidates.ok()) return with_sig(sig, candidates.status());
  if (candidates->empty() || (*candidates)[0] != kDefaultSolution) {
    return with_sig(sig, absl::InternalError(str_cat("the device's candidate list does not start "
                                                     "with ",
                                                     kDefaultSolution)));
  }
  outcome.phases.list = seconds_since(t0);
  // This GEMM has taken its listing: the next one's is made while this one is timed.
  if (next != nullptr) gemm.prefetch_candidates(*next);

  t0 = std::chrono::steady_clock::now();
  outcome.copies = rotating_copies(config, gemm.operand_bytes(sig), gemm.cache_bytes());
  if (absl::Status s = gemm.prepare(sig, outcome.copies); !s.ok()) return with_sig(sig, s);
  struct Releaser {
    TunableGemm& gemm;
    ~Releaser() { gemm.release(); }
  } releaser{gemm};

  if (absl::Status s = gemm.run(kDefaultSolution, 0); !s.ok()) return with_sig(sig, s);
  if (config.numerical_check) {
    if (absl::Status s = gemm.keep_reference(0); !s.ok()) return with_sig(sig, s);
  }
  const NumericsTolerance& tol = config.tolerance(sig.dtype);
  outcome.phases.prepare = seconds_since(t0);

  const int64_t rough_iterations =
      config.max_tuning_iterations > 0 ? std::min(kRoughIterations, config.max_tuning_iterations)
                                       : kRoughIterations;
  const size_t n = candidates->size();
  outcome.candidates.resize(n);
  auto fail = [&](size_t i, const absl::Status& s) -> absl::Status {
    if (i == 0) return with_sig(sig, s);  // the default must run
    CandidateReport& report = outcome.candidates[i];
    report.verdict = CandidateVerdict::kFailed;
    report.reason = std::string(s.message());
    spdlog::info("tuning {}: candidate {} failed: {}", sig.key(), report.solution, report.reason);
    return absl::OkStatus();
  };

  // Rough timing of every candidate not skipped by the history: cheap, and it orders the rest.
  t0 = std::chrono::steady_clock::now();
  std::vector<double> rough(n, std::numeric_limits<double>::infinity());
  std::vector<std::string> to_time;
  std::vector<size_t> timed_index;
  for (size_t i = 0; i < n; ++i) {
    CandidateReport& report = outcome.candidates[i];
    report.solution = (*candidates)[i];
    if (i > 0 && history != nullptr && history->skips(sig, report.solution, &report.reason)) {
      report.verdict = CandidateVerdict::kSkipped;
      if (config.verbose >= 2) {
        spdlog::info("tuning {}: {} skipped: {}", sig.key(), report.solution, report.reason);
      }
      continue;
    }
    to_time.push_back(report.solution);
    timed_index.push_back(i);
  }
  std::vector<absl::StatusOr<double>> times = gemm.time_each(to_time, rough_iterations);
  if (times.size() != to_time.size()) {
    return with_sig(sig, absl::InternalError(str_cat("the device timed ", times.size(), " of ",
                                                     to_time.size(), " candidates")));
  }
  double best_rough = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < times.size(); ++j) {
    const size_t i = timed_index[j];
    if (times[j].ok()) {
      rough[i] = *times[j];
      best_rough = std::min(best_rough, rough[i]);
    } else if (absl::Status s = fail(i, times[j].status()); !s.ok()) {
      return s;
    }
  }
  outcome.rough_timed = static_cast<int>(to_time.size());
  if (history != nullptr && best_rough > 0 && std::isfinite(best_rough)) {
    for (size_t i : timed_index) history->record(sig, (*candidates)[i], rough[i] / best_rough);
  }
  outcome.phases.rough = seconds_since(t0);

  // The default's full timing is the bar; then the others, fastest rough timing first.
  t0 = std::chrono::steady_clock::now();
  absl::StatusOr<double> default_ms = gemm.time_ms(kDefaultSolution, timed_iterations(config, rough[0]));
  if (!default_ms.ok()) return with_sig(sig, default_ms.status());
  outcome.default_ms = outcome.best_ms = outcome.candidates[0].ms = *default_ms;
  outcome.best = kDefaultSolution;
  std::vector<size_t> order;
  for (size_t i = 1; i < n; ++i) {
    const CandidateVerdict v = outcome.candidates[i].verdict;
    if (v != CandidateVerdict::kFailed && v != CandidateVerdict::kSkipped) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rough[a] < rough[b]; });
  int timed = 0;
  for (size_t i : order) {
    CandidateReport& report = outcome.candidates[i];
    const std::string& name = report.solution;
    if (rough[i] > kPruneFactor * outcome.best_ms || timed >= kMaxFullTimings) {
      report.verdict = CandidateVerdict::kPruned;
      report.ms = rough[i];
      report.reason = rough[i] > kPruneFactor * outcome.best_ms
                          ? str_cat("rough ", rough[i], " ms is more than ", kPruneFactor,
                                    "x the best ", outcome.best_ms, " ms")
                          : str_cat("not among the ", kMaxFullTimings, " fastest rough timings");
      if (config.verbose >= 2) spdlog::info("tuning {}: {} pruned: {}", sig.key(), name, report.reason);
      continue;
    }
    if (config.numerical_check) {
      absl::Status ran = gemm.run(name, 0);
      absl::StatusOr<OutputComparison> c =
          ran.ok() ? gemm.compare_output(0, tol.rtol, tol.atol)
                   : absl::StatusOr<OutputComparison>(ran);
      if (!c.ok()) {
        if (absl::Status s = fail(i, c.status()); !s.ok()) return s;
        continue;
      }
      report.max_error = c->max_error;
      if (!c->within) {
        report.verdict = CandidateVerdict::kRejected;
        report.reason = str_cat("max |error| ", c->max_error, " exceeds atol ", tol.atol, " + rtol ",
                                tol.rtol, " x |reference|");
        spdlog::warn("tuning {}: candidate {} rejected: {}", sig.key(), name, report.reason);
        continue;
      }
    }
    ++timed;
    absl::StatusOr<double> ms = gemm.time_ms(name, timed_iterations(config, rough[i]));
    if (!ms.ok()) {
      if (absl::Status s = fail(i, ms.status()); !s.ok()) return s;
      continue;
    }
    report.ms = *ms;
    if (*ms < outcome.best_ms) {
      outcome.best = name;
      outcome.best_ms = *ms;
    }
    if (config.verbose >= 3) spdlog::info("tuning {}: {} {:.4f} ms", sig.key(), name, *ms);
  }
  outcome.phases.final = seconds_since(t0);
  if (config.verbose >= 1) {
    spdlog::info("tuned {}: {} {:.4f} ms (default {:.4f} ms, gain {:.2f}x; {} operand sets; "
                 "{} of {} candidates rough-timed; list {:.3f} s, prepare {:.3f} s, rough {:.3f} "
                 "s, final {:.3f} s)",
                 sig.key(), outcome.best, outcome.best_ms, outcome.default_ms, outcome.gain(),
                 outcome.copies, outcome.rough_timed, n, outcome.phases.list,
                 outcome.phases.prepare, outcome.phases.rough, outcome.phases.final);
  }
  return outcome;
}

}  // namespace tessera
