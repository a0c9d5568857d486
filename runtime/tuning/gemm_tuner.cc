#include "runtime/tuning/gemm_tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// The largest |x - ref|, and whether every element is within `tol`. A NaN anywhere fails.
struct Comparison {
  double max_error = 0;
  bool within = true;
};

Comparison compare(const std::vector<float>& out, const std::vector<float>& ref,
                   const NumericsTolerance& tol) {
  Comparison c;
  if (out.size() != ref.size()) {
    c.within = false;
    c.max_error = std::numeric_limits<double>::infinity();
    return c;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const double r = ref[i];
    const double err = std::fabs(static_cast<double>(out[i]) - r);
    if (!(err <= tol.atol + tol.rtol * std::fabs(r))) c.within = false;
    if (std::isnan(err)) {
      c.max_error = std::numeric_limits<double>::infinity();
    } else {
      c.max_error = std::max(c.max_error, err);
    }
  }
  return c;
}

absl::Status with_sig(const GemmSignature& sig, const absl::Status& s) {
  return absl::Status(s.code(), str_cat("tuning ", sig.key(), ": ", s.message()));
}

}  // namespace

int rotating_copies(const TuningConfig& config, size_t operand_bytes, size_t cache_bytes) {
  if (config.rotating_buffer_size_mb == 0 || operand_bytes == 0) return 1;
  const size_t pool = config.rotating_buffer_size_mb < 0
                          ? cache_bytes
                          : static_cast<size_t>(config.rotating_buffer_size_mb) * kMiB;
  const size_t copies = (pool + operand_bytes - 1) / operand_bytes;
  return static_cast<int>(std::clamp<size_t>(copies, 1, std::numeric_limits<int>::max()));
}

absl::StatusOr<TuneOutcome> tune_gemm(TunableGemm& gemm, const GemmSignature& sig,
                                      const TuningConfig& config) {
  if (absl::Status s = sig.validate(); !s.ok()) return with_sig(sig, s);
  absl::StatusOr<std::vector<std::string>> candidates = gemm.candidates(sig);
  if (!candidates.ok()) return with_sig(sig, candidates.status());
  if (candidates->empty() || (*candidates)[0] != kDefaultSolution) {
    return with_sig(sig, absl::InternalError(str_cat("the device's candidate list does not start "
                                                     "with ",
                                                     kDefaultSolution)));
  }

  TuneOutcome outcome;
  outcome.copies = rotating_copies(config, gemm.operand_bytes(sig), gemm.cache_bytes());
  if (absl::Status s = gemm.prepare(sig, outcome.copies); !s.ok()) return with_sig(sig, s);
  struct Releaser {
    TunableGemm& gemm;
    ~Releaser() { gemm.release(); }
  } releaser{gemm};

  if (absl::Status s = gemm.run(kDefaultSolution, 0); !s.ok()) return with_sig(sig, s);
  absl::StatusOr<std::vector<float>> reference = gemm.output(0);
  if (!reference.ok()) return with_sig(sig, reference.status());
  const NumericsTolerance& tol = config.tolerance(sig.dtype);

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

  // Rough timing of every candidate: cheap, and it orders the rest.
  std::vector<double> rough(n, std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < n; ++i) {
    outcome.candidates[i].solution = (*candidates)[i];
    // One untimed call first: a candidate's first launch pays for loading its kernel.
    absl::Status warm = i == 0 ? absl::OkStatus() : gemm.run((*candidates)[i], 0);
    absl::StatusOr<double> ms =
        warm.ok() ? gemm.time_ms((*candidates)[i], rough_iterations) : absl::StatusOr<double>(warm);
    if (ms.ok()) {
      rough[i] = *ms;
    } else if (absl::Status s = fail(i, ms.status()); !s.ok()) {
      return s;
    }
  }

  // The default's full timing is the bar; then the others, fastest rough timing first.
  absl::StatusOr<double> default_ms = gemm.time_ms(kDefaultSolution, timed_iterations(config, rough[0]));
  if (!default_ms.ok()) return with_sig(sig, default_ms.status());
  outcome.default_ms = outcome.best_ms = outcome.candidates[0].ms = *default_ms;
  outcome.best = kDefaultSolution;
  std::vector<size_t> order;
  for (size_t i = 1; i < n; ++i) {
    if (outcome.candidates[i].verdict != CandidateVerdict::kFailed) order.push_back(i);
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
      absl::StatusOr<std::vector<float>> out =
          ran.ok() ? gemm.output(0) : absl::StatusOr<std::vector<float>>(ran);
      if (!out.ok()) {
        if (absl::Status s = fail(i, out.status()); !s.ok()) return s;
        continue;
      }
      const Comparison c = compare(*out, *reference, tol);
      report.max_error = c.max_error;
      if (!c.within) {
        report.verdict = CandidateVerdict::kRejected;
        report.reason = str_cat("max |error| ", c.max_error, " exceeds atol ", tol.atol, " + rtol ",
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
  if (config.verbose >= 1) {
    spdlog::info("tuned {}: {} {:.4f} ms (default {:.4f} ms, gain {:.2f}x; {} operand sets)",
                 sig.key(), outcome.best, outcome.best_ms, outcome.default_ms, outcome.gain(),
                 outcome.copies);
  }
  return outcome;
}

}  // namespace tessera
