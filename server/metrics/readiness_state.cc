#include "server/metrics/readiness_state.h"

#include "absl/strings/str_cat.h"

namespace tessera::server {

void ReadinessState::set_faulted(std::string reason) {
  std::lock_guard<std::mutex> lock(fault_mu_);
  if (faulted()) return;
  fault_reason_ = std::move(reason);
  faulted_.store(true, std::memory_order_release);
}

std::string ReadinessState::not_ready_reason() const {
  if (draining()) return "draining";
  if (faulted()) {
    std::lock_guard<std::mutex> lock(fault_mu_);
    return fault_reason_;
  }
  if (!model_loaded()) return "model loading";
  if (!warmup_done()) {
    const int64_t total = warmup_total_.load(std::memory_order_relaxed);
    if (total <= 0) return "warmup in progress";
    return absl::StrCat("warming up: ", warmup_count_.load(std::memory_order_relaxed), "/", total,
                        " GEMMs");
  }
  return {};
}

}  // namespace tessera::server
