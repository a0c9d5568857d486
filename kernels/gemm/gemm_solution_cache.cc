#include "kernels/gemm/gemm_solution_cache.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace tessera::gpu {

void GemmSolutionCache::sync_version(const GemmSolutionSource& source) {
  const uint64_t v = source.version();
  if (!has_version_ || v != version_) {
    resolved_.clear();
    version_ = v;
    has_version_ = true;
  }
}

const Gemm::Solution& GemmSolutionCache::solution(Gemm& gemm, GemmSolutionSource& source,
                                                  const GemmShape& shape) {
  sync_version(source);
  const GemmSignature sig = signature_of(shape);
  if (auto it = resolved_.find(sig); it != resolved_.end()) return it->second;
  // The answer is filed under the version read before asking: if the version moves meanwhile (a
  // warmup replacing a solution already handed out), the next call drops it and asks again,
  // rather than keeping an answer that may predate the move under the new version.
  const std::optional<std::string> name = source.solution_for(sig);
  if (!name) return resolved_.emplace(sig, untuned(gemm, shape)).first->second;
  absl::StatusOr<Gemm::Solution> s = gemm.resolve(shape, *name);
  if (!s.ok()) {
    if (warned_.insert(*name).second) {
      spdlog::warn("GEMM {}: solution \"{}\" cannot run ({}); using Default", sig.key(), *name,
                   s.status().ToString());
    }
    s = Gemm::Solution{};
  }
  return resolved_.emplace(sig, *std::move(s)).first->second;
}

const Gemm::Solution& GemmSolutionCache::untuned(Gemm& gemm, const GemmShape& shape) {
  const GemmSignature sig = signature_of(shape);
  if (auto it = untuned_.find(sig); it != untuned_.end()) return it->second;
  absl::StatusOr<Gemm::Solution> s = gemm.resolve(shape, gemm.untuned_solution(shape));
  return untuned_.emplace(sig, s.ok() ? *std::move(s) : Gemm::Solution{}).first->second;
}

}  // namespace tessera::gpu
