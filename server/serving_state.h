// Where the daemon is in its life (loading -> [warming up ->] serving -> [faulted ->] draining),
// mirrored into the standard grpc.health.v1 service for "" and "tessera.v1.Generation": SERVING
// only while serving. Warming up (tuning mode warmup) is the GEMM warmup before serving: the
// model is loaded, Generation still answers UNAVAILABLE. Faulted: the loaded model failed at run
// time (the engine's model fault: non-finite logits) and serves nothing until tesserad restarts;
// Generation answers UNAVAILABLE with the reason. Also holds the served model once it is loaded.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "server/metrics/tessera_metrics.h"
#include "server/served_model.h"

namespace grpc {
class HealthCheckServiceInterface;
}

namespace tessera::server {

enum class Phase { kLoading, kWarmingUp, kServing, kFaulted, kDraining };
const char* phase_name(Phase phase);

inline constexpr const char* kGenerationServiceName = "tessera.v1.Generation";

class ServingState {
 public:
  ServingState();

  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  // Also updates the health service when one is attached.
  void set_phase(Phase phase);
  // set_phase(to) only while the phase is `from` (a drain that began meanwhile stays); whether
  // it moved.
  bool advance(Phase from, Phase to);
  // The model fault: phase kFaulted (from loading, warming up or serving; a drain stays a drain)
  // with `reason` (the engine's "model fault: ...") kept for the UNAVAILABLE that answers every
  // request from now on. Final for the process; the first reason set is kept.
  void set_fault(std::string reason);
  // Empty until set_fault.
  std::string fault_reason() const;
  // The server's health service (after the server is built); receives the current phase now.
  void attach_health(grpc::HealthCheckServiceInterface* health);

  // The served model: null until loaded. The model outlives every call that saw it (the daemon
  // destroys it only after the server has shut down).
  ServedModel* model() const { return model_.load(std::memory_order_acquire); }
  void set_model(ServedModel* model) { model_.store(model, std::memory_order_release); }

  double uptime_seconds() const;

  // Requests answered before they reach the engine (validation, queue full) are counted here.
  void set_metrics(TesseraMetrics* metrics) { metrics_.store(metrics, std::memory_order_release); }
  void count_rejected(absl::StatusCode code) const {
    if (TesseraMetrics* m = metrics_.load(std::memory_order_acquire)) m->on_rejected(code);
  }

 private:
  void publish_health();

  std::atomic<Phase> phase_{Phase::kLoading};
  std::atomic<ServedModel*> model_{nullptr};
  std::atomic<TesseraMetrics*> metrics_{nullptr};
  mutable std::mutex fault_mu_;
  std::string fault_reason_;
  std::mutex health_mu_;
  grpc::HealthCheckServiceInterface* health_ = nullptr;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace tessera::server
