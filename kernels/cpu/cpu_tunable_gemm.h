// The CPU backend's GEMMs for the tuner: the algorithms of cpu_gemm_algos.h on fp32 operands of
// the tuner's own, timed with std::chrono::steady_clock. Only linear-layer GEMMs are tunable:
// GemmTunableOp_float_TN with packed leading dimensions (GemmSignature::for_linear, kF32).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend.h"

namespace tessera {

class CpuTunableGemm final : public TunableGemm {
 public:
  // `threads`: the OpenMP threads the backend computes with (OpenMP's setting is per calling
  // thread, and warmup calls come from threads of their own, so each entry sets it).
  explicit CpuTunableGemm(int threads) : threads_(threads) {}

  // TESSERA_VERSION, CPU_MODEL (/proc/cpuinfo), OPENBLAS_CONFIG (openblas_get_config) and
  // CPU_THREADS (OpenMP threads: which algorithm wins depends on it).
  std::vector<std::pair<std::string, std::string>> validators() const override;
  // Default, then cpu_sgemm (one token) or cpu_gemv_rows (more), then cpu_split_out.
  absl::StatusOr<std::vector<std::string>> candidates(const GemmSignature& sig) override;
  size_t operand_bytes(const GemmSignature& sig) const override;
  // The last-level cache (sysconf), 32 MiB when the system does not say.
  size_t cache_bytes() const override;
  absl::Status prepare(const GemmSignature& sig, int copies) override;
  absl::Status run(std::string_view solution, int copy) override;
  absl::StatusOr<std::vector<float>> output(int copy) override;
  absl::StatusOr<double> time_ms(std::string_view solution, int64_t iterations) override;
  void release() override;

 private:
  struct Operands {
    std::vector<float> x;    // [tokens, in]
    std::vector<float> w;    // [out, in]
    std::vector<float> out;  // [tokens, out]
  };
  absl::Status check_copy(int copy) const;

  const int threads_;
  int64_t tokens_ = 0;        // the signature's n
  int64_t out_features_ = 0;  // m
  int64_t in_features_ = 0;   // k
  std::vector<Operands> sets_;
};

}  // namespace tessera
