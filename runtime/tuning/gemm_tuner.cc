#include "runtime/tuning/gemm_tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/str_cat.h"
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
  double best_ms = std::numeric_limits<double>::infinity();
  for (const std::string& name : *candidates) {
    CandidateReport report;
    report.solution = name;
    const bool is_default = name == kDefaultSolution;
    auto fail = [&](const absl::Status& s) -> absl::Status {
      if (is_default) return with_sig(sig, s);
      report.verdict = CandidateVerdict::kFailed;
      report.reason = std::string(s.message());
      spdlog::info("tuning {}: candidate {} failed: {}", sig.key(), name, report.reason);
      return absl::OkStatus();
    };

    if (!is_default && config.numerical_check) {
      absl::Status ran = gemm.run(name, 0);
      absl::StatusOr<std::vector<float>> out =
          ran.ok() ? gemm.output(0) : absl::StatusOr<std::vector<float>>(ran);
      if (!out.ok()) {
        if (absl::Status s = fail(out.status()); !s.ok()) return s;
        outcome.candidates.push_back(std::move(report));
        continue;
      }
      const Comparison c = compare(*out, *reference, tol);
      report.max_error = c.max_error;
      if (!c.within) {
        report.verdict = CandidateVerdict::kRejected;
        report.reason = str_cat("max |error| ", c.max_error, " exceeds atol ", tol.atol, " + rtol ",
                                tol.rtol, " x |reference|");
        spdlog::warn("tuning {}: candidate {} rejected: {}", sig.key(), name, report.reason);
        outcome.candidates.push_back(std::move(report));
        continue;
      }
    }

    absl::StatusOr<double> rough = gemm.time_ms(name, rough_iterations);
    if (!rough.ok()) {
      if (absl::Status s = fail(rough.status()); !s.ok()) return s;
      outcome.candidates.push_back(std::move(report));
      continue;
    }
    if (!is_default && *rough > kPruneFactor * best_ms) {
      report.verdict = CandidateVerdict::kPruned;
      report.ms = *rough;
      report.reason = str_cat("rough ", *rough, " ms is more than ", kPruneFactor, "x the best ",
                              best_ms, " ms");
      if (config.verbose >= 2) spdlog::info("tuning {}: {} pruned: {}", sig.key(), name, report.reason);
      outcome.candidates.push_back(std::move(report));
      continue;
    }
    absl::StatusOr<double> ms = gemm.time_ms(name, timed_iterations(config, *rough));
    if (!ms.ok()) {
      if (absl::Status s = fail(ms.status()); !s.ok()) return s;
      outcome.candidates.push_back(std::move(report));
      continue;
    }
    report.ms = *ms;
    if (is_default) outcome.default_ms = *ms;
    if (is_default || *ms < best_ms) {  // the default is listed first
      best_ms = *ms;
      outcome.best = name;
      outcome.best_ms = *ms;
    }
    if (config.verbose >= 3) spdlog::info("tuning {}: {} {:.4f} ms", sig.key(), name, *ms);
    outcome.candidates.push_back(std::move(report));
  }
  if (config.verbose >= 1) {
    spdlog::info("tuned {}: {} {:.4f} ms (default {:.4f} ms, gain {:.2f}x; {} operand sets)",
                 sig.key(), outcome.best, outcome.best_ms, outcome.default_ms, outcome.gain(),
                 outcome.copies);
  }
  return outcome;
}

}  // namespace tessera
