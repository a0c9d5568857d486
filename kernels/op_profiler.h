// Where a GPU step's time goes, op by op (TESSERA_PROFILE_OPS=1; issue 19's step profile): the
// backend marks the start of every op it enqueues with an event on its stream, and a step's end
// before it waits for the stream; once the stream is drained, each op's time is the gap to the
// next mark. Ops enqueued back to back on one stream run back to back, so the gaps are the ops'
// device times; the gap from a step's end to the next step's first op is device time spent
// waiting for the host ("between steps"). Totals per label accumulate over the process's life and
// are reported as a table (GpuBackend logs it when it is destroyed).
//
// A mark costs an event record (a few microseconds of host time); collective ops of other
// objects on the stream (a communicator's all-reduce) count toward the op marked before them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "kernels/gpu.h"

namespace tessera::gpu {

class OpProfiler {
 public:
  OpProfiler() = default;
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  ~OpProfiler();

  // An op labelled `label` starts now on `stream`.
  void mark(std::string_view label, gpuStream_t stream);
  // The step's ops are all enqueued on `stream`; call before waiting for it (a no-op when no op
  // was marked since the last call).
  void end_step(gpuStream_t stream);
  // After the stream is drained: the marks since the last collect() become totals.
  absl::Status collect();

  // Labels by total time, with calls, milliseconds per step and share of the total; steps are
  // end_step() calls.
  std::string report() const;

 private:
  struct Total {
    double ms = 0;
    int64_t calls = 0;
  };
  // The label of marks_[i]; kStepEnd for end_step()'s.
  static constexpr uint32_t kStepEnd = ~0u;
  uint32_t label_id(std::string_view label);
  absl::Status record(uint32_t id, gpuStream_t stream);

  std::vector<gpuEvent_t> pool_;   // events, reused after each collect()
  std::vector<uint32_t> marks_;    // label ids of pool_[0 .. marks_.size())
  std::vector<std::string> labels_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Total> totals_;      // by label id
  Total between_steps_;
  int64_t steps_ = 0;
  // The previous collect()'s last step end, kept to time the gap to the next step's first op.
  gpuEvent_t last_end_ = nullptr;
  bool has_last_end_ = false;
};

}  // namespace tessera::gpu
