// The seams between the GEMM tuner (device-independent) and a backend's GEMM algorithms.
//
//   TunableGemm          what the tuner asks of one device: the candidate algorithms for a
//                        signature, operands to run them on, their output, and a timer.
//   GemmSolutionSource   what a backend's linear() asks of the tuning context: which algorithm to
//                        run for a signature (the library default unless one is tuned).
//
// Solutions are named by strings, as the results file writes them; kDefaultSolution
// ("Default") is always a candidate and is the reference the others are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend/gemm_signature.h"

namespace tessera {

// The PyTorch name of the untuned library default, usable as a solution.
inline constexpr std::string_view kDefaultSolution = "Default";

// Keys of the validators a TunableGemm reports (runtime/tuning/results_file.h writes them as
// `Validator,KEY,VALUE` lines; a file whose validators differ from the device's is ignored).
inline constexpr std::string_view kValidatorTesseraVersion = "TESSERA_VERSION";
inline constexpr std::string_view kValidatorCudaVersion = "CUDA_VERSION";
inline constexpr std::string_view kValidatorRocmVersion = "ROCM_VERSION";
inline constexpr std::string_view kValidatorBlasLtVersion = "BLASLT_VERSION";
inline constexpr std::string_view kValidatorGpuArch = "GPU_ARCH";
inline constexpr std::string_view kValidatorDeviceName = "DEVICE_NAME";

// One output against the reference, element-wise (TunableGemm::compare_output).
struct OutputComparison {
  double max_error = 0;  // the largest |x - ref|; infinity when any is NaN
  bool within = true;    // every |x - ref| <= atol + rtol * |ref| (a NaN never is)
};

// The host's comparison of two outputs, as above; outputs of different sizes are never within.
inline OutputComparison compare_outputs(const std::vector<float>& out,
                                        const std::vector<float>& ref, double rtol, double atol) {
  OutputComparison c;
  if (out.size() != ref.size()) {
    c.within = false;
    c.max_error = std::numeric_limits<double>::infinity();
    return c;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const double r = ref[i];
    const double err = std::fabs(static_cast<double>(out[i]) - r);
    if (!(err <= atol + rtol * std::fabs(r))) c.within = false;
    c.max_error = std::isnan(err) ? std::numeric_limits<double>::infinity()
                                  : std::max(c.max_error, err);
  }
  return c;
}

class TunableGemm {
 public:
  virtual ~TunableGemm() = default;

  // Results-file validators for this device: (key, value), e.g. ("GPU_ARCH", "sm_90").
  virtual std::vector<std::pair<std::string, std::string>> validators() const = 0;

  // The candidate solutions for `sig`, kDefaultSolution first. Only candidates that can run
  // `sig` (the library's own check passed, the workspace fits) are listed.
  virtual absl::StatusOr<std::vector<std::string>> candidates(const GemmSignature& sig) = 0;

  // Bytes of one operand set of `sig` (A, B and C), for sizing the rotation; and the size of
  // the device's last-level cache, which a rotation should exceed.
  virtual size_t operand_bytes(const GemmSignature& sig) const = 0;
  virtual size_t cache_bytes() const = 0;

  // Allocates `copies` (>= 1) operand sets for `sig`, A and B filled with the same seeded
  // random values in every set, and makes `sig` current for run/output/time_ms.
  virtual absl::Status prepare(const GemmSignature& sig, int copies) = 0;
  // Runs `solution` once on operand set `copy` (asynchronously where the device is).
  virtual absl::Status run(std::string_view solution, int copy) = 0;
  // Operand set `copy`'s C as fp32, column-major [m, n] in the signature's convention (waits
  // for the device).
  virtual absl::StatusOr<std::vector<float>> output(int copy) = 0;
  // Mean milliseconds of one call over `iterations` calls of `solution`, rotating over the
  // operand sets, measured with the device's own timers.
  virtual absl::StatusOr<double> time_ms(std::string_view solution, int64_t iterations) = 0;
  // Frees what prepare() allocated.
  virtual void release() = 0;

  // The calls below have host-side definitions in terms of the ones above; a device overrides
  // them to keep the work on the device (no output copied back, no wait per candidate).

  // Keeps operand set `copy`'s output (what the last run() on it wrote) as the reference that
  // compare_output() compares with, until the next prepare().
  virtual absl::Status keep_reference(int copy) {
    absl::StatusOr<std::vector<float>> out = output(copy);
    if (!out.ok()) return out.status();
    host_reference_ = *std::move(out);
    return absl::OkStatus();
  }
  // Operand set `copy`'s output against the kept reference (see OutputComparison). Like
  // output(), leaves that output poisoned, so that the next comparison sees only what a later
  // run() wrote.
  virtual absl::StatusOr<OutputComparison> compare_output(int copy, double rtol, double atol) {
    absl::StatusOr<std::vector<float>> out = output(copy);
    if (!out.ok()) return out.status();
    return compare_outputs(*out, host_reference_, rtol, atol);
  }
  // Rough timings of many candidates in one pass: for each solution, one untimed call on operand
  // set 0 (its first launch may load its kernels; a device may leave the call out for a
  // solution whose kernels it has run before), then time_ms(solution, iterations). One result
  // per solution, in order; a failing solution's error in its place.
  virtual std::vector<absl::StatusOr<double>> time_each(const std::vector<std::string>& solutions,
                                                        int64_t iterations) {
    std::vector<absl::StatusOr<double>> out;
    out.reserve(solutions.size());
    for (const std::string& s : solutions) {
      absl::Status warm = run(s, 0);
      out.push_back(warm.ok() ? time_ms(s, iterations) : absl::StatusOr<double>(warm));
    }
    return out;
  }
  // A hint that `sig` is likely the signature of the next candidates() call (the tuner gives it
  // once the current signature has listed its own): a device may list (and check) its
  // candidates in the background meanwhile. candidates() still answers for any signature.
  virtual void prefetch_candidates(const GemmSignature& sig) { (void)sig; }

 private:
  std::vector<float> host_reference_;  // keep_reference()'s, for the host-side definitions
};

class GemmSolutionSource {
 public:
  virtual ~GemmSolutionSource() = default;
  // The solution linear() should run for `sig`: the tuned one, or none where nothing is tuned for
  // it (the backend then runs what it runs untuned: Default, or for decode-sized FP8 weights
  // tessera's FP8-weight kernel). In tune mode an untuned signature is tuned first, on the
  // calling thread.
  virtual std::optional<std::string> solution_for(const GemmSignature& sig) = 0;
  // Moves whenever an answer solution_for has already given may have changed: a backend may
  // cache answers (name -> its own algorithm handle), and record them into graphs, until it
  // does. An answer not given yet may change without it.
  virtual uint64_t version() const = 0;
};

}  // namespace tessera
