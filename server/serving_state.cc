#include "server/serving_state.h"

#include <grpcpp/health_check_service_interface.h>

namespace tessera::server {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kLoading: return "loading";
    case Phase::kWarmingUp: return "warming_up";
    case Phase::kServing: return "serving";
    case Phase::kFaulted: return "faulted";
    case Phase::kDraining: return "draining";
  }
  return "unknown";
}

ServingState::ServingState() : started_(std::chrono::steady_clock::now()) {}

void ServingState::set_phase(Phase phase) {
  phase_.store(phase, std::memory_order_release);
  publish_health();
}

bool ServingState::advance(Phase from, Phase to) {
  if (!phase_.compare_exchange_strong(from, to, std::memory_order_acq_rel)) return false;
  publish_health();
  return true;
}

void ServingState::set_fault(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(fault_mu_);
    if (fault_reason_.empty()) fault_reason_ = std::move(reason);
  }
  Phase current = phase();
  while (current != Phase::kDraining && current != Phase::kFaulted) {
    if (phase_.compare_exchange_weak(current, Phase::kFaulted, std::memory_order_acq_rel)) break;
  }
  publish_health();
}

std::string ServingState::fault_reason() const {
  std::lock_guard<std::mutex> lock(fault_mu_);
  return fault_reason_;
}

void ServingState::attach_health(grpc::HealthCheckServiceInterface* health) {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    health_ = health;
  }
  publish_health();
}

void ServingState::publish_health() {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (health_ == nullptr) return;
  const bool serving = phase() == Phase::kServing;
  health_->SetServingStatus("", serving);
  health_->SetServingStatus(kGenerationServiceName, serving);
}

double ServingState::uptime_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

}  // namespace tessera::server
