// What the engine reports as it works, for metrics and logs. Called on the engine thread, so
// implementations must be cheap and must not block (atomics, lock-free histograms).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/request/request.h"

namespace tessera {

struct StepReport {
  double seconds = 0;           // forward + sampling + emission
  int32_t num_seqs = 0;         // sequences in the batch
  int32_t num_tokens = 0;       // tokens in the batch
  int32_t prefill_tokens = 0;   // of which prefill (prompt or recompute) tokens
  int32_t decode_tokens = 0;    // of which decode tokens
  // Where the step's wall time went (schedule_seconds comes before `seconds`; the other four add
  // up to it):
  double schedule_seconds = 0;     // admission, preemption, prefix-cache lookups, batch building
  double launch_seconds = 0;       // the host issuing the forward and the sampling
  // The host's work while the device runs the step: sending the last step's held outputs to
  // their streams (time the device wait does not count when the device is still busy).
  double overlapped_seconds = 0;
  double device_wait_seconds = 0;  // the host blocked until the device finished the step
  double update_seconds = 0;       // output processing: stop checks, detokenizing, final messages
};

struct FinishReport {
  FinishReason reason = FinishReason::kNone;
  absl::StatusCode code = absl::StatusCode::kOk;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double queue_seconds = 0;
  double ttft_seconds = 0;      // 0 when no token was generated
  double total_seconds = 0;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_step(const StepReport& step) {}
  // A sequence's first token (time since arrival).
  virtual void on_first_token(double ttft_seconds) {}
  // Time between two consecutive tokens of one sequence.
  virtual void on_inter_token(double seconds) {}
  virtual void on_preemption() {}
  virtual void on_finish(const FinishReport& report) {}
};

}  // namespace tessera
