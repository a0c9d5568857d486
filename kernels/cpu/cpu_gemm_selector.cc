#include "kernels/cpu/cpu_gemm_selector.h"

#include <optional>
#include <string>

#include "spdlog/spdlog.h"

namespace tessera {

cpu::GemmAlgo CpuGemmSelector::select(GemmSolutionSource& source, int64_t m, int64_t n,
                                      int64_t k) {
  const uint64_t version = source.version();
  if (!valid_ || version != version_) {
    cache_.clear();
    version_ = version;
    valid_ = true;
  }
  const auto key = std::make_tuple(m, n, k);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  const GemmSignature sig = GemmSignature::for_linear(m, n, k, GemmDType::kF32, GemmDType::kF32);
  const std::string solution = source.solution_for(sig).value_or(std::string(kDefaultSolution));
  std::optional<cpu::GemmAlgo> algo = cpu::parse_gemm_algo(solution);
  if (!algo) {
    spdlog::warn("cpu: {} names solution '{}', which the CPU backend does not have; running the "
                 "default", sig.key(), solution);
    algo = cpu::GemmAlgo::kDefault;
  }
  cache_.emplace(key, *algo);
  return *algo;
}

}  // namespace tessera
