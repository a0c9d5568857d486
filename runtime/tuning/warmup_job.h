// One warmup: every GEMM of a warmup plan tuned on every device that runs it -- the decoder
// layers' GEMMs on every device, lm_head's only on the last (the pipeline stage that holds the
// head) -- each device in a thread of its own (devices tune in parallel; a device's GEMMs one after another). Progress is read by
// snapshot() (polling, the HTTP endpoint), waited for with wait_for_update() (the gRPC stream),
// or pushed to one callback (readiness).
//
// A time budget stops each device from starting another GEMM once it is spent (the rest are
// reported as skipped); cancel() stops them the same way. A GEMM being tuned always finishes:
// its time is bounded by the tuning config's per-candidate caps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/tuning/tuning_context.h"
#include "runtime/tuning/warmup_plan.h"

namespace tessera {

enum class WarmupState { kRunning, kDone, kCancelled, kFailed };
const char* warmup_state_name(WarmupState state);  // "running", "done", "cancelled", "failed"

struct WarmupOptions {
  double time_budget_seconds = 0;  // 0: no budget
  bool force = false;              // re-tune GEMMs that already have a result
};

struct WarmupSnapshot {
  WarmupState state = WarmupState::kRunning;
  size_t done = 0;   // GEMMs finished (tuned, cached, failed or skipped), over all devices
  size_t total = 0;  // plan size x devices
  double elapsed_seconds = 0;
  std::vector<GemmTuneReport> reports;  // finished GEMMs, in the order they finished
  std::string message;                  // the end's summary, or why it failed
  uint64_t sequence = 0;                // moves with every change
};

class WarmupJob {
 public:
  // Called after every change, from a device thread, with the job's lock released.
  using OnUpdate = std::function<void(WarmupState state, size_t done, size_t total)>;

  // Starts the device threads. `contexts` (not owned, in pipeline order) must outlive the job.
  // `runs_head[i]` says whether contexts[i]'s device runs lm_head (every tensor-parallel rank of
  // the last stage does); when none does (or it is empty), the last context.
  static std::shared_ptr<WarmupJob> start(std::vector<TuningContext*> contexts,
                                          std::vector<WarmupGemm> plan, WarmupOptions options,
                                          OnUpdate on_update = {}, std::vector<bool> runs_head = {});
  // cancel()s and waits for the threads.
  ~WarmupJob();
  WarmupJob(const WarmupJob&) = delete;
  WarmupJob& operator=(const WarmupJob&) = delete;

  // Asks the devices to stop after the GEMM they are tuning.
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  WarmupSnapshot snapshot() const;
  // Blocks until the sequence passes `seen`, the job has ended, or `timeout` passes.
  WarmupSnapshot wait_for_update(uint64_t seen, std::chrono::milliseconds timeout) const;
  // Blocks until every device has finished and the last callback has returned.
  WarmupSnapshot wait() const;

 private:
  // `head_devices` of the `devices` tune the lm_head GEMMs too (what the job's total counts).
  WarmupJob(std::vector<WarmupGemm> plan, WarmupOptions options, OnUpdate on_update,
            size_t devices, size_t head_devices);
  // `head`: this device holds lm_head and tunes its GEMMs too.
  void run_device(TuningContext* context, bool head);
  void record(GemmTuneReport report);
  void device_finished();

  const std::vector<WarmupGemm> plan_;
  const WarmupOptions options_;
  const OnUpdate on_update_;
  const std::chrono::steady_clock::time_point started_;
  std::atomic<bool> cancelled_{false};

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  WarmupSnapshot snap_;       // elapsed_seconds: set when the job ends (snapshot() before)
  size_t devices_running_;    // guarded by mu_
  bool budget_spent_ = false;  // guarded by mu_
  bool ended_ = false;         // the end's callback has returned; guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tessera
