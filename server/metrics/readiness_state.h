// Whether the daemon should get traffic, for GET /readyz: ready only once the model is loaded
// and warmup is done, and not while draining or after a model fault. The daemon sets the flags
// from any thread; the admin listener reads them (atomics; the fault's text under a lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace tessera::server {

class ReadinessState {
 public:
  void set_model_loaded(bool loaded) { model_loaded_.store(loaded, std::memory_order_release); }
  // Warmup (GEMM tuning for the configured shapes). A daemon with nothing to warm up sets it
  // together with the model.
  void set_warmup_done(bool done) { warmup_done_.store(done, std::memory_order_release); }
  // GEMMs warmed up so far, for the not-ready reason.
  void set_warmup_progress(int64_t done, int64_t total) {
    warmup_total_.store(total, std::memory_order_relaxed);
    warmup_count_.store(done, std::memory_order_relaxed);
  }
  // Draining is final for the process: readiness never comes back once it starts.
  void set_draining() { draining_.store(true, std::memory_order_release); }
  // The model fault (the engine saw non-finite logits): final too; `reason` is what /readyz
  // says then (the engine's "model fault: ..."; the first one set is kept).
  void set_faulted(std::string reason);

  bool model_loaded() const { return model_loaded_.load(std::memory_order_acquire); }
  bool warmup_done() const { return warmup_done_.load(std::memory_order_acquire); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  bool faulted() const { return faulted_.load(std::memory_order_acquire); }

  bool ready() const { return not_ready_reason().empty(); }
  // Empty when ready; otherwise why not, the first that applies: "draining", the fault's reason,
  // "model loading", "warming up: 3/40 GEMMs" (or "warmup in progress" before any progress was
  // set).
  std::string not_ready_reason() const;

 private:
  std::atomic<bool> model_loaded_{false};
  std::atomic<bool> warmup_done_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> faulted_{false};
  mutable std::mutex fault_mu_;
  std::string fault_reason_;
  std::atomic<int64_t> warmup_count_{0};
  std::atomic<int64_t> warmup_total_{0};
};

}  // namespace tessera::server
